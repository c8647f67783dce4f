import t from "tap";
import { slotsOf } from "../../src/shard/table.ts";
import {
  coverage,
  follow,
  initialState,
  nextWakeMs,
  Phase,
  step,
  tablesOf,
  type Crash,
  type Effect,
  type Held,
  type MemberObservation,
  type RingEvent,
  type RingState,
} from "../../src/ring/handoff.ts";
import { isServing, MemberState } from "../../src/ring/state.ts";
import { HandoffMode, PendingPhase, type PendingTable } from "../../src/ring/table.ts";

// Slot tables are written as strings, one character per slot: a member's
// one-letter name, or "." for unowned. Four slots keep every row readable.
const S = 4;
const POLICY = { timeoutMs: 5_000, backoffMs: 1_000, maxBackoffMs: 8_000 };
const T0 = 100_000;

const owners = (s: string): (string | undefined)[] => [...s].map((c) => (c === "." ? undefined : c));
const { Ready, Leaving, Expired, Dead, Fenced } = MemberState;

interface RingSketch {
  committed: string;
  gen?: number;
  pending?: { owners: string; gen: number; phase: PendingPhase; startedAt?: number; deadline?: number };
  /** name → [state, applied generation, renewedAt?] */
  members: Record<string, [MemberState, number, number?]>;
  phase?: Phase;
  fencing?: string[];
  retryAt?: number;
  failures?: number;
  crashes?: Crash[];
  lastGeneration?: number;
}

function ring(k: RingSketch): RingState {
  const pending: PendingTable | undefined =
    k.pending === undefined
      ? undefined
      : { generation: k.pending.gen, owners: owners(k.pending.owners), phase: k.pending.phase, startedAt: k.pending.startedAt ?? T0 - 1_000, deadline: k.pending.deadline ?? T0 + 4_000 };
  const base = initialState({
    slotCount: S,
    policy: POLICY,
    tables: { generation: k.lastGeneration ?? 0, committed: { generation: k.gen ?? 1, owners: owners(k.committed) }, pending },
  });
  const members: MemberObservation[] = Object.entries(k.members).map(([name, [state, applied, renewedAt]]) => ({ name, state, applied, ...(renewedAt === undefined ? {} : { renewedAt }) }));
  return {
    ...base,
    members,
    ...(k.phase === undefined ? {} : { phase: k.phase }),
    ...(k.fencing === undefined ? {} : { fencing: k.fencing }),
    ...(k.retryAt === undefined ? {} : { retryAt: k.retryAt }),
    ...(k.failures === undefined ? {} : { failures: k.failures }),
    ...(k.crashes === undefined ? {} : { crashes: k.crashes }),
  };
}

const observe = (start: RingState): RingEvent => ({ type: "observe", members: start.members });

interface Row {
  name: string;
  mode: HandoffMode;
  start: RingState;
  event?: RingEvent; // default: observe the start's members again
  now?: number; // default T0
  phase: Phase;
  effects: Effect[];
  /** Extra checks on the resulting state. */
  check?: (s: RingState) => void;
}

const gainers = (s: RingState): string => (s.pending ? [...s.pending.owners].map((o) => o ?? ".").join("") : "-");

