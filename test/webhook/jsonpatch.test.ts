import t from "tap";
import jsonpatch from "fast-json-patch";
import { isDeepStrictEqual } from "node:util";
import type { JsonValue } from "../../src/webhook/json.ts";
import { diffJson, escapePointerToken } from "../../src/webhook/jsonpatch.ts";

const apply = (doc: JsonValue, ops: ReturnType<typeof diffJson>): unknown =>
  jsonpatch.applyPatch(structuredClone(doc), structuredClone(ops) as jsonpatch.Operation[], true, false).newDocument;

t.test("equal documents give no operations", async (t) => {
  const doc: JsonValue = { a: [1, { b: "c" }], d: null, e: { f: true } };
  t.same(diffJson(doc, structuredClone(doc)), []);
  t.same(diffJson({ x: 1, y: 2 }, { y: 2, x: 1 }), [], "key order is not a difference");
});

t.test("keys with '/' and '~' are escaped as RFC 6901 says, '~' first", async (t) => {
  t.equal(escapePointerToken("shardcar.io/status"), "shardcar.io~1status");
  t.equal(escapePointerToken("a~/b"), "a~0~1b");
  const ops = diffJson({ metadata: { annotations: {} } }, { metadata: { annotations: { "x/~y": "1" } } });
  t.same(ops, [{ op: "add", path: "/metadata/annotations/x~1~0y", value: "1" }]);
  t.same(apply({ metadata: { annotations: {} } }, ops), { metadata: { annotations: { "x/~y": "1" } } });
});

t.test("appending to an array is one add at its index; editing one field is one replace", async (t) => {
  t.same(diffJson({ l: [1, 2] }, { l: [1, 2, 3] }), [{ op: "add", path: "/l/2", value: 3 }]);
  t.same(diffJson({ l: [{ n: "a", v: 1 }, { n: "b" }] }, { l: [{ n: "a", v: 2 }, { n: "b" }] }), [{ op: "replace", path: "/l/0/v", value: 2 }]);
  t.same(diffJson({ l: [1, 2, 3, 4] }, { l: [1, 4] }), [{ op: "remove", path: "/l/2" }, { op: "remove", path: "/l/1" }], "removals from the highest index down");
});

// Property: for random documents a and b, applying diff(a, b) to a gives b.
// Run through fast-json-patch with validation on, so an index that is out of
// range when its operation is applied fails here.
t.test("applying diff(a, b) to a yields b, for 3000 random pairs", async (t) => {
  // mulberry32: a small PRNG whose low bits are usable (an LCG's are not).
  let seed = 7;
  const rnd = (n: number): number => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) % n;
  };
  const keys = ["a", "b", "c/d", "e~f", "g"];
  const gen = (depth: number): JsonValue => {
    const k = rnd(depth > 2 ? 4 : 7);
    if (k === 0) return null;
    if (k === 1) return rnd(2) === 0;
    if (k === 2) return rnd(5);
    if (k === 3) return ["x", "y", "z"][rnd(3)] ?? "x";
    if (k === 4 || k === 5) return Array.from({ length: rnd(5) }, () => gen(depth + 1));
    const o: Record<string, JsonValue> = {};
    for (const key of keys) if (rnd(2) === 0) o[key] = gen(depth + 1);
    return o;
  };
  // Make b a mutation of a half the time, so long common prefixes and
  // suffixes are exercised, not just unrelated documents.
  const mutate = (v: JsonValue): JsonValue => {
    if (Array.isArray(v)) {
      const c = v.map((x) => (rnd(4) === 0 ? mutate(x) : x));
      if (rnd(3) === 0) c.splice(rnd(c.length + 1), 0, gen(3));
      if (rnd(3) === 0 && c.length > 0) c.splice(rnd(c.length), 1 + rnd(2));
      return c;
    }
    if (v !== null && typeof v === "object") {
      const c: Record<string, JsonValue> = { ...v };
      for (const key of keys) {
        const r = rnd(6);
        if (r === 0) delete c[key];
        else if (r === 1) c[key] = gen(3);
        else if (r === 2 && c[key] !== undefined) c[key] = mutate(c[key] ?? null);
      }
      return c;
    }
    return rnd(2) === 0 ? v : gen(3);
  };
  let failures = 0;
  let operations = 0;
  for (let i = 0; i < 3000; i++) {
    const a = gen(0);
    const b = rnd(2) === 0 ? mutate(a) : gen(0);
    let got: unknown;
    try {
      const ops = diffJson(a, b);
      operations += ops.length;
      got = apply(a, ops);
    } catch (e) {
      got = e;
    }
    if (!isDeepStrictEqual(got, b) && failures++ < 3) t.same(got, b, `pair ${i}: ${JSON.stringify(a)} -> ${JSON.stringify(b)}`);
  }
  t.equal(failures, 0, "no pair failed");
  t.ok(operations > 2000, `the pairs differed (${operations} operations)`);
});
