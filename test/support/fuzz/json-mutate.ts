/**
 * Structural mutations of a JSON document, for any endpoint that reads JSON
 * (AdmissionReviews, lock objects): drop, duplicate or retype a field
 * anywhere, plant huge strings and deep nesting, and byte-level damage to
 * the text (truncation, non-JSON). Each returns a description of what it did,
 * so a finding says how its input was made.
 */
import type { Random } from "./random.ts";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface Mutated<T> {
  readonly value: T;
  readonly did: string;
}

/** Every location in `doc`: a path of keys and indexes, and its value. */
export function locations(doc: Json, max = 2000): Array<{ path: Array<string | number>; value: Json }> {
  const out: Array<{ path: Array<string | number>; value: Json }> = [];
  const stack: Array<{ path: Array<string | number>; value: Json }> = [{ path: [], value: doc }];
  while (stack.length > 0 && out.length < max) {
    const at = stack.pop() as { path: Array<string | number>; value: Json };
    out.push(at);
    if (Array.isArray(at.value)) at.value.forEach((v, i) => stack.push({ path: [...at.path, i], value: v }));
    else if (at.value !== null && typeof at.value === "object") for (const [k, v] of Object.entries(at.value)) stack.push({ path: [...at.path, k], value: v });
  }
  return out;
}

function parentOf(doc: Json, path: ReadonlyArray<string | number>): Json | undefined {
  let at: Json | undefined = doc;
  for (const p of path.slice(0, -1)) {
    if (at === null || typeof at !== "object") return undefined;
    at = Array.isArray(at) ? at[p as number] : at[p as string];
  }
  return at;
}

function setAt(doc: Json, path: ReadonlyArray<string | number>, value: Json | undefined): Json {
  if (path.length === 0) return value ?? null;
  const parent = parentOf(doc, path);
  const key = path[path.length - 1] as string | number;
  if (Array.isArray(parent)) {
    if (value === undefined) parent.splice(key as number, 1);
    else parent[key as number] = value;
  } else if (parent !== null && typeof parent === "object" && parent !== undefined) {
    if (value === undefined) delete parent[key as string];
    else parent[key as string] = value;
  }
  return doc;
}

/** Nesting `depth` levels deep, built without recursion. */
export function deeplyNested(depth: number, kind: "array" | "object"): Json {
  let v: Json = "bottom";
  for (let i = 0; i < depth; i++) v = kind === "array" ? [v] : { d: v };
  return v;
}

/** The same as text, for depths whose JSON.stringify would overflow the stack. */
export function deeplyNestedText(depth: number, kind: "array" | "object"): string {
  return kind === "array" ? `${"[".repeat(depth)}"bottom"${"]".repeat(depth)}` : `${'{"d":'.repeat(depth)}"bottom"${"}".repeat(depth)}`;
}

const PATH_TEXT = (path: ReadonlyArray<string | number>): string => `/${path.join("/")}`;

/** A value of another JSON type than `v` (or an odd one of the same). */
export function retype(rnd: Random, v: Json): Json {
  const all: Json[] = [null, true, false, 0, -1, 1.5, 2 ** 53 + 1, "", "x", "true", "false", [], [v], {}, { v }];
  const other = all.filter((o) => typeof o !== typeof v || (Array.isArray(o) !== Array.isArray(v)));
  return rnd.pick(other.length > 0 ? other : all);
}