const ROWS: Row[] = [
  // ---- overlap ----------------------------------------------------------
  {
    name: "overlap: an unchanged membership leaves a stable table alone",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", members: { a: [Ready, 1], b: [Ready, 1] } }),
    phase: Phase.Stable,
    effects: [],
  },
  {
    name: "overlap: the first members get the whole keyspace in one pending generation and widen",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "....", gen: 0, members: { a: [Ready, 0], b: [Ready, 0] } }),
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 2, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "a", slots: [0, 1] },
      { type: "widen", member: "b", slots: [2, 3] },
    ],
  },
  {
    name: "overlap: a joining member gets a pending table; only it is asked to widen, nobody narrows yet",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } }),
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "c", slots: [3] },
    ],
    check: (s) => {
      t.equal(gainers(s), "aabc");
      t.same(s.committed.owners, owners("aabb"), "the committed table is untouched until the gainer is ready");
    },
  },
  {
    name: "overlap: the pending table is not committed while its gainer has not reported it",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Widening }, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } }),
    phase: Phase.Widening,
    effects: [],
  },
  {
    name: "overlap: a gainer's report of an older generation does not count",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 5, phase: PendingPhase.Widening }, lastGeneration: 5, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 3] } }),
    phase: Phase.Widening,
    effects: [],
  },
  {
    name: "overlap: commit once every gainer reported ready; losers are told to narrow only then",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Widening }, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 2] } }),
    phase: Phase.Stable,
    effects: [
      { type: "commit", generation: 3, durationMs: 1_000 },
      { type: "narrow", member: "b", slots: [3] },
    ],
    check: (s) => t.same(s.committed.owners, owners("aabc")),
  },
  {
    name: "overlap: non-gainers need not report for a commit",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Widening }, members: { a: [Ready, 0], b: [Ready, 0], c: [Ready, 2] } }),
    phase: Phase.Stable,
    effects: [
      { type: "commit", generation: 3, durationMs: 1_000 },
      { type: "narrow", member: "b", slots: [3] },
    ],
  },
  {
    name: "overlap: a commit and the next publish happen in one step when more changed meanwhile",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Widening }, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 2], d: [Ready, 0] } }),
    phase: Phase.Widening,
    effects: [
      { type: "commit", generation: 3, durationMs: 1_000 },
      { type: "narrow", member: "b", slots: [3] },
      { type: "publish", generation: 5, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "d", slots: [1] },
    ],
  },
  {
    name: "overlap: at the deadline the generation is abandoned, the gainer narrows back, old owners keep everything",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Widening, deadline: T0 }, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } }),
    phase: Phase.Backoff,
    effects: [
      { type: "abandon", generation: 3, reason: "deadline", durationMs: 1_000 },
      { type: "narrow", member: "c", slots: [3] },
    ],
    check: (s) => {
      t.same(s.committed.owners, owners("aabb"));
      t.equal(s.committed.generation, 4, "the old table is committed again under a fresh generation, so members' generations only grow");
      t.equal(s.retryAt, T0 + POLICY.backoffMs);
      t.equal(nextWakeMs(s, T0), POLICY.backoffMs, "the leader wakes at the end of the backoff");
    },
  },
  {
    name: "overlap: one millisecond before the deadline nothing is abandoned",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Widening, deadline: T0 + 1 }, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } }),
    phase: Phase.Widening,
    effects: [],
    check: (s) => t.equal(nextWakeMs(s, T0), 1),
  },
  {
    name: "overlap: during a backoff nothing is published",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", phase: Phase.Backoff, retryAt: T0 + 1, failures: 1, lastGeneration: 2, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } }),
    event: { type: "tick" },
    phase: Phase.Backoff,
    effects: [],
  },
  {
    name: "overlap: after the backoff the table is retried under a new generation, never the abandoned one",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", phase: Phase.Backoff, retryAt: T0, failures: 1, lastGeneration: 2, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } }),
    event: { type: "tick" },
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 4, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "c", slots: [3] },
    ],
  },
  {
    name: "overlap: consecutive abandons back off exponentially, capped",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", failures: 5, pending: { owners: "aabc", gen: 3, phase: PendingPhase.Widening, deadline: T0 }, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } }),
    phase: Phase.Backoff,
    effects: [
      { type: "abandon", generation: 3, reason: "deadline", durationMs: 1_000 },
      { type: "narrow", member: "c", slots: [3] },
    ],
    check: (s) => t.equal(s.retryAt, T0 + POLICY.maxBackoffMs),
  },
  {
    name: "overlap: a new generation is numbered above any generation a member already reported",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", members: { a: [Ready, 1], b: [Ready, 7], c: [Ready, 0] } }),
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 9, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "c", slots: [3] },
    ],
  },
  {
    name: "overlap: a leaving member keeps its slots until the others are ready for them",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", members: { a: [Ready, 1], b: [Leaving, 1] } }),
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "a", slots: [2, 3] },
    ],
    check: (s) => t.same(s.committed.owners, owners("aabb")),
  },
  {
    name: "overlap: the last member leaving empties the ring at once (there is nobody to widen)",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aaaa", members: { a: [Leaving, 1] } }),
    phase: Phase.Stable,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "commit", generation: 3, durationMs: 0 },
      { type: "narrow", member: "a", slots: [0, 1, 2, 3] },
    ],
  },
  {
    name: "overlap: a dead holder is fenced first and none of its slots move yet",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", members: { a: [Ready, 1], b: [Dead, 1, T0 - 3_000] } }),
    phase: Phase.Fencing,
    effects: [{ type: "fence", member: "b" }],
    check: (s) => {
      t.equal(s.pending, undefined, "no table moves b's slots before the fence lands");
      t.same(s.crashes, [{ member: "b", since: T0 - 3_000, slots: [2, 3] }], "the crash is recorded from b's last renewal");
    },
  },
  {
    name: "overlap: a fence requested once is not requested again while the Lease still looks dead",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", fencing: ["b"], phase: Phase.Fencing, members: { a: [Ready, 1], b: [Dead, 1] } }),
    phase: Phase.Fencing,
    effects: [],
  },
  {
    name: "overlap: once the fence landed, the dead member's slots go to the survivors in a pending table",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", fencing: ["b"], phase: Phase.Fencing, members: { a: [Ready, 1], b: [Fenced, 1] } }),
    event: { type: "fenced", member: "b" },
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "a", slots: [2, 3] },
    ],
  },
  {
    name: "overlap: a member that renewed after all cancels its pending fence",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", fencing: ["b"], phase: Phase.Fencing, members: { a: [Ready, 1], b: [Ready, 1] } }),
    phase: Phase.Stable,
    effects: [],
    check: (s) => t.same(s.fencing, []),
  },
  {
    name: "overlap: an expired (not yet dead) holder is waited for, not fenced, and joins wait too",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", members: { a: [Ready, 1], b: [Expired, 1], c: [Ready, 0] } }),
    phase: Phase.Stable,
    effects: [],
  },
  {
    name: "overlap: a holder whose Lease vanished needs no fence; its slots move and the crash is recorded",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", members: { a: [Ready, 1] } }),
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "a", slots: [2, 3] },
    ],
    check: (s) => t.same(s.crashes, [{ member: "b", since: T0, slots: [2, 3] }]),
  },
  {
    name: "overlap: a gainer that dies mid-handoff is fenced and its generation abandoned at once",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Widening }, members: { a: [Ready, 1], b: [Ready, 1], c: [Dead, 0] } }),
    phase: Phase.Fencing,
    effects: [
      { type: "fence", member: "c" },
      { type: "abandon", generation: 3, reason: "member-lost", durationMs: 1_000 },
      { type: "narrow", member: "c", slots: [3] },
    ],
    check: (s) => {
      t.same(s.committed.owners, owners("aabb"));
      t.equal(s.committed.generation, 4);
    },
  },
  {
    name: "overlap: a crash is reported recovered, with its uncovered time, when its slots' new owner is ready",
    mode: HandoffMode.Overlap,
    start: ring({
      committed: "aabb",
      pending: { owners: "aaaa", gen: 3, phase: PendingPhase.Widening },
      crashes: [{ member: "b", since: T0 - 4_500, slots: [2, 3] }],
      members: { a: [Ready, 2], b: [Fenced, 1] },
    }),
    phase: Phase.Stable,
    effects: [
      { type: "commit", generation: 3, durationMs: 1_000 },
      { type: "narrow", member: "b", slots: [2, 3] },
      { type: "recovered", member: "b", uncoveredMs: 4_500 },
    ],
  },
  {
    name: "overlap: a pending table over an empty committed one (new or rebuilt ring) is not abandoned at its deadline",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "....", gen: 0, lastGeneration: 9, pending: { owners: "aabb", gen: 9, phase: PendingPhase.Widening, deadline: T0 - 1 }, members: { a: [Ready, 0], b: [Ready, 8] } }),
    phase: Phase.Widening,
    effects: [],
    check: (s) => t.equal(nextWakeMs(s, T0), undefined, "and no timer spins on it"),
  },
  {
    name: "overlap: a rebuilt ring whose gainer dies is replanned at once, without committing the empty table",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "....", gen: 0, lastGeneration: 9, pending: { owners: "aabb", gen: 9, phase: PendingPhase.Widening }, members: { a: [Ready, 0], b: [Fenced, 8] } }),
    phase: Phase.Widening,
    effects: [
      { type: "abandon", generation: 9, reason: "member-lost", durationMs: 1_000 },
      { type: "narrow", member: "a", slots: [0, 1] },
      { type: "narrow", member: "b", slots: [2, 3] },
      { type: "publish", generation: 11, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "a", slots: [0, 1, 2, 3] },
    ],
    check: (s) => t.same([s.committed.generation, s.pending?.generation], [0, 11], "members never see an empty table committed above what they hold"),
  },
  // ---- exclusive --------------------------------------------------------
  {
    name: "exclusive: the first members get everything at once: nobody has anything to give up",
    mode: HandoffMode.Exclusive,
    start: ring({ committed: "....", gen: 0, members: { a: [Ready, 0], b: [Ready, 0] } }),
    phase: Phase.Stable,
    effects: [
      { type: "publish", generation: 2, phase: PendingPhase.Narrowing, deadline: T0 + POLICY.timeoutMs },
      { type: "commit", generation: 2, durationMs: 0 },
      { type: "widen", member: "a", slots: [0, 1] },
      { type: "widen", member: "b", slots: [2, 3] },
    ],
  },
  {
    name: "exclusive: a joining member makes the losers narrow first, under a reserved generation (+2)",
    mode: HandoffMode.Exclusive,
    start: ring({ committed: "aabb", members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } }),
    phase: Phase.Narrowing,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Narrowing, deadline: T0 + POLICY.timeoutMs },
      { type: "narrow", member: "b", slots: [3] },
    ],
  },
  {
    name: "exclusive: no commit before the loser acknowledged the reserved generation",
    mode: HandoffMode.Exclusive,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Narrowing }, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } }),
    phase: Phase.Narrowing,
    effects: [],
  },
  {
    name: "exclusive: once the loser acknowledged, commit; only then is the gainer told to widen",
    mode: HandoffMode.Exclusive,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Narrowing }, members: { a: [Ready, 1], b: [Ready, 2], c: [Ready, 0] } }),
    phase: Phase.Stable,
    effects: [
      { type: "commit", generation: 3, durationMs: 1_000 },
      { type: "widen", member: "c", slots: [3] },
    ],
  },
  {
    name: "exclusive: a fenced loser counts as narrowed",
    mode: HandoffMode.Exclusive,
    start: ring({ committed: "aabb", pending: { owners: "aaaa", gen: 3, phase: PendingPhase.Narrowing }, members: { a: [Ready, 1], b: [Fenced, 1] } }),
    phase: Phase.Stable,
    effects: [
      { type: "commit", generation: 3, durationMs: 1_000 },
      { type: "widen", member: "a", slots: [2, 3] },
    ],
  },
  {
    name: "exclusive: a dead loser is fenced before its slots are handed on",
    mode: HandoffMode.Exclusive,
    start: ring({ committed: "aabb", pending: { owners: "aaaa", gen: 3, phase: PendingPhase.Narrowing }, members: { a: [Ready, 1], b: [Dead, 1] } }),
    phase: Phase.Narrowing,
    effects: [{ type: "fence", member: "b" }],
    check: (s) => t.same(s.committed.owners, owners("aabb")),
  },
  {
    name: "exclusive: at the deadline the generation is abandoned and the losers widen back",
    mode: HandoffMode.Exclusive,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Narrowing, deadline: T0 }, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } }),
    phase: Phase.Backoff,
    effects: [
      { type: "abandon", generation: 3, reason: "deadline", durationMs: 1_000 },
      { type: "widen", member: "b", slots: [3] },
    ],
    check: (s) => t.same([s.committed.generation, s.committed.owners], [4, owners("aabb")]),
  },
];

