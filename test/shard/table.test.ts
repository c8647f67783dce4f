import t from "tap";
import { rng } from "../support/rng.ts";
import { FULL_RANGE, intersect, shardRange, union, equal, type Range } from "../../src/shard/range.ts";
import { assignSlots, slotRange, slotsOf, slotsToRanges, MAX_SLOT_COUNT, type SlotOwners } from "../../src/shard/table.ts";


const names = (n: number, prefix = "m"): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

function counts(owners: SlotOwners): Map<string, number> {
  const c = new Map<string, number>();
  for (const o of owners) if (o !== undefined) c.set(o, (c.get(o) ?? 0) + 1);
  return c;
}

/** Slots whose owner changed from one member to another (fresh claims of unowned slots are not moves). */
function moved(prev: SlotOwners, next: SlotOwners): number {
  let n = 0;
  prev.forEach((o, s) => {
    if (o !== undefined && next[s] !== o) n++;
  });
  return n;
}

t.test("slotRange is shardRange: ring members and static i/N agree on every bound", async (t) => {
  for (const n of [1, 3, 7, 256]) for (let i = 0; i < n; i++) t.same(slotRange(i, n), shardRange(i, n));
});

t.test("assignSlots gives every slot to exactly one member, from the member set", async (t) => {
  for (const [n, s] of [[1, 256], [3, 256], [4, 7], [7, 4], [10, 1024]] as const) {
    const m = names(n);
    const owners = assignSlots(m, undefined, s);
    t.equal(owners.length, s);
    t.ok(owners.every((o) => o !== undefined && m.includes(o)), `${n} members, ${s} slots: all owned by members`);
  }
});

t.test("with no members every slot is unowned", async (t) => {
  const owners = assignSlots([], ["a", "b"], 2);
  t.same(owners, [undefined, undefined]);
});

t.test("assignSlots is balanced within one slot, from scratch and after random churn", async (t) => {
  const r = rng(1);
  let prev: SlotOwners = assignSlots(names(3), undefined, 256);
  let pool = names(3);
  for (let round = 0; round < 300; round++) {
    if (pool.length > 1 && r() < 0.45) pool = pool.filter((_, i) => i !== Math.floor(r() * pool.length));
    else pool = [...pool, `n-${round}`];
    const next = assignSlots(pool, prev, 256);
    const c = [...counts(next).values()];
    const maxMember = Math.min(pool.length, 256);
    t.equal(c.length, maxMember, `round ${round}: every member (up to the slot count) owns something`);
    t.ok(Math.max(...c) - Math.min(...c) <= 1, `round ${round}: counts ${Math.min(...c)}..${Math.max(...c)}`);
    prev = next;
  }
});

t.test("each continuing member keeps min(previous, new quota) of its own slots: no needless move", async (t) => {
  const r = rng(2);
  let prev: SlotOwners = assignSlots(names(5), undefined, 256);
  let pool = names(5);
  for (let round = 0; round < 300; round++) {
    const before = pool;
    if (pool.length > 1 && r() < 0.5) pool = pool.filter((_, i) => i !== Math.floor(r() * pool.length));
    if (r() < 0.6) pool = [...pool, `n-${round}`];
    const next = assignSlots(pool, prev, 256);
    for (const m of before.filter((x) => pool.includes(x))) {
      const p = new Set(slotsOf(prev, m));
      const q = slotsOf(next, m);
      const kept = q.filter((s) => p.has(s)).length;
      t.equal(kept, Math.min(p.size, q.length), `round ${round}: ${m} kept ${kept} of ${p.size} with quota ${q.length}`);
    }
    prev = next;
  }
});

t.test("adding one member to a balanced table moves at most ceil(S/(N+1)) slots", async (t) => {
  for (let n = 1; n <= 16; n++) {
    const prev = assignSlots(names(n), undefined, 256);
    const next = assignSlots([...names(n), "zz-new"], prev, 256);
    t.ok(moved(prev, next) <= Math.ceil(256 / (n + 1)), `${n}→${n + 1}: moved ${moved(prev, next)}`);
    t.equal(slotsOf(next, "zz-new").length, moved(prev, next), "every moved slot went to the newcomer");
  }
});

t.test("removing one member moves exactly that member's slots (S ≥ N²)", async (t) => {
  for (let n = 2; n <= 16; n++) {
    const prev = assignSlots(names(n), undefined, 256);
    const gone = `m-${Math.floor(n / 2)}`;
    const next = assignSlots(names(n).filter((x) => x !== gone), prev, 256);
    t.equal(moved(prev, next), slotsOf(prev, gone).length, `${n}→${n - 1}`);
  }
});

t.test("assignSlots is deterministic: member order and duplicates do not matter", async (t) => {
  const prev = assignSlots(["c", "a"], undefined, 97);
  const x = assignSlots(["b", "a", "c", "d"], prev, 97);
  const y = assignSlots(["d", "c", "c", "b", "a"], [...prev], 97);
  t.same(x, y);
});

t.test("previous owners that are not members, or slots beyond the count, are ignored", async (t) => {
  const prev = ["ghost", "a", "a", "ghost", "a", "b", "b", "b"]; // 8 slots
  const next = assignSlots(["a", "b"], prev, 4);
  t.equal(next.length, 4);
  t.notOk(next.includes("ghost"));
  t.same([...counts(next).values()].sort(), [2, 2]);
});

t.test("slot counts outside [1, MAX_SLOT_COUNT] are refused", async (t) => {
  for (const bad of [0, -1, 1.5, MAX_SLOT_COUNT + 1, Number.NaN]) {
    t.throws(() => assignSlots(["a"], undefined, bad), { code: "SHARDCAR_ERR_RANGE" }, String(bad));
  }
});

t.test("slotsToRanges merges contiguous slots and never wraps around the end", async (t) => {
  const s = 8;
  const r = slotsToRanges([7, 0, 1, 2, 5, 2], s);
  t.equal(r.length, 3);
  t.same(r[0], { start: slotRange(0, s).start, end: slotRange(2, s).end });
  t.same(r[1], slotRange(5, s));
  t.same(r[2], slotRange(7, s));
  t.same(slotsToRanges([], s), []);
  t.same(slotsToRanges([0, 1, 2, 3, 4, 5, 6, 7], s), [FULL_RANGE]);
  t.throws(() => slotsToRanges([8], s), { code: "SHARDCAR_ERR_RANGE" });
});

t.test("the members' ranges tile the keyspace: union is everything, pairwise intersections empty", async (t) => {
  const r = rng(3);
  let prev: SlotOwners | undefined;
  let pool = names(4);
  for (let round = 0; round < 50; round++) {
    if (pool.length > 1 && r() < 0.5) pool = pool.slice(1);
    else pool = [...pool, `n-${round}`];
    const owners = assignSlots(pool, prev, 256);
    const per = pool.map((m) => slotsToRanges(slotsOf(owners, m), 256));
    let all: Range[] = [];
    for (const rs of per) all = union(all, rs);
    t.ok(equal(all, [FULL_RANGE]), `round ${round}: union is the whole keyspace`);
    for (let i = 0; i < per.length; i++)
      for (let j = i + 1; j < per.length; j++) t.same(intersect(per[i] ?? [], per[j] ?? []), [], `round ${round}: ${pool[i]} ∩ ${pool[j]}`);
    prev = owners;
  }
});
