import t, { type Test } from "tap";
import { assignSlots, slotsOf, type SlotOwners } from "../../src/shard/table.ts";
import {
  coverage,
  follow,
  initialState,
  nextWakeMs,
  Phase,
  relistCost,
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
import { gainersOf, publishedBy } from "./table-diff.ts";

// Slot tables are written as strings, one character per slot: a member's
// one-letter name, or "." for unowned. Four slots keep most rows readable;
// the relist budget rows need more members, and so more slots.
const S = 4;
const POLICY = { timeoutMs: 5_000, backoffMs: 1_000, maxBackoffMs: 8_000, relistBudget: 1 };
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
  /** The ring's relist budget; default POLICY's. */
  budget?: number;
}

function ring(k: RingSketch): RingState {
  const pending: PendingTable | undefined =
    k.pending === undefined
      ? undefined
      : { generation: k.pending.gen, owners: owners(k.pending.owners), phase: k.pending.phase, startedAt: k.pending.startedAt ?? T0 - 1_000, deadline: k.pending.deadline ?? T0 + 4_000 };
  const base = initialState({
    slotCount: k.committed.length,
    policy: k.budget === undefined ? POLICY : { ...POLICY, relistBudget: k.budget },
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
    name: "overlap: a gainer that starts leaving mid-handoff is not waited for: its generation is abandoned at once and the plan goes on without it",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aabbcc", pending: { owners: "aabcdc", gen: 3, phase: PendingPhase.Widening }, members: { a: [Ready, 1], b: [Ready, 1], c: [Leaving, 0], d: [Ready, 0] } }),
    phase: Phase.Widening,
    effects: [
      { type: "abandon", generation: 3, reason: "member-lost", durationMs: 1_000 },
      { type: "narrow", member: "c", slots: [3] },
      { type: "narrow", member: "d", slots: [4] },
      { type: "publish", generation: 6, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "d", slots: [4, 5] },
    ],
    check: (s) => {
      t.equal(gainers(s), "aabbdd", "the leaving c is left out of the new plan: d takes what c holds, b keeps what c was to get");
      t.equal(s.failures, 0, "no backoff: nothing failed, the membership changed");
    },
  },
  {
    name: "exclusive: a gainer whose Lease expired mid-handoff is not waited for: the losers widen back at once",
    mode: HandoffMode.Exclusive,
    start: ring({ committed: "aabb", pending: { owners: "aabc", gen: 3, phase: PendingPhase.Narrowing }, members: { a: [Ready, 1], b: [Ready, 2], c: [Expired, 0] } }),
    phase: Phase.Stable,
    effects: [
      { type: "abandon", generation: 3, reason: "member-lost", durationMs: 1_000 },
      { type: "widen", member: "b", slots: [3] },
    ],
    check: (s) => t.same([s.committed.generation, s.committed.owners], [4, owners("aabb")]),
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
  // ---- relist budget (12 slots: four members of three) -------------------
// The budget is in keyspaces: a gainer relists its whole share, here 4 of 12
// slots after a leave, so 0.4 admits one gainer, 0.7 two, and 1 three.
  {
    name: "budget 0.4 (one share): a member leaving a 4-member ring hands its slots to one gainer first, the most-gaining by name",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aaabbbcccddd", budget: 0.4, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 1], d: [Leaving, 1] } }),
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "a", slots: [9] },
    ],
    check: (s) => {
      t.equal(gainers(s), "aaabbbcccadd", "d keeps the slots meant for b and c");
      t.same(s.deferred, ["b", "c"], "b and c wait for the budget");
    },
  },
  {
    name: "budget 0.7 (two shares): the same leave moves two gainers' slots at once",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aaabbbcccddd", budget: 0.7, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 1], d: [Leaving, 1] } }),
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "a", slots: [9] },
      { type: "widen", member: "b", slots: [10] },
    ],
    check: (s) => {
      t.equal(gainers(s), "aaabbbcccabd");
      t.same(s.deferred, ["c"]);
    },
  },
  {
    name: "budget 0.4 (one share): the commit of one budgeted handoff publishes the next in the same step",
    mode: HandoffMode.Overlap,
    start: ring({
      committed: "aaabbbcccddd",
      budget: 0.4,
      pending: { owners: "aaabbbcccadd", gen: 3, phase: PendingPhase.Widening },
      members: { a: [Ready, 2], b: [Ready, 1], c: [Ready, 1], d: [Leaving, 1] },
    }),
    phase: Phase.Widening,
    effects: [
      { type: "commit", generation: 3, durationMs: 1_000 },
      { type: "narrow", member: "d", slots: [9] },
      { type: "publish", generation: 5, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "b", slots: [10] },
    ],
    check: (s) => {
      t.equal(gainers(s), "aaabbbcccabd");
      t.same(s.deferred, ["c"]);
    },
  },
  {
    name: "budget 0.4 (one share): slots of a crashed (fenced) member are exempt: every survivor gains at once, coverage beats the budget",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aaabbbcccddd", budget: 0.4, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 1], d: [Fenced, 1] } }),
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "a", slots: [9] },
      { type: "widen", member: "b", slots: [10] },
      { type: "widen", member: "c", slots: [11] },
    ],
    check: (s) => {
      t.equal(gainers(s), "aaabbbcccabc");
      t.same(s.deferred, []);
    },
  },
  {
    name: "budget 0.4 (one share): a crash's gainer uses the budget up, takes its other gains along (it relists anyway), and the rest wait",
    mode: HandoffMode.Overlap,
    // Mid-rebalance (c and d were waiting for the budget) when b crashed.
    start: ring({ committed: "aaabbbaaaaaa", budget: 0.4, members: { a: [Ready, 1], b: [Fenced, 1], c: [Ready, 0], d: [Ready, 0] } }),
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "c", slots: [3, 4, 5, 7] },
    ],
    check: (s) => {
      t.equal(gainers(s), "aaacccacaaaa");
      t.same(s.deferred, ["d"]);
    },
  },
  {
    name: "budget 0.4 (one share): the first table of an empty ring is exempt: nobody has a cache to keep yet",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "............", gen: 0, budget: 0.4, members: { a: [Ready, 0], b: [Ready, 0], c: [Ready, 0], d: [Ready, 0] } }),
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 2, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "a", slots: [0, 1, 2] },
      { type: "widen", member: "b", slots: [3, 4, 5] },
      { type: "widen", member: "c", slots: [6, 7, 8] },
      { type: "widen", member: "d", slots: [9, 10, 11] },
    ],
  },
  {
    name: "budget 0.4 (one share): a join has one gainer, so it is one handoff as before",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aaaabbbbcccc", budget: 0.4, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 1], d: [Ready, 0] } }),
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "d", slots: [3, 7, 11] },
    ],
    check: (s) => t.same(s.deferred, []),
  },
  {
    name: "budget 0.4 (one share): after an abandon the next gainer goes first, so one that never gets ready cannot hold the others up",
    mode: HandoffMode.Overlap,
    start: ring({ committed: "aaabbbcccddd", budget: 0.4, phase: Phase.Backoff, retryAt: T0, failures: 1, lastGeneration: 4, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 1], d: [Leaving, 1] } }),
    event: { type: "tick" },
    phase: Phase.Widening,
    effects: [
      { type: "publish", generation: 6, phase: PendingPhase.Widening, deadline: T0 + POLICY.timeoutMs },
      { type: "widen", member: "b", slots: [10] },
    ],
    check: (s) => t.same(s.deferred, ["a", "c"]),
  },
  {
    name: "budget 0.4 (one share): an abandoned budgeted generation clears the deferred list",
    mode: HandoffMode.Overlap,
    start: ring({
      committed: "aaabbbcccddd",
      budget: 0.4,
      pending: { owners: "aaabbbcccadd", gen: 3, phase: PendingPhase.Widening, deadline: T0 },
      members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 1], d: [Leaving, 1] },
    }),
    phase: Phase.Backoff,
    effects: [
      { type: "abandon", generation: 3, reason: "deadline", durationMs: 1_000 },
      { type: "narrow", member: "a", slots: [9] },
    ],
    check: (s) => t.same([s.deferred, s.failures], [[], 1]),
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
  {
    name: "exclusive, budget 0.4 (one share): only the slots of the gainer within budget are narrowed by their owner",
    mode: HandoffMode.Exclusive,
    start: ring({ committed: "aaabbbcccddd", budget: 0.4, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 1], d: [Leaving, 1] } }),
    phase: Phase.Narrowing,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Narrowing, deadline: T0 + POLICY.timeoutMs },
      { type: "narrow", member: "d", slots: [9] },
    ],
    check: (s) => {
      t.equal(gainers(s), "aaabbbcccadd");
      t.same(s.deferred, ["b", "c"]);
    },
  },
  {
    name: "exclusive, budget 0.4 (one share): a crashed member's slots are exempt here too; they go to every survivor at the commit",
    mode: HandoffMode.Exclusive,
    start: ring({ committed: "aaabbbcccddd", budget: 0.4, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 1], d: [Fenced, 1] } }),
    phase: Phase.Stable,
    effects: [
      { type: "publish", generation: 3, phase: PendingPhase.Narrowing, deadline: T0 + POLICY.timeoutMs },
      { type: "narrow", member: "d", slots: [9, 10, 11] },
      { type: "commit", generation: 3, durationMs: 0 },
      { type: "widen", member: "a", slots: [9] },
      { type: "widen", member: "b", slots: [10] },
      { type: "widen", member: "c", slots: [11] },
    ],
  },
];