/** What member `m` enforces after the step, had it held its slots of the start's committed table. */
function targetAfter(before: RingState, after: RingState, m: string): { generation: number; slots: readonly number[] } {
  return follow({ generation: before.committed.generation, slots: slotsOf(before.committed.owners, m) }, tablesOf(after), m);
}

/**
 * Overlap's promise: every slot that had a serving owner before the step
 * still has a serving member that enforces it *and* is ready for it (it held
 * the slot already, or reported the generation that gave it the slot,
 * committed or pending).
 */
function overlapGaps(before: RingState, after: RingState): number[] {
  if (after.committed.owners.every((o) => o === undefined)) return []; // the ring was emptied on purpose
  const gaps: number[] = [];
  for (let s = 0; s < S; s++) {
    const old = before.committed.owners[s];
    const oldObs = after.members.find((m) => m.name === old);
    if (old === undefined || oldObs === undefined || !isServing(oldObs.state)) continue; // a crash, not a graceful step
    const covered = after.members.some((m) => {
      if (!isServing(m.state)) return false;
      if (!targetAfter(before, after, m.name).slots.includes(s)) return false;
      // A gainer is ready once it reported the step generation (one below the table's).
      const gotItCommitted = after.committed.owners[s] === m.name && m.applied >= after.committed.generation - 1;
      const gotItPending = after.pending?.owners[s] === m.name && m.applied >= after.pending.generation - 1;
      return old === m.name || gotItCommitted || gotItPending;
    });
    if (!covered) gaps.push(s);
  }
  return gaps;
}