/** One structural mutation of a copy of `doc`; the text form comes from {@link render}. */
export function mutateJson(rnd: Random, doc: Json): Mutated<Json> {
  const copy = structuredClone(doc);
  const locs = locations(copy);
  const target = rnd.pick(locs);
  const where = PATH_TEXT(target.path);
  switch (rnd.int(7)) {
    case 0:
      if (target.path.length === 0) return { value: {}, did: "replace the document with {}" };
      return { value: setAt(copy, target.path, undefined), did: `drop ${where}` };
    case 1: {
      const parent = parentOf(copy, target.path);
      if (Array.isArray(parent)) {
        parent.push(structuredClone(target.value));
        return { value: copy, did: `duplicate ${where} at the end of its array` };
      }
      if (parent !== null && typeof parent === "object" && parent !== undefined && target.path.length > 0) {
        parent[`${String(target.path[target.path.length - 1])}-copy`] = structuredClone(target.value);
        return { value: copy, did: `copy ${where} under another key` };
      }
      return { value: [copy, copy], did: "the document twice, in an array" };
    }
    case 2: {
      const v = retype(rnd, target.value);
      return { value: setAt(copy, target.path, v), did: `retype ${where} to ${JSON.stringify(v)}` };
    }
    case 3: {
      const n = rnd.weighted([
        [3, rnd.between(1000, 70_000)],
        [1, rnd.between(256 * 1024, 1024 * 1024)],
      ]);
      return { value: setAt(copy, target.path, "x".repeat(n)), did: `a string of ${n} characters at ${where}` };
    }
    case 4: {
      // Deeper ones are text (mutateText): a nested value this deep still
      // clones and stringifies here, where a deeper one would not.
      const depth = rnd.pick([100, 1000]);
      const kind = rnd.pick(["array", "object"] as const);
      return { value: setAt(copy, target.path, deeplyNested(depth, kind)), did: `nesting ${depth} ${kind}s deep at ${where}` };
    }
    case 5: {
      const key = rnd.pick(["__proto__", "constructor", "", "\u0000", "é", "metadata", "kind"]);
      const parent = target.value !== null && typeof target.value === "object" && !Array.isArray(target.value) ? target.value : copy;
      if (parent !== null && typeof parent === "object" && !Array.isArray(parent)) parent[key] = retype(rnd, null);
      return { value: copy, did: `add key ${JSON.stringify(key)} at ${where}` };
    }
    default: {
      const v = rnd.pick(["", " ", "\u0000", "\ud800", "😀".repeat(50), "-1", "9".repeat(400), "null"]);
      return { value: setAt(copy, target.path, v), did: `the string ${JSON.stringify(v.slice(0, 20))}${v.length > 20 ? "…" : ""} at ${where}` };
    }
  }
}

/** Damage to the text itself: what no JSON encoder would write. */
export function mutateText(rnd: Random, text: Buffer): Mutated<Buffer> {
  switch (rnd.int(7)) {
    case 0: {
      const at = rnd.int(text.length + 1);
      return { value: text.subarray(0, at), did: `truncated to ${at} of ${text.length} bytes` };
    }
    case 1: {
      const at = rnd.int(text.length);
      const b = Buffer.from(text);
      b[at] = rnd.int(256);
      return { value: b, did: `byte ${at} set to 0x${(b[at]).toString(16)}` };
    }
    case 2:
      return { value: Buffer.concat([text, Buffer.from(rnd.pick(["}", "]", ",", " {}", "\u0000", "garbage"]))]), did: "trailing bytes after the document" };
    case 3:
      return { value: Buffer.from(rnd.pick(["", "null", "[]", "true", "0", '"x"', "{", "not json", "\ufeff{}"])), did: "a body that is not the document" };
    case 4: {
      const depth = rnd.pick([10_000, 100_000, 500_000]);
      return { value: Buffer.from(deeplyNestedText(depth, rnd.pick(["array", "object"] as const))), did: `the body is ${depth} levels of nesting` };
    }
    case 5: {
      // The document kept, with a member nested deeper than a recursive
      // encoder can go: it parses, and breaks whoever writes it back.
      const s = text.toString("utf8");
      const end = s.lastIndexOf("}");
      if (end <= 0) return { value: text, did: "unchanged" };
      const depth = rnd.pick([20_000, 200_000]);
      return { value: Buffer.from(`${s.slice(0, end)},"deep":${deeplyNestedText(depth, rnd.pick(["array", "object"] as const))}${s.slice(end)}`), did: `a member ${depth} levels deep added to the document` };
    }
    default: {
      // A duplicate key: JSON.parse keeps the last, other parsers the first.
      const s = text.toString("utf8");
      const i = s.indexOf('"', 1);
      const j = i === -1 ? -1 : s.indexOf(",", i);
      if (j === -1) return { value: text, did: "unchanged" };
      return { value: Buffer.from(`${s.slice(0, j)},${s.slice(1, j)}${s.slice(j)}`), did: "the first member repeated (a duplicate key)" };
    }
  }
}

/** The document as text; deep nesting that JSON.stringify cannot write is kept as it is. */
export function render(doc: Json): Buffer {
  try {
    return Buffer.from(JSON.stringify(doc));
  } catch {
    return Buffer.from("{}");
  }
}
