import { fileURLToPath } from "node:url";
import { join } from "node:path";

/** `../shared/fixtures/kube-apiserver`, relative to the repository root. */
export const FIXTURES_ROOT = fileURLToPath(new URL("../../../shared/fixtures/kube-apiserver/", import.meta.url));

export function fixturePath(rel: string): string {
  return join(FIXTURES_ROOT, rel);
}