/**
 * Exclusive's promise: no slot is held by two members. A member holds what
 * it enforces after the step, plus what it held before and has not yet
 * acknowledged dropping.
 */
function exclusiveDoubles(before: RingState, after: RingState): number[] {
  const doubles: number[] = [];
  for (let s = 0; s < S; s++) {
    const holders = new Set<string>();
    for (const m of after.members) {
      if (!isServing(m.state)) continue;
      const tg = targetAfter(before, after, m.name);
      if (tg.slots.includes(s)) holders.add(m.name);
      if (before.committed.owners[s] === m.name && !tg.slots.includes(s)) {
        const dropGen = after.committed.owners[s] !== m.name && after.committed.generation !== before.committed.generation ? after.committed.generation - 1 : (after.pending?.generation ?? 0) - 1;
        if (m.applied < dropGen) holders.add(m.name);
      }
    }
    if (holders.size > 1) doubles.push(s);
  }
  return doubles;
}

for (const row of ROWS) {
  t.test(row.name, async (t) => {
    const { state, effects } = step(row.start, row.event ?? observe(row.start), row.now ?? T0, row.mode);
    t.strictSame(effects, row.effects, "effects");
    t.equal(state.phase, row.phase, "phase");
    row.check?.(state);
    if (row.mode === HandoffMode.Overlap) t.same(overlapGaps(row.start, state), [], "no slot lost its ready owner");
    else t.same(exclusiveDoubles(row.start, state), [], "no slot has two holders");
  });
}

