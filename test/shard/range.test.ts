import t from "tap";
import {
  HashMatcher,
  KEYSPACE_END,
  complement,
  contains,
  difference,
  equal,
  intersect,
  makeRange,
  normalize,
  shardRange,
  size,
  split,
  union,
  type Range,
} from "../../src/shard/range.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { canonicalSelector, parseSelector } from "../../src/shard/selector.ts";

let seed = 7;
const rnd = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
const rnd64 = (): bigint => (BigInt(rnd()) << 33n) ^ (BigInt(rnd()) << 2n) ^ BigInt(rnd() & 3);
function randomRanges(): Range[] {
  return Array.from({ length: 1 + (rnd() % 5) }, () => {
    const a = rnd64();
    const b = rnd64();
    return a === b ? makeRange(a, a + 1n) : makeRange(a < b ? a : b, a < b ? b : a);
  });
}

t.test("split(N) covers [0, 2^64) exactly once for every N up to 300", async (t) => {
  for (let n = 1; n <= 300; n++) {
    const parts = split(n);
    t.equal(parts[0]?.start, 0n);
    t.equal(parts[n - 1]?.end, KEYSPACE_END);
    for (let i = 1; i < n; i++) {
      if (parts[i]?.start !== parts[i - 1]?.end) t.fail(`gap or overlap between shard ${i - 1} and ${i} of ${n}`);
    }
    t.equal(size(parts), KEYSPACE_END, `N=${n} sizes add up`);
  }
});

t.test("shardRange uses floor(i*2^64/N): the N=3 boundaries match kep-5866.md", async (t) => {
  t.equal(shardRange(1, 3).start, 0x5555555555555555n);
  t.equal(shardRange(2, 3).start, 0xaaaaaaaaaaaaaaaan);
  t.equal(shardRange(2, 3).end, KEYSPACE_END);
  t.throws(() => shardRange(3, 3));
  t.throws(() => shardRange(-1, 3));
});

t.test("every hash lands in exactly one of N shards", async (t) => {
  for (const n of [1, 2, 3, 7, 17, 64]) {
    const matchers = split(n).map((r) => new HashMatcher([r]));
    for (let k = 0; k < 300; k++) {
      const v = `uid-${rnd()}`;
      t.equal(matchers.filter((m) => m.matchesString(v)).length, 1, `N=${n} ${v}`);
    }
  }
});

t.test("HashMatcher agrees with the bigint contains() on random ranges and hashes", async (t) => {
  for (let k = 0; k < 300; k++) {
    const ranges = randomRanges();
    const m = new HashMatcher(ranges);
    for (let j = 0; j < 20; j++) {
      const v = `v${rnd()}`;
      if (m.matchesString(v) !== contains(ranges, fnv1a64(v))) t.fail(`disagree on ${v}`);
    }
    // Bounds themselves: start is in, end is out.
    for (const r of ranges) {
      const hi = Number(r.start >> 32n);
      const lo = Number(r.start & 0xffffffffn);
      t.ok(m.matchesParts(hi, lo), "start is included");
    }
  }
  t.ok(new HashMatcher([makeRange(0n, KEYSPACE_END)]).matchesParts(0xffffffff, 0xffffffff), "2^64-1 is inside the full range");
  t.notOk(new HashMatcher([]).matchesParts(0, 0), "the empty set matches nothing");
});

t.test("set algebra: union, intersection, difference and complement obey their laws", async (t) => {
  for (let k = 0; k < 200; k++) {
    const a = randomRanges();
    const b = randomRanges();
    t.ok(equal(union(intersect(a, b), difference(a, b)), normalize(a)), "(a∩b) ∪ (a−b) = a");
    t.equal(size(intersect(difference(a, b), b)), 0n, "(a−b) ∩ b = ∅");
    t.equal(size(a) + size(complement(a)), KEYSPACE_END, "|a| + |¬a| = 2^64");
    t.equal(size(union(a, b)), size(a) + size(b) - size(intersect(a, b)), "inclusion–exclusion");
  }
});

t.test("print then parse round-trips any normalised range set", async (t) => {
  for (let k = 0; k < 300; k++) {
    const ranges = normalize(randomRanges());
    const text = canonicalSelector("uid", ranges);
    if (text === undefined) continue;
    const back = parseSelector(text);
    t.same(back.ranges, ranges);
    t.equal(back.key, "uid");
  }
  t.equal(canonicalSelector("uid", []), undefined, "the empty set has no selector");
});

t.test("makeRange refuses empty, inverted and out-of-keyspace ranges", async (t) => {
  t.throws(() => makeRange(5n, 5n));
  t.throws(() => makeRange(6n, 5n));
  t.throws(() => makeRange(-1n, 5n));
  t.throws(() => makeRange(0n, KEYSPACE_END + 1n));
});
