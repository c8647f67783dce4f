/**
 * The one test for "a JSON object" (not null, not an array) that every
 * reader of parsed JSON or YAML starts from: apiserver answers, kubeconfigs,
 * annotations, patches. One definition, so every reader agrees on what an
 * object is.
 */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