/** What member `m` enforces after the step, had it held its slots of the start's committed table. */
function targetAfter(before: RingState, after: RingState, m: string): { generation: number; slots: readonly number[] } {
  return follow({ generation: before.committed.generation, slots: slotsOf(before.committed.owners, m) }, tablesOf(after), m);
}

/** {@link targetAfter}'s slots of every member, computed once per check (the random runs make many). */
function targetsAfter(before: RingState, after: RingState): Map<string, Set<number>> {
  return new Map(after.members.map((m) => [m.name, new Set(targetAfter(before, after, m.name).slots)]));
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
  const targets = targetsAfter(before, after);
  for (let s = 0; s < after.slotCount; s++) {
    const old = before.committed.owners[s];
    const oldObs = after.members.find((m) => m.name === old);
    if (old === undefined || oldObs === undefined || !isServing(oldObs.state)) continue; // a crash, not a graceful step
    const covered = after.members.some((m) => {
      if (!isServing(m.state)) return false;
      if (!targets.get(m.name)?.has(s)) return false;
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
  const targets = targetsAfter(before, after);
  for (let s = 0; s < after.slotCount; s++) {
    const holders = new Set<string>();
    for (const m of after.members) {
      if (!isServing(m.state)) continue;
      const enforced = targets.get(m.name)?.has(s) ?? false;
      if (enforced) holders.add(m.name);
      if (before.committed.owners[s] === m.name && !enforced) {
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

// ---- the relist budget over whole rebalances ------------------------------

/**
 * Gainers of `from → to` that take over a slot nobody serves (no owner, or
 * one that is not serving): crash recovery and a new ring's first table,
 * which the budget does not hold back.
 */
function exemptGainersOf(from: SlotOwners, to: SlotOwners, members: readonly MemberObservation[]): string[] {
  const serving = (n: string): boolean => members.some((m) => m.name === n && isServing(m.state));
  return [...new Set(to.filter((o, s): o is string => o !== undefined && from[s] !== o && (from[s] === undefined || !serving(from[s] ?? ""))))].sort();
}

/**
 * Steps `start` like the coordinator does, `dt` ms apart, with members that
 * report every generation they follow at once (except `stuck` ones, which
 * never report again), checking the coverage invariant at every step.
 */
function drive(t: Test, start: RingState, mode: HandoffMode, opts: { steps: number; dt?: number; stuck?: string[] }): { state: RingState; published: Array<{ from: SlotOwners; to: SlotOwners }> } {
  let s = start;
  let now = T0;
  const published: Array<{ from: SlotOwners; to: SlotOwners }> = [];
  for (let i = 0; i < opts.steps; i++) {
    const before = s;
    const res = step(s, observe(s), now, mode);
    s = res.state;
    published.push(...publishedBy(before, s, res.effects));
    if (mode === HandoffMode.Overlap) t.same(overlapGaps(before, s), [], `step ${i}: no slot lost its ready owner`);
    else t.same(exclusiveDoubles(before, s), [], `step ${i}: no slot has two holders`);
    const tables = tablesOf(s);
    s = { ...s, members: s.members.map((m) => (opts.stuck?.includes(m.name) ? m : { ...m, applied: Math.max(m.applied, follow({ generation: 0, slots: [] }, tables, m.name).generation) })) };
    now += opts.dt ?? 100;
  }
  return { state: s, published };
}

for (const [budget, handoffs] of [
  [0.4, 3],
  [0.7, 2],
  [1, 1],
] as const) {
  t.test(`budget ${budget}: a member leaving a 4-member ring is handed on in ${handoffs} handoff(s), each within budget, ending at the balanced table`, async (t) => {
    for (const mode of [HandoffMode.Overlap, HandoffMode.Exclusive]) {
      const start = ring({ committed: "aaabbbcccddd", budget, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 1], d: [Leaving, 1] } });
      const { state, published } = drive(t, start, mode, { steps: 10 });
      t.equal(published.length, handoffs, `${mode}: handoffs`);
      for (const p of published) t.ok(relistCost(p.from, p.to) <= budget, `${mode}: gainers ${gainersOf(p.from, p.to).join(",")} relist ${relistCost(p.from, p.to).toFixed(2)} keyspaces, within budget ${budget}`);
      t.same(published.map((p) => gainersOf(p.from, p.to)).flat(), ["a", "b", "c"], `${mode}: every survivor gained exactly once, most-gaining first, ties by name`);
      t.equal(state.phase, Phase.Stable, `${mode}: stable`);
      t.same(state.committed.owners, assignSlots(["a", "b", "c"], owners("aaabbbcccddd"), 12), `${mode}: the same balanced table one unbudgeted handoff would have reached`);
      t.same(state.deferred, [], `${mode}: nobody waits any more`);
    }
  });
}

t.test("budget 0.4 (one share) never deadlocks: a gainer that never gets ready is retried behind the others, who all get their slots", async (t) => {
  const start = ring({ committed: "aaabbbcccddd", budget: 0.4, members: { a: [Ready, 1], b: [Ready, 1], c: [Ready, 1], d: [Leaving, 1] } });
  // One step per second: deadlines (5 s) and backoffs (1 s, doubling) pass.
  const { state, published } = drive(t, start, HandoffMode.Overlap, { steps: 60, dt: 1_000, stuck: ["a"] });
  t.equal(state.committed.owners.map((o) => o ?? ".").join(""), "aaabbbcccdbc", "b and c got their slots; only the stuck a's slot stays with d");
  t.ok(
    published.every((p) => gainersOf(p.from, p.to).length === 1),
    "every attempt stayed within the budget",
  );
  t.ok(published.filter((p) => gainersOf(p.from, p.to)[0] === "a").length >= 3, "a is still being retried (with backoff)");
});

t.test("property: under random joins, leaves and crashes with a random budget, every table is within budget (crash recovery aside), coverage holds, and the ring converges to a balanced table", async (t) => {
  let seed = 11;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(rnd() * xs.length)];
  let checks = 0;
  let budgeted = 0;
  let exempted = 0;
  let deferring = 0;
  let maxSettleHandoffs = 0;
  for (let run = 0; run < 60; run++) {
    const slotCount = pick([4, 8, 12, 16, 30, 64]) ?? 12;
    const budget = pick([0.1, 0.25, 0.4, 0.7, 1, 2]) ?? 1;
    const mode = rnd() < 0.5 ? HandoffMode.Overlap : HandoffMode.Exclusive;
    const label = `run ${run} (${mode}, ${slotCount} slots, budget ${budget})`;
    let state = initialState({ slotCount, policy: { ...POLICY, relistBudget: budget } });
    let now = T0;
    let lastGeneration = 0;
    const pool = new Map<string, { state: MemberState; applied: number; crashedAt?: number; renewedAt?: number }>();
    for (let i = 0; i < 1 + Math.floor(rnd() * 5); i++) pool.set(`m${run}-${i}`, { state: Ready, applied: 0 });
    let failed = false;
    const fail = (msg: string): void => {
      if (!failed) t.fail(`${label}: ${msg}`);
      failed = true;
    };
    const check = (before: RingState, after: RingState, effects: readonly Effect[], i: number): void => {
      checks++;
      if (mode === HandoffMode.Overlap && overlapGaps(before, after).length > 0) fail(`step ${i}: gap at ${overlapGaps(before, after).join(",")}`);
      if (mode === HandoffMode.Exclusive && exclusiveDoubles(before, after).length > 0) fail(`step ${i}: two holders of ${exclusiveDoubles(before, after).join(",")}`);
      for (const e of effects) {
        if (e.type !== "publish") continue;
        if (e.generation <= lastGeneration) fail(`step ${i}: generation ${e.generation} not above ${lastGeneration}`);
        lastGeneration = e.generation;
      }
      if (effects.some((e) => e.type === "publish") && after.deferred.length > 0) deferring++;
      for (const p of publishedBy(before, after, effects)) {
        const gainers = gainersOf(p.from, p.to);
        const exempt = exemptGainersOf(p.from, p.to, after.members);
        if (exempt.length > 0) exempted++;
        const cost = relistCost(p.from, p.to);
        const over = cost > budget + 1e-9;
        if (over) budgeted++;
        // Over budget only for crash recovery (exempt gainers), or for the one
        // gainer every handoff moves at least.
        if (over && exempt.length === 0 && gainers.length > 1) fail(`step ${i}: ${gainers.length} gainers relist ${cost.toFixed(3)} keyspaces, over budget ${budget}`);
        if (over && exempt.length > 0 && gainers.length > exempt.length) fail(`step ${i}: graceful gainers beside ${exempt.length} exempt ones relist ${cost.toFixed(3)} keyspaces, over budget ${budget}`);
      }
    };
    const stepAll = (i: number, reportP: number): number => {
      for (const [n, m] of pool) {
        // A leaving member that owns nothing any more releases its Lease; a
        // fenced one's Lease is collected once no table names it.
        if ((m.state === Leaving || m.state === Fenced) && !state.committed.owners.includes(n) && !state.pending?.owners.includes(n)) pool.delete(n);
        if (m.state === Expired && m.crashedAt !== undefined && now - m.crashedAt >= 500) m.state = Dead;
      }
      for (const [n, m] of pool) {
        if (!isServing(m.state)) continue;
        const tg = follow({ generation: 0, slots: [] }, tablesOf(state), n);
        if (rnd() < reportP) m.applied = Math.max(m.applied, tg.generation);
      }
      const obs = (): MemberObservation[] => [...pool].map(([name, m]) => ({ name, state: m.state, applied: m.applied, ...(m.renewedAt === undefined ? {} : { renewedAt: m.renewedAt }) }));
      let commits = 0;
      let before = state;
      let res = step(state, { type: "observe", members: obs() }, now, mode);
      state = res.state;
      check(before, state, res.effects, i);
      const queue = [...res.effects];
      for (let e = queue.shift(); e !== undefined; e = queue.shift()) {
        if (e.type === "commit") commits++;
        if (e.type !== "fence") continue;
        // The state still shows the Lease as dead until the next observe, so
        // it asks again; the coordinator's second takeover conflicts (the
        // resourceVersion moved) and steps no further. So do we.
        const m = pool.get(e.member);
        if (m === undefined || m.state === Fenced) continue;
        m.state = Fenced;
        before = state;
        res = step(state, { type: "fenced", member: e.member }, now, mode);
        state = res.state;
        check(before, state, res.effects, i);
        queue.push(...res.effects);
      }
      return commits;
    };
    // Churn.
    for (let i = 0; i < 400 && !failed; i++) {
      now += 100;
      const r = rnd();
      const ready = [...pool.keys()].filter((n) => pool.get(n)?.state === Ready);
      if (r < 0.04 && pool.size < 7) pool.set(`m${run}-j${i}`, { state: Ready, applied: 0 });
      else if (r < 0.07 && ready.length > 1) {
        const n = pick(ready);
        const m = n === undefined ? undefined : pool.get(n);
        if (m !== undefined) m.state = Leaving;
      } else if (r < 0.09 && ready.length > 1) {
        const n = pick(ready);
        const m = n === undefined ? undefined : pool.get(n);
        if (m !== undefined) Object.assign(m, { state: Expired, crashedAt: now, renewedAt: now });
      }
      stepAll(i, 0.5);
    }
    // Quiet: nobody comes or goes, everyone reports; the ring must settle.
    let handoffs = 0;
    for (let i = 0; i < 400 && !failed; i++) {
      now += 100;
      handoffs += stepAll(400 + i, 1);
      const readyNames = [...pool.keys()].filter((n) => pool.get(n)?.state === Ready);
      const settled = state.pending === undefined && state.phase === Phase.Stable && readyNames.every((n) => state.committed.owners.includes(n)) && state.committed.owners.every((o) => o !== undefined && readyNames.includes(o));
      if (settled) break;
    }
    if (failed) break;
    // One more round of reports: an exclusive gainer relists only after the commit.
    now += 100;
    stepAll(800, 1);
    const readyNames = [...pool.keys()].filter((n) => pool.get(n)?.state === Ready).sort();
    const counts = readyNames.map((n) => slotsOf(state.committed.owners, n).length);
    t.equal(state.pending, undefined, `${label}: nothing pending at the end`);
    t.ok(state.committed.owners.every((o) => o !== undefined && readyNames.includes(o)), `${label}: every slot owned by a ready member`);
    t.ok(Math.max(...counts) - Math.min(...counts) <= 1, `${label}: balanced (${counts.join(",")})`);
    t.same(assignSlots(readyNames, state.committed.owners, slotCount), state.committed.owners, `${label}: the balanced table (nothing left to move)`);
    t.same(state.deferred, [], `${label}: nobody waits for the budget`);
    t.equal(coverage(state).readyRatio, 1, `${label}: every slot has a ready owner`);
    maxSettleHandoffs = Math.max(maxSettleHandoffs, handoffs);
  }
  t.ok(deferring > 50, `the budget held gainers back in ${deferring} published tables`);
  t.ok(exempted > 0 && budgeted > 0, `crash recovery was exercised (${exempted} exempt tables, ${budgeted} over budget because of it)`);
  t.comment(`${checks} steps checked; at most ${maxSettleHandoffs} handoffs to settle once the churn stopped`);
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

t.test("relistCost charges each gainer its whole share while it widens, in keyspaces", async (t) => {
  t.equal(relistCost(owners("aaabbbcccddd"), owners("aaabbbcccabc")), 1, "d leaves: a, b and c each relist four of twelve slots");
  t.equal(relistCost(owners("aaaabbbbcccc"), owners("aaadbbbdcccd")), 0.25, "a join: only the newcomer relists, its own three slots");
  t.equal(relistCost(owners("aabb"), owners("abab")), 1.5, "a swap: each side lists what it keeps, gains and still gives up");
  t.equal(relistCost(owners("aabb"), owners("aabb")), 0, "no change, no relist");
});
