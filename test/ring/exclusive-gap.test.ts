/**
 * An exclusive handoff leaves its moved slots in no cache from the moment
 * the old owner drops them until the new owner has listed them (docs/rings.md,
 * "exclusive"). The leader measures that gap (issue 32: "the gap it leaves is
 * measured and exported"): a `gap-closed` effect per gainer, which the
 * coordinator turns into shardcar_ring_exclusive_gap_seconds.
 */
import t from "tap";
import { initialState, step, type Effect, type HandoffPolicy, type MemberObservation, type RingState } from "../../src/ring/handoff.ts";
import { MemberState } from "../../src/ring/state.ts";
import { HandoffMode, stepGeneration } from "../../src/ring/table.ts";

const POLICY: HandoffPolicy = { timeoutMs: 60_000, backoffMs: 1_000, maxBackoffMs: 60_000, relistBudget: 1 };
const T0 = 1_000_000;

function run(s: RingState, members: MemberObservation[], now: number): { state: RingState; effects: readonly Effect[] } {
  return step(s, { type: "observe", members }, now, HandoffMode.Exclusive);
}

t.test("an exclusive join is measured from the old owner's drop to the new owner's list", async (t) => {
  let s = initialState({ slotCount: 16, policy: POLICY });
  const a = (applied: number): MemberObservation => ({ name: "a", state: MemberState.Ready, applied });
  s = run(s, [a(0)], T0).state;
  const first = s.committed.generation;
  t.ok(first > 0, "a alone holds the keyspace");
  s = run(s, [a(first)], T0 + 100).state;

  // b joins: a must drop half before b may list it.
  const joined = run(s, [a(first), { name: "b", state: MemberState.Ready, applied: 0 }], T0 + 1_000);
  s = joined.state;
  const p = s.pending;
  if (p === undefined) throw new Error("no pending table");
  // a reports its narrowing at T0 + 1,500 (the gap opens), b lists until T0 + 4,000.
  s = run(s, [a(stepGeneration(p)), { name: "b", state: MemberState.Ready, applied: 0 }], T0 + 1_500).state;
  t.equal(s.committed.generation, p.generation, "committed once the loser narrowed");
  let closed = run(s, [a(p.generation), { name: "b", state: MemberState.Ready, applied: 0 }], T0 + 3_000);
  t.same(closed.effects.filter((e) => e.type === "gap-closed"), [], "still open while b lists");
  closed = run(closed.state, [a(p.generation), { name: "b", state: MemberState.Ready, applied: p.generation }], T0 + 4_000);
  t.same(closed.effects.filter((e) => e.type === "gap-closed"), [{ type: "gap-closed", member: "b", uncoveredMs: 2_500 }], "closed when b listed: 2.5 s after a dropped");
  t.same(closed.state.gaps, [], "nothing left open");
});

t.test("an overlap handoff opens no gap", async (t) => {
  let s = initialState({ slotCount: 16, policy: POLICY });
  const obs = (aApplied: number, bApplied: number): MemberObservation[] => [
    { name: "a", state: MemberState.Ready, applied: aApplied },
    { name: "b", state: MemberState.Ready, applied: bApplied },
  ];
  s = step(s, { type: "observe", members: obs(0, 0).slice(0, 1) }, T0, HandoffMode.Overlap).state;
  const g = s.committed.generation;
  s = step(s, { type: "observe", members: obs(g, 0) }, T0 + 1_000, HandoffMode.Overlap).state;
  const p = s.pending;
  if (p === undefined) throw new Error("no pending table");
  const all: Effect[] = [];
  for (const [i, b] of [stepGeneration(p), p.generation].entries()) {
    const r = step(s, { type: "observe", members: obs(p.generation, b) }, T0 + 2_000 + i * 1_000, HandoffMode.Overlap);
    s = r.state;
    all.push(...r.effects);
  }
  t.equal(s.committed.generation, p.generation);
  t.same(all.filter((e) => e.type === "gap-closed"), []);
  t.same(s.gaps, []);
});
