/**
 * The pod annotations that make up shardcar's user interface, and their
 * validation. Every value is checked (by the settings vocabulary,
 * src/settings/pod-settings.ts, which the proxy's flags share); a bad one
 * produces a message that names the annotation, quotes the value and says
 * what is allowed, because that message is all a user sees (in the
 * ReplicaSet's FailedCreate event).
 *
 * Pure: no I/O, no clock.
 */
import { SETTING_ANNOTATIONS, settingsFromAnnotations, type PodSettings } from "../settings/pod-settings.ts";

export type { PodSettings };

/** Every annotation (and the one label) shardcar reads or writes. */
export const ANNOTATIONS = {
  inject: "shardcar.io/inject",
  ...SETTING_ANNOTATIONS,
  /** Written by the webhook: what it injected. Never set it by hand. */
  status: "shardcar.io/status",
} as const;

const KNOWN = new Set<string>(Object.values(ANNOTATIONS));
const PREFIX = "shardcar.io/";

export type ParseResult = { readonly ok: true; readonly settings: PodSettings } | { readonly ok: false; readonly problems: readonly string[] };

/** Whether the pod asked for injection, and where the answer came from. */
export type InjectToggle =
  | { readonly ok: true; readonly inject: boolean; readonly source: "label" | "annotation" | "default" }
  | { readonly ok: false; readonly problem: string };

/**
 * Reads the `shardcar.io/inject` toggle. The label wins over the annotation
 * (the label is what the webhook's objectSelector sees, so it is the more
 * deliberate signal); only `"true"` and `"false"` are accepted.
 */
export function readInjectToggle(labels: Readonly<Record<string, string>>, annotations: Readonly<Record<string, string>>): InjectToggle {
  for (const source of ["label", "annotation"] as const) {
    const value = source === "label" ? labels[ANNOTATIONS.inject] : annotations[ANNOTATIONS.inject];
    if (value === undefined) continue;
    if (value === "true" || value === "false") return { ok: true, inject: value === "true", source };
    return { ok: false, problem: `invalid ${ANNOTATIONS.inject} ${source} ${JSON.stringify(value)}: allowed values are "true" and "false"` };
  }
  return { ok: true, inject: false, source: "default" };
}

/**
 * Validates every `shardcar.io/` annotation of an opted-in pod. Collects all
 * problems rather than stopping at the first, so one failed rollout shows
 * everything to fix.
 */
export function parsePodSettings(annotations: Readonly<Record<string, string>>): ParseResult {
  const problems: string[] = [];
  for (const key of Object.keys(annotations).sort()) {
    // Fail closed on typos: `shardcar.io/shard: 0/3` silently ignored would
    // run every replica over the whole keyspace.
    if (key.startsWith(PREFIX) && !KNOWN.has(key)) {
      problems.push(`unknown annotation ${key}: shardcar understands ${[...KNOWN].sort().join(", ")}`);
    }
  }
  const parsed = settingsFromAnnotations(annotations);
  if (!parsed.ok) problems.push(...parsed.problems.map((p) => p.message));
  if (problems.length > 0 || !parsed.ok) return { ok: false, problems };
  return { ok: true, settings: parsed.settings };
}
