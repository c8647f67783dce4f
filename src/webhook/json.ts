/**
 * Plain JSON values and the narrow readers the webhook uses to look into a
 * pod without a typed model. The webhook never decodes a pod into a class:
 * fields it does not know (newer Kubernetes, other webhooks' additions) must
 * survive untouched, so everything here reads the raw parsed JSON.
 */

import { isRecord } from "../is-record.ts";

export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

/** `isRecord`, for values already known to be parsed JSON. */
export function isObject(v: unknown): v is JsonObject {
  return isRecord(v);
}

/** `v` as an object, or `undefined` when it is absent or not an object. */
export function obj(v: JsonValue | undefined): JsonObject | undefined {
  return isObject(v) ? v : undefined;
}

/** `v` as an array, or an empty array when it is absent or not an array. */
export function arr(v: JsonValue | undefined): JsonValue[] {
  return Array.isArray(v) ? v : [];
}

/** `v` as a string, or `undefined`. */
export function str(v: JsonValue | undefined): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** A string-to-string map such as `metadata.labels`; non-string values are ignored. */
export function stringMap(v: JsonValue | undefined): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  const o = obj(v);
  if (o === undefined) return out;
  for (const [k, val] of Object.entries(o)) if (typeof val === "string") out[k] = val;
  return out;
}

/**
 * How deeply `v` nests objects and arrays (a scalar is 0), counted without
 * recursion and only up to `limit + 1`: a caller that copies or compares
 * recursively asks first whether the stack will hold.
 */
export function nestingDepth(v: JsonValue, limit: number): number {
  let deepest = 0;
  const stack: Array<{ value: JsonValue; depth: number }> = [{ value: v, depth: 0 }];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const { value, depth } = top;
    if (value === null || typeof value !== "object") continue;
    if (depth + 1 > deepest) deepest = depth + 1;
    if (deepest > limit) return deepest;
    for (const child of Array.isArray(value) ? value : Object.values(value)) stack.push({ value: child, depth: depth + 1 });
  }
  return deepest;
}

/** Deep copy of parsed JSON (structuredClone keeps exactly the JSON shapes). */
export function cloneJson<T extends JsonValue>(v: T): T {
  return structuredClone(v);
}

/** Structural equality of two JSON values; object key order is ignored. */
export function jsonEqual(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i] ?? null, b[i] ?? null)) return false;
    return true;
  }
  if (isObject(a)) {
    if (!isObject(b)) return false;
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    for (const k of ka) {
      if (!Object.hasOwn(b, k)) return false;
      if (!jsonEqual(a[k] ?? null, b[k] ?? null)) return false;
    }
    return true;
  }
  return false;
}
