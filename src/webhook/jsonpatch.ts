/**
 * RFC 6902 JSON Patch generation by diffing two JSON documents.
 *
 * The webhook builds the injected pod by editing a copy of the raw request
 * JSON, then diffs the copy against the original. Diffing (rather than
 * hand-writing operations) is what istio and controller-runtime do, and it
 * means an unchanged pod yields exactly zero operations.
 */
import { isObject, jsonEqual, type JsonObject, type JsonValue } from "./json.ts";

export type JsonPatchOperation =
  | { readonly op: "add"; readonly path: string; readonly value: JsonValue }
  | { readonly op: "replace"; readonly path: string; readonly value: JsonValue }
  | { readonly op: "remove"; readonly path: string };

/** Escapes one reference token (RFC 6901 §4): `~` first, then `/`. */
export function escapePointerToken(token: string): string {
  // Order matters: escaping `/` first would turn `~1` into `~01`.
  return token.replaceAll("~", "~0").replaceAll("/", "~1");
}

/**
 * The operations that turn `from` into `to`. Pure; never throws. Applying
 * the result to `from` in order yields a document equal to `to`.
 *
 * Arrays are diffed by their common prefix and suffix, with the differing
 * middle compared position by position: appending a container or an env var
 * is one `add` at its index, and editing one field of one element is one
 * `replace` at that field, never a rewrite of the whole array.
 */
export function diffJson(from: JsonValue, to: JsonValue): JsonPatchOperation[] {
  const ops: JsonPatchOperation[] = [];
  diffInto(from, to, "", ops);
  return ops;
}

function diffInto(a: JsonValue, b: JsonValue, path: string, ops: JsonPatchOperation[]): void {
  if (jsonEqual(a, b)) return;
  if (Array.isArray(a) && Array.isArray(b)) return diffArrays(a, b, path, ops);
  if (isObject(a) && isObject(b)) return diffObjects(a, b, path, ops);
  ops.push({ op: "replace", path, value: b });
}

function diffObjects(a: JsonObject, b: JsonObject, path: string, ops: JsonPatchOperation[]): void {
  for (const k of Object.keys(a)) {
    if (!Object.hasOwn(b, k)) ops.push({ op: "remove", path: `${path}/${escapePointerToken(k)}` });
  }
  for (const [k, bv] of Object.entries(b)) {
    const p = `${path}/${escapePointerToken(k)}`;
    const av = a[k];
    if (av === undefined || !Object.hasOwn(a, k)) ops.push({ op: "add", path: p, value: bv });
    else diffInto(av, bv, p, ops);
  }
}

function diffArrays(a: JsonValue[], b: JsonValue[], path: string, ops: JsonPatchOperation[]): void {
  let prefix = 0;
  const min = Math.min(a.length, b.length);
  while (prefix < min && jsonEqual(a[prefix] ?? null, b[prefix] ?? null)) prefix++;
  let suffix = 0;
  while (
    suffix < min - prefix &&
    jsonEqual(a[a.length - 1 - suffix] ?? null, b[b.length - 1 - suffix] ?? null)
  ) {
    suffix++;
  }
  const aMid = a.length - prefix - suffix;
  const bMid = b.length - prefix - suffix;
  const common = Math.min(aMid, bMid);
  for (let i = 0; i < common; i++) diffInto(a[prefix + i] ?? null, b[prefix + i] ?? null, `${path}/${prefix + i}`, ops);
  // Extra new elements go in ascending order at the end of the middle, which
  // is before the common suffix, so every index is valid when it is applied.
  for (let i = common; i < bMid; i++) ops.push({ op: "add", path: `${path}/${prefix + i}`, value: b[prefix + i] ?? null });
  // Surplus old elements are removed from the highest index down, so earlier
  // removals never shift the indices of later ones.
  for (let i = aMid - 1; i >= common; i--) ops.push({ op: "remove", path: `${path}/${prefix + i}` });
}
