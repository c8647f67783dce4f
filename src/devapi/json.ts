/**
 * JSON the way a Go apiserver writes it: struct fields in declaration order,
 * map keys sorted, and `<`, `>`, `&`, U+2028, U+2029 escaped (encoding/json
 * escapes HTML by default, so `<none>` travels as `\u003cnone\u003e`).
 * Pure functions, no I/O.
 */
import type { KubeObject, ObjectMeta } from "./types.ts";
import { isRecord } from "../is-record.ts";

const GO_ESCAPES: Readonly<Record<string, string>> = {
  "<": "\\u003c",
  ">": "\\u003e",
  "&": "\\u0026",
  "\u2028": "\\u2028",
  "\u2029": "\\u2029",
};
const GO_ESCAPE_RE = /[<>&\u2028\u2029]/g;

/** `JSON.stringify` plus Go's HTML escaping; the characters only ever occur inside strings. */
export function goJson(value: unknown): string {
  const s = JSON.stringify(value);
  return GO_ESCAPE_RE.test(s) ? s.replace(GO_ESCAPE_RE, (c) => GO_ESCAPES[c] ?? c) : s;
}

/** A copy of `value` with every object's keys sorted, as Go marshals `map[string]interface{}`. */
export function sortedDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedDeep);
  if (isRecord(value)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) out[k] = sortedDeep(value[k]);
    return out;
  }
  return value;
}

function sortedRecord(value: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(value).sort()) out[k] = value[k] as string;
  return out;
}

/** metav1.ObjectMeta's field order; anything else follows in its own order. */
const META_ORDER = [
  "name",
  "generateName",
  "namespace",
  "selfLink",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "labels",
  "annotations",
  "ownerReferences",
  "finalizers",
  "managedFields",
] as const;

/** `metadata` reordered as metav1.ObjectMeta marshals, labels and annotations sorted, empty values dropped. */
export function orderedMeta(meta: ObjectMeta): ObjectMeta {
  const out: Record<string, unknown> = {};
  const src: Record<string, unknown> = meta;
  for (const k of META_ORDER) {
    const v = src[k];
    if (v === undefined || v === null || v === "") continue;
    if ((k === "labels" || k === "annotations") && isRecord(v)) {
      if (Object.keys(v).length === 0) continue;
      out[k] = sortedRecord(v as Record<string, string>);
    } else {
      out[k] = v;
    }
  }
  for (const k of Object.keys(meta)) {
    if (!(META_ORDER as readonly string[]).includes(k) && src[k] !== undefined) out[k] = src[k];
  }
  return out;
}

/**
 * The canonical stored form of a typed object: `kind`, `apiVersion`,
 * `metadata` first, then the other top-level fields in the order given.
 */
export function canonicalTyped(obj: KubeObject, apiVersion: string, kind: string): KubeObject {
  const out: KubeObject = { kind, apiVersion, metadata: orderedMeta(obj.metadata ?? {}) };
  for (const k of Object.keys(obj)) {
    if (k !== "kind" && k !== "apiVersion" && k !== "metadata") out[k] = obj[k];
  }
  return out;
}

/** The canonical stored form of an unstructured object: every key sorted, at every depth. */
export function canonicalUnstructured(obj: KubeObject, apiVersion: string, kind: string): KubeObject {
  const meta = obj.metadata ?? {};
  const cleaned: ObjectMeta = {};
  for (const k of Object.keys(meta)) {
    const v = meta[k];
    if (v !== undefined && v !== null && v !== "") cleaned[k] = v;
  }
  return sortedDeep({ ...obj, apiVersion, kind, metadata: cleaned }) as KubeObject;
}