t.test("the shared coverage checks can fail: a commit to an unready gainer is a gap", async (t) => {
  const before = ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Widening }, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } });
  const wrong: RingState = { ...before, committed: { generation: 3, owners: owners("aabc") }, pending: undefined };
  t.same(overlapGaps(before, wrong), [3]);
  const ex = ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Narrowing }, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } });
  const exWrong: RingState = { ...ex, committed: { generation: 3, owners: owners("aabc") }, pending: undefined };
  t.same(exclusiveDoubles(ex, exWrong), [3]);
});

t.test("step never mutates its input state", async (t) => {
  const start = ring({ committed: "aabb", members: { a: [Ready, 1], b: [Dead, 1], c: [Ready, 0] } });
  const snapshot = JSON.stringify(start);
  step(start, observe(start), T0, HandoffMode.Overlap);
  t.equal(JSON.stringify(start), snapshot);
});

t.test("a long random run of membership changes never leaves a gap in overlap mode", async (t) => {
  // Members follow the leader's tables like the real ones: they report a
  // generation only after "relisting" (one step later), at random.
  let seed = 7;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  let state = initialState({ slotCount: S, policy: POLICY });
  let now = T0;
  const pool = new Map<string, { state: MemberState; applied: number }>([["a", { state: Ready, applied: 0 }]]);
  let commits = 0;
  for (let i = 0; i < 2_000; i++) {
    now += 100;
    const r = rnd();
    if (r < 0.03 && pool.size < 6) pool.set(`m${i}`, { state: Ready, applied: 0 });
    else if (r < 0.05) {
      const names = [...pool.keys()].filter((n) => pool.get(n)?.state === Ready);
      const n = names[Math.floor(rnd() * names.length)];
      if (n !== undefined && names.length > 1) pool.set(n, { state: Leaving, applied: pool.get(n)?.applied ?? 0 });
    }
    // A leaving member that owns nothing any more releases its Lease.
    for (const [n, m] of pool) if (m.state === Leaving && !state.committed.owners.includes(n) && !state.pending?.owners.includes(n)) pool.delete(n);
    // Members report what they enforce, sometimes late.
    for (const [n, m] of pool) {
      const tg = follow({ generation: 0, slots: [] }, tablesOf(state), n);
      if (rnd() < 0.5) m.applied = Math.max(m.applied, tg.generation);
    }
    const before = state;
    const res = step(state, { type: "observe", members: [...pool].map(([name, m]) => ({ name, state: m.state, applied: m.applied })) }, now, HandoffMode.Overlap);
    state = res.state;
    commits += res.effects.filter((e) => e.type === "commit").length;
    const gaps = overlapGaps(before, state);
    if (gaps.length > 0) {
      t.fail(`step ${i}: gap at ${gaps.join(",")}`);
      break;
    }
  }
  t.ok(commits > 20, `the run exercised many handoffs (${commits} commits)`);
  t.equal(coverage(state).readyRatio, 1, "at the end every slot has a ready owner");
});

t.test("coverage counts a gainer only once it reported, and counts the overlap while both hold a slot", async (t) => {
  const s = ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Widening }, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } });
  t.same(coverage(s), { readyRatio: 1, overlapRatio: 0.25 });
  const crashed = ring({ committed: "aabb", members: { a: [Ready, 1], b: [Fenced, 1] } });
  t.same(coverage(crashed), { readyRatio: 0.5, overlapRatio: 0 });
  const exclusiveAcked = ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Narrowing }, members: { a: [Ready, 1], b: [Ready, 2], c: [Ready, 0] } });
  t.same(coverage(exclusiveAcked), { readyRatio: 0.75, overlapRatio: 0 }, "slot 3 is dropped by b and not yet taken by c");
});

// ---- the member side -----------------------------------------------------

t.test("follow: a member enforces held ∪ new while widening, and exactly its new slots once committed, under growing generations", async (t) => {
  const held = { generation: 1, slots: [2, 3] };
  const widening = { generation: 3, committed: { generation: 1, owners: owners("aabb") }, pending: { generation: 3, owners: owners("aabc"), phase: PendingPhase.Widening, startedAt: 0, deadline: 1 } };
  t.strictSame(follow({ generation: 1, slots: [] }, widening, "c"), { generation: 2, slots: [3], held: { generation: 1, slots: [] } }, "stamped with the step generation");
  t.strictSame(follow(held, widening, "b").slots, [2, 3], "the loser keeps its slot while the gainer widens");
  const committed = { generation: 3, committed: { generation: 3, owners: owners("aabc") }, pending: undefined };
  t.strictSame(follow(held, committed, "b"), { generation: 3, slots: [2], held: { generation: 3, slots: [2] } });
});

t.test("follow: a member narrows to held ∩ new under the step generation in exclusive mode", async (t) => {
  const tables = { generation: 3, committed: { generation: 1, owners: owners("aabb") }, pending: { generation: 3, owners: owners("aabc"), phase: PendingPhase.Narrowing, startedAt: 0, deadline: 1 } };
  t.strictSame(follow({ generation: 1, slots: [2, 3] }, tables, "b"), { generation: 2, slots: [2], held: { generation: 1, slots: [2, 3] } });
  t.strictSame(follow({ generation: 0, slots: [] }, tables, "c").slots, [], "the gainer gets nothing before the commit");
});

t.test("follow: a rolled-back committed table is ignored; the member keeps what it holds", async (t) => {
  const held = { generation: 5, slots: [0, 1] };
  const stale = { generation: 3, committed: { generation: 3, owners: owners("bbbb") }, pending: undefined };
  t.strictSame(follow(held, stale, "a"), { generation: 5, slots: [0, 1], held });
  t.strictSame(follow(held, undefined, "a"), { generation: 5, slots: [0, 1], held }, "no ring at all: keep the last committed ranges");
});

t.test("follow: a committed table edited in place (same generation, other slots) is ignored", async (t) => {
  const held = { generation: 5, slots: [0, 1] };
  const edited = { generation: 5, committed: { generation: 5, owners: owners("bbaa") }, pending: undefined };
  t.strictSame(follow(held, edited, "a"), { generation: 5, slots: [0, 1], held });
  const same = { generation: 5, committed: { generation: 5, owners: owners("aabb") }, pending: undefined };
  t.strictSame(follow(held, same, "a").slots, [0, 1], "the unchanged table is of course accepted");
});

t.test("follow: widening starts from what the member holds, even if the status was rebuilt without it", async (t) => {
  // A leader that had to rebuild an invalid status, with no table of its own
  // to fall back on, writes an empty committed table at generation 0.
  const rebuilt = { generation: 9, committed: { generation: 0, owners: owners("....") }, pending: { generation: 9, owners: owners("aabb"), phase: PendingPhase.Widening, startedAt: 0, deadline: 1 } };
  t.strictSame(follow({ generation: 5, slots: [0, 1, 2] }, rebuilt, "a").slots, [0, 1, 2]);
});

t.test("the generation a member enforces only grows through publish, abandon, republish and commit", async (t) => {
  // The proxy tells new ranges from old by generation; this is the sequence
  // of tables one member sees across an abandoned and a completed handoff.
  let s = ring({ committed: "aabb", members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 0] } });
  let held: Held = { generation: 1, slots: [0, 1] };
  const seen: number[] = [];
  const look = (): void => {
    const tg = follow(held, tablesOf(s), "a");
    held = tg.held;
    seen.push(tg.generation);
  };
  look();
  s = step(s, observe(s), T0, HandoffMode.Overlap).state; // publish 3 (step 2)
  look();
  s = step(s, { type: "tick" }, s.pending?.deadline ?? 0, HandoffMode.Overlap).state; // abandon: old table again as 4
  look();
  s = step(s, { type: "tick" }, s.retryAt, HandoffMode.Overlap).state; // publish 6 (step 5)
  look();
  s = step(s, { type: "observe", members: s.members.map((m) => ({ ...m, applied: 5 })) }, s.retryAt + 1, HandoffMode.Overlap).state; // commit 6
  look();
  t.same(seen, [1, 2, 4, 5, 6]);
});
