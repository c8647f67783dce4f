/**
 * The handoff protocol as a pure state machine, for both sides of the ring.
 *
 * The leader side is {@link step}: `(state, event, now, mode) → { state,
 * effects }`. The state *is* the ShardRing's committed and pending tables
 * plus the leader's bookkeeping; effects are plain data (fence this member,
 * generation g was committed, ...) that the coordinator executes or records.
 * The member side is {@link follow}: which slots to enforce, under which
 * generation, given the tables the member last accepted.
 *
 * Invariants this file keeps (each is pinned by a row in
 * test/ring/handoff.test.ts):
 * - overlap: a slot's old owner keeps it until its new owner has reported
 *   ready for the generation that gives it the slot, so no slot is ever
 *   without a ready owner during a graceful change;
 * - exclusive: a slot's new owner gets it only after its old owner has
 *   reported that it dropped it (or was fenced), so no slot has two owners;
 * - nobody's slots move while they might still be serving: a member whose
 *   Lease is dead is fenced first, one merely expired is waited for;
 * - generations only grow and are never reused; a handoff spends two (its
 *   intermediate step and its table) and an abandon commits the old table
 *   again under a fresh one, so what each member enforces is stamped with
 *   an ever-growing generation;
 * - an empty committed table is never committed again: after a rebuilt
 *   status, members hold slots that table does not know about;
 * - relist budget: the gainers of a pending table relist at most
 *   `policy.relistBudget` keyspaces between them (each relists its whole
 *   new share), unless more is needed to take over slots nobody serves (a
 *   crashed or fenced owner, or an empty table), and at least one gainer
 *   always moves; the rest of a rebalance follows in later handoffs, each
 *   one the normal two-generation handoff, so the rules above hold for
 *   every one of them;
 * - a fresh ring (no table, no member ever acknowledged one) gets its first
 *   table once membership settles: no member joined for
 *   `policy.settleQuietMs`, or `policy.settleMaxMs` after the first one was
 *   seen; so a Deployment's M replicas, started together, each list once,
 *   their own share, instead of the first few taking everything and
 *   handing it on join by join.
 *
 * Pure: no clock, no timers, no I/O.
 */
import { assignSlots, slotsOf, type SlotOwners } from "../shard/table.ts";
import { isReleased, isServing, isAssignable, needsFence, MemberState } from "./state.ts";
import { HandoffMode, PendingPhase, stepGeneration, type PendingTable, type RingTables, type Table } from "./table.ts";

export const Phase = {
  /** The committed table matches the members; nothing to do. */
  Stable: "Stable",
  /** Waiting for the Lease takeover of a dead member before moving its slots. */
  Fencing: "Fencing",
  /** overlap: a pending table is out; waiting for its gainers to report ready. */
  Widening: "Widening",
  /** exclusive: a pending table is out; waiting for its losers to report narrowed. */
  Narrowing: "Narrowing",
  /** A generation was abandoned at its deadline; waiting before trying again. */
  Backoff: "Backoff",
  /** A fresh ring: waiting for membership to settle before the first table. */
  Settling: "Settling",
} as const;
export type Phase = (typeof Phase)[keyof typeof Phase];

/** What the leader knows about one member, from its Lease. */
export interface MemberObservation {
  readonly name: string;
  readonly state: MemberState;
  /** The member's `shardcar.io/applied-generation`; 0 when absent. */
  readonly applied: number;
  /** When the leader last saw it renew (leader's clock, ms); for crash accounting. */
  readonly renewedAt?: number;
}

export interface HandoffPolicy {
  /** Time a pending generation has before it is abandoned. */
  readonly timeoutMs: number;
  /** First wait after an abandon; doubles per consecutive abandon. */
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  /**
   * The keyspace the gainers of one pending table may relist between them,
   * in whole keyspaces (1 = what one unsharded replica lists when it
   * starts); > 0. Slots from an owner that stopped serving are exempt; see
   * {@link withinBudget}.
   */
  readonly relistBudget: number;
  /**
   * A fresh ring's first table waits until no member joined for this long
   * (0: no wait).
   */
  readonly settleQuietMs?: number | undefined;
  /** ...and at most this long after the first member was seen. */
  readonly settleMaxMs?: number | undefined;
  /**
   * In a ring with a table, the next table after members joined or began
   * leaving waits until none did for this long (0: no wait): a rolling
   * update's new members and the old ones it stops come seconds apart, and
   * one table for both gives the leavers' slots to the newcomers, where two
   * would have every member gain, and relist, twice. Never when a slot's
   * holder stopped serving: coverage beats cost.
   */
  readonly changeQuietMs?: number | undefined;
  /** ...and at most this long after the first change. */
  readonly changeMaxMs?: number | undefined;
}

/** Membership changes the next table waits out (see {@link HandoffPolicy.changeQuietMs}). */
export interface Change {
  /** The assignable members as last seen (name order). */
  readonly ready: readonly string[];
  /** When they first changed since the last table was planned; undefined: no change waits. */
  readonly firstAt: number | undefined;
  /** When they last changed. */
  readonly lastAt: number;
}

/** A fresh ring's membership while its first table waits for it to settle. */
export interface Settle {
  /** When the leader first saw a member it could give slots to. */
  readonly firstAt: number;
  /** When a member it had not seen before last appeared. */
  readonly lastJoinAt: number;
  /** Every assignable member seen so far (name order). */
  readonly seen: readonly string[];
}

/**
 * Slots an exclusive handoff left in no cache: dropped by their old owner
 * before `member` (their owner from `generation` on) has listed them.
 */
export interface Gap {
  readonly member: string;
  readonly slots: readonly number[];
  readonly generation: number;
  /** When the leader first saw an old owner report that it dropped them. */
  readonly since: number;
}

/** A crashed member whose slots are not yet back with a ready owner. */
export interface Crash {
  readonly member: string;
  /** Last proof of life: when the member was last seen renewing. */
  readonly since: number;
  readonly slots: readonly number[];
}

export interface RingState {
  readonly phase: Phase;
  readonly slotCount: number;
  readonly committed: Table;
  readonly pending: PendingTable | undefined;
  /** For each slot, the generation at which its committed owner got it. */
  readonly since: readonly number[];
  /** The newest generation ever published; the next one is above it. */
  readonly lastGeneration: number;
  /** The latest observation of every member Lease of the ring. */
  readonly members: readonly MemberObservation[];
  /** Members whose fence was requested and has not been seen to land. */
  readonly fencing: readonly string[];
  /** No new generation is published before this time (backoff). */
  readonly retryAt: number;
  /** Consecutive abandons at the deadline. */
  readonly failures: number;
  readonly crashes: readonly Crash[];
  /** Exclusive handoffs' gaps not yet closed (measured, never waited on). */
  readonly gaps: readonly Gap[];
  /** While an exclusive table is pending: when the leader first saw one of its losers narrow. */
  readonly narrowedAt?: number | undefined;
  /**
   * Members the balanced table would give slots to that the relist budget
   * left out of the pending one (name order); empty when nothing is pending.
   */
  readonly deferred: readonly string[];
  /** Set while a fresh ring waits for membership to settle. */
  readonly settle?: Settle | undefined;
  /** The assignable members and their changes since the last plan; undefined until the first observation. */
  readonly change?: Change | undefined;
  /**
   * The owners of a first table (one over an empty committed table) that was
   * abandoned because a member it relied on was lost: the next first table
   * starts from it, so only the lost member's slots move, and the members
   * that already listed their share do not list it again. Cleared at commit.
   */
  readonly seed?: SlotOwners | undefined;
  readonly policy: HandoffPolicy;
}

export type RingEvent =
  /** A fresh snapshot of every member Lease of the ring (level-triggered). */
  | { readonly type: "observe"; readonly members: readonly MemberObservation[] }
  /** The leader's takeover of `member`'s Lease was written. */
  | { readonly type: "fenced"; readonly member: string }
  /** Time passed (a timer from {@link nextWakeMs} or a Lease transition fired). */
  | { readonly type: "tick" };

export type Effect =
  /** A new pending generation; the coordinator writes it to the status. */
  | { readonly type: "publish"; readonly generation: number; readonly phase: PendingPhase; readonly deadline: number }
  /** `member` is expected to add `slots` (overlap: at publish; exclusive: at commit; or back after an abandon). */
  | { readonly type: "widen"; readonly member: string; readonly slots: readonly number[] }
  /** `member` is expected to drop `slots`. */
  | { readonly type: "narrow"; readonly member: string; readonly slots: readonly number[] }
  | { readonly type: "commit"; readonly generation: number; readonly durationMs: number }
  | { readonly type: "abandon"; readonly generation: number; readonly reason: "deadline" | "member-lost"; readonly durationMs: number }
  /** Take `member`'s Lease over, then report `{ type: "fenced" }`. */
  | { readonly type: "fence"; readonly member: string }
  /** An exclusive handoff's gap closed: `member` listed the slots it was given `uncoveredMs` after they were first dropped. */
  | { readonly type: "gap-closed"; readonly member: string; readonly uncoveredMs: number }
  /** All slots of a crashed member have a ready owner again. */
  | { readonly type: "recovered"; readonly member: string; readonly uncoveredMs: number };

export interface StepResult {
  readonly state: RingState;
  readonly effects: readonly Effect[];
}

/**
 * The state of a ring whose leader just started: from the tables in the
 * ShardRing status (or none for a new ring). Until the first `observe`
 * event, nothing is decided: the caller must have listed the member Leases
 * before it steps, or every holder would look gone.
 */
export function initialState(opts: { slotCount: number; policy: HandoffPolicy; tables?: RingTables | undefined }): RingState {
  const committed = opts.tables?.committed ?? { generation: 0, owners: Array.from({ length: opts.slotCount }, () => undefined) };
  const pending = opts.tables?.pending;
  return {
    phase: pending === undefined ? Phase.Stable : pending.phase === PendingPhase.Widening ? Phase.Widening : Phase.Narrowing,
    slotCount: opts.slotCount,
    committed,
    pending,
    // A new leader cannot know who relisted when; it assumes the committed
    // table is settled, which is what the previous leader committed it for.
    since: Array.from({ length: opts.slotCount }, () => committed.generation),
    lastGeneration: Math.max(opts.tables?.generation ?? 0, committed.generation, pending?.generation ?? 0),
    members: [],
    fencing: [],
    retryAt: 0,
    failures: 0,
    crashes: [],
    gaps: [],
    deferred: [],
    policy: opts.policy,
  };
}

/** The tables to write to the ShardRing status for `state`. */
export function tablesOf(state: RingState): RingTables {
  return { generation: state.lastGeneration, committed: state.committed, pending: state.pending };
}

function sameOwners(a: SlotOwners, b: SlotOwners): boolean {
  return a.length === b.length && a.every((o, i) => o === b[i]);
}

function ownersOf(t: SlotOwners): string[] {
  return [...new Set(t.filter((o): o is string => o !== undefined))].sort();
}

/** For each member, the slots it gains and loses from `from` to `to`. */
function diff(from: SlotOwners, to: SlotOwners): { gains: Map<string, number[]>; losses: Map<string, number[]> } {
  const gains = new Map<string, number[]>();
  const losses = new Map<string, number[]>();
  for (let s = 0; s < Math.max(from.length, to.length); s++) {
    const a = from[s];
    const b = to[s];
    if (a === b) continue;
    if (b !== undefined) gains.set(b, [...(gains.get(b) ?? []), s]);
    if (a !== undefined) losses.set(a, [...(losses.get(a) ?? []), s]);
  }
  return { gains, losses };
}

/** Codepoint order, never locale order: every manager replica must choose alike. */
function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The part of the table change `from → to` that one handoff may make under
 * a relist budget. Every member that gains a slot relists its whole share
 * (what it holds in `from` and `to` together), so the cost of a gainer is
 * that share, and `budget` is counted in whole keyspaces: 1 is one full
 * list, what one unsharded replica lists when it starts.
 *
 * - A slot whose owner in `from` is not `serving` (crashed, fenced, gone) or
 *   that has no owner (a new ring) is *exempt*: coverage beats the budget,
 *   and its new owner gets it now. Such a gainer relists anyway, so it also
 *   gets the rest of its gains, and its cost counts against the budget.
 * - The other gainers follow, most gained slots first, ties by name;
 *   `rotate` (the count of consecutive abandoned handoffs) shifts that
 *   order, so a gainer that never gets ready does not hold up the others
 *   for good. Each gets all its slots while the costs so far fit the
 *   budget; the first that does not fit ends the choice (so the order is
 *   kept: a large gainer is not passed over for good by small ones). One is
 *   always chosen when none is exempt.
 * - Every other slot stays with its owner in `from`, who is serving.
 *
 * The result differs from `from` whenever `to` does, so every handoff makes
 * progress; that replanning after each one ends at a balanced table is
 * pinned by the random runs in test/ring/handoff.test.ts. `deferred` are
 * the gainers left out, in name order.
 */
export function withinBudget(
  from: SlotOwners,
  to: SlotOwners,
  serving: (member: string) => boolean,
  budget: number,
  rotate = 0,
): { owners: (string | undefined)[]; deferred: string[] } {
  const exempt = new Set<string>();
  const gained = new Map<string, number>();
  to.forEach((b, s) => {
    const a = from[s];
    if (b === undefined || a === b) return;
    if (a === undefined || !serving(a)) exempt.add(b);
    gained.set(b, (gained.get(b) ?? 0) + 1);
  });
  const share = listedSlots(from, to);
  const waiting = [...gained.keys()].filter((m) => !exempt.has(m)).sort((x, y) => (gained.get(y) ?? 0) - (gained.get(x) ?? 0) || byName(x, y));
  const shift = waiting.length === 0 ? 0 : rotate % waiting.length;
  const order = [...waiting.slice(shift), ...waiting.slice(0, shift)];
  const limit = budget * Math.max(1, to.length);
  let spent = [...exempt].reduce((n, m) => n + (share.get(m) ?? 0), 0);
  let room = 0;
  for (const m of order) {
    const cost = share.get(m) ?? 0;
    if (spent + cost > limit && (room > 0 || exempt.size > 0)) break;
    spent += cost;
    room++;
  }
  const chosen = new Set([...exempt, ...order.slice(0, room)]);
  const owners = to.map((b, s) => (b === undefined || chosen.has(b) ? b : from[s]));
  return { owners, deferred: order.slice(room).sort(byName) };
}

/**
 * For each member, the slots it lists if it relists for the change
 * `from → to`: what it holds in either table (while it widens, a gainer
 * still enforces what it is giving up).
 */
function listedSlots(from: SlotOwners, to: SlotOwners): Map<string, number> {
  const slots = new Map<string, number>();
  for (let s = 0; s < Math.max(from.length, to.length); s++) {
    const a = from[s];
    const b = to[s];
    if (b !== undefined) slots.set(b, (slots.get(b) ?? 0) + 1);
    if (a !== undefined && a !== b) slots.set(a, (slots.get(a) ?? 0) + 1);
  }
  return slots;
}

/**
 * The cost {@link withinBudget} charges a table change `from → to`: the
 * slots its gainers relist between them, in keyspaces. For tests and the
 * S1 bench.
 */
export function relistCost(from: SlotOwners, to: SlotOwners): number {
  const listed = listedSlots(from, to);
  const gainers = new Set(to.filter((b, s): b is string => b !== undefined && from[s] !== b));
  let slots = 0;
  for (const g of gainers) slots += listed.get(g) ?? 0;
  return slots / Math.max(1, to.length);
}

interface Draft {
  s: RingState;
  fx: Effect[];
}

/**
 * Advances the leader's view of one ring. `mode` is the ring's current
 * handoff mode; it applies to the next generation published (a pending one
 * finishes in the phase it started in). Never throws for well-formed input.
 */
export function step(state: RingState, event: RingEvent, now: number, mode: HandoffMode): StepResult {
  const d: Draft = { s: state, fx: [] };
  switch (event.type) {
    case "observe":
      d.s = { ...d.s, members: event.members };
      break;
    case "fenced":
      d.s = { ...d.s, fencing: d.s.fencing.filter((m) => m !== event.member) };
      break;
    case "tick":
      break;
  }
  evaluate(d, now, mode);
  return { state: d.s, effects: d.fx };
}

function evaluate(d: Draft, now: number, mode: HandoffMode): void {
  const obs = new Map(d.s.members.map((m) => [m.name, m]));
  const stateOf = (n: string): MemberState => obs.get(n)?.state ?? MemberState.Gone;
  const appliedOf = (n: string): number => obs.get(n)?.applied ?? 0;

  // A fence is done once the Lease shows it, or moot once the member renewed
  // (the takeover lost the optimistic-concurrency race, as it must).
  d.s = { ...d.s, fencing: d.s.fencing.filter((m) => needsFence(stateOf(m))) };

  const holders = new Set([...ownersOf(d.s.committed.owners), ...ownersOf(d.s.pending?.owners ?? [])]);
  for (const h of [...holders].sort()) {
    const st = stateOf(h);
    const lost = needsFence(st) || isReleased(st);
    if (lost && !d.s.crashes.some((c) => c.member === h)) {
      const slots = slotsOf(d.s.committed.owners, h);
      if (slots.length > 0) d.s = { ...d.s, crashes: [...d.s.crashes, { member: h, since: obs.get(h)?.renewedAt ?? now, slots }] };
    }
    // Fence before anything else: until the Lease is ours, the member may be
    // alive behind a partition and still serving its slots.
    if (needsFence(st) && !d.s.fencing.includes(h)) {
      d.s = { ...d.s, fencing: [...d.s.fencing, h] };
      d.fx.push({ type: "fence", member: h });
    }
  }

  trackChange(d, now);
  if (d.s.pending !== undefined) settlePending(d, d.s.pending, now, stateOf, appliedOf);
  if (d.s.pending === undefined) planNext(d, now, mode, stateOf);
  // A plan may complete at once (no gainer to wait for, or no loser).
  if (d.s.pending !== undefined) settlePending(d, d.s.pending, now, stateOf, appliedOf);
  resolveCrashes(d, now, stateOf, appliedOf);
  resolveGaps(d, now, stateOf, appliedOf);
}

function settlePending(d: Draft, p: PendingTable, now: number, stateOf: (n: string) => MemberState, appliedOf: (n: string) => number): void {
  const { gains, losses } = diff(d.s.committed.owners, p.owners);
  // A member the new table relies on is gone: nobody will ever report for
  // it. Abandon now (no backoff) and replan once it is fenced.
  const lostOwner = ownersOf(p.owners).find((m) => needsFence(stateOf(m)) || isReleased(stateOf(m)));
  // Nor is a gainer worth waiting for once it is leaving (its pod is
  // terminating) or has stopped renewing: it would take slots only to hand
  // them on, or never report. Abandon now and replan without it; in a
  // rolling update this is what keeps one wave from waiting out the
  // deadline on a pod that is going away.
  // Not over an empty committed table (a cold start): there a replan without
  // one member moves every member's slots, and each would relist again; the
  // late member is left to expire for good (fenced, then replanned) instead.
  const lostGainer = hasOwners(d.s.committed.owners) ? [...gains.keys()].find((m) => stateOf(m) === MemberState.Leaving || stateOf(m) === MemberState.Expired) : undefined;
  if (lostOwner !== undefined || lostGainer !== undefined) {
    abandon(d, p, now, "member-lost", gains, losses);
    return;
  }
  let done: boolean;
  if (p.phase === PendingPhase.Widening) {
    // Only gainers need to relist; a member keeping or losing slots is
    // already covering everything it will own.
    done = [...gains.keys()].every((m) => isServing(stateOf(m)) && appliedOf(m) >= stepGeneration(p));
  } else {
    // A fenced loser can no longer serve, which is as good as narrowed.
    done = [...losses.keys()].every((m) => isReleased(stateOf(m)) || appliedOf(m) >= stepGeneration(p));
    // The gap opens when a live loser has dropped its slots (a fenced one's is a crash's, measured as such).
    if (d.s.narrowedAt === undefined && [...losses.keys()].some((m) => isServing(stateOf(m)) && appliedOf(m) >= stepGeneration(p))) d.s = { ...d.s, narrowedAt: now };
  }
  if (done) {
    commit(d, p, now, gains, losses);
    return;
  }
  // Over an empty committed table (a new ring, or a rebuilt status) there is
  // nothing to fall back to: the pending table is the only way forward, and
  // members keep what they hold meanwhile. Its deadline does not apply.
  if (now >= p.deadline && hasOwners(d.s.committed.owners)) abandon(d, p, now, "deadline", gains, losses);
}

function hasOwners(owners: SlotOwners): boolean {
  return owners.some((o) => o !== undefined);
}

function commit(d: Draft, p: PendingTable, now: number, gains: Map<string, number[]>, losses: Map<string, number[]>): void {
  // A moved slot's new owner is ready from the report that made the commit
  // possible (overlap: the widened step) or from its first report after it
  // (exclusive: it widens only now).
  const readyAt = p.phase === PendingPhase.Widening ? stepGeneration(p) : p.generation;
  const since = d.s.since.map((g, s) => (d.s.committed.owners[s] === p.owners[s] ? g : readyAt));
  d.fx.push({ type: "commit", generation: p.generation, durationMs: now - p.startedAt });
  let gaps = d.s.gaps;
  if (p.phase === PendingPhase.Widening) {
    for (const [member, slots] of [...losses].sort()) d.fx.push({ type: "narrow", member, slots });
  } else {
    for (const [member, slots] of [...gains].sort()) d.fx.push({ type: "widen", member, slots });
    gaps = [...gaps, ...openedGaps(d, gains, p.generation, now)];
  }
  d.s = { ...d.s, committed: { generation: p.generation, owners: p.owners }, pending: undefined, since, failures: 0, deferred: [], phase: Phase.Stable, seed: undefined, gaps, narrowedAt: undefined };
}

function abandon(d: Draft, p: PendingTable, now: number, reason: "deadline" | "member-lost", gains: Map<string, number[]>, losses: Map<string, number[]>): void {
  d.fx.push({ type: "abandon", generation: p.generation, reason, durationMs: now - p.startedAt });
  // Undo what the members were asked to do; old owners never gave anything up.
  let gaps = d.s.gaps;
  if (p.phase === PendingPhase.Widening) {
    for (const [member, slots] of [...gains].sort()) d.fx.push({ type: "narrow", member, slots });
  } else {
    for (const [member, slots] of [...losses].sort()) d.fx.push({ type: "widen", member, slots });
    // Losers that dropped their slots list them again: a gap too, until the
    // table they step back to (committed below under the next generation).
    gaps = [...gaps, ...openedGaps(d, losses, d.s.lastGeneration + 1, now)];
  }
  d.s = { ...d.s, gaps, narrowedAt: undefined };
  // The old table is committed again under a new generation: members step
  // back to it, and the generation they enforce still only grows (a proxy
  // may rely on that to tell new ranges from old). Never an empty table:
  // after a rebuild, members hold slots it does not know about, and would
  // drop them; the next plan follows in this same step instead.
  const generation = d.s.lastGeneration + 1;
  const back = hasOwners(d.s.committed.owners)
    ? { ...d.s, pending: undefined, committed: { generation, owners: d.s.committed.owners }, lastGeneration: generation }
    : { ...d.s, pending: undefined, seed: p.owners };
  if (reason === "deadline") {
    const wait = Math.min(d.s.policy.maxBackoffMs, d.s.policy.backoffMs * 2 ** d.s.failures);
    d.s = { ...back, failures: d.s.failures + 1, retryAt: now + wait, deferred: [], phase: Phase.Backoff };
  } else {
    d.s = { ...back, deferred: [], phase: Phase.Stable };
  }
}

function planNext(d: Draft, now: number, mode: HandoffMode, stateOf: (n: string) => MemberState): void {
  if (d.s.fencing.length > 0) {
    d.s = { ...d.s, phase: Phase.Fencing };
    return;
  }
  // An expired holder may be alive behind a partition, and a dead one is not
  // fenced yet: its slots cannot move, and replanning around it now would
  // only have to be redone. Wait for it to renew or to become fenceable.
  const committedHolders = ownersOf(d.s.committed.owners);
  if (committedHolders.some((h) => stateOf(h) === MemberState.Expired || needsFence(stateOf(h)))) {
    d.s = { ...d.s, phase: d.s.phase === Phase.Backoff ? Phase.Backoff : Phase.Stable };
    return;
  }
  const ready = d.s.members.filter((m) => isAssignable(m.state)).map((m) => m.name);
  if (!settled(d, now, ready)) return;
  // Over an empty committed table, start from the abandoned first table if
  // there was one: a cold start that lost a member replans only its slots.
  const base = hasOwners(d.s.committed.owners) ? d.s.committed.owners : (d.s.seed ?? d.s.committed.owners);
  const desired = assignSlots(ready, base, d.s.slotCount);
  if (sameOwners(desired, d.s.committed.owners)) {
    d.s = { ...d.s, phase: Phase.Stable, failures: 0, change: planned(d.s.change) };
    return;
  }
  if (!changeSettled(d, now, stateOf)) return;
  if (now < d.s.retryAt) {
    d.s = { ...d.s, phase: Phase.Backoff };
    return;
  }
  // The relist budget: a rebalance that would have more members relist at
  // once than the ring allows goes in several handoffs. Computed from the
  // committed table, so a new leader continues where the old one was (only
  // the rotation after abandons, the leader's memory, starts over).
  const { owners: next, deferred } = withinBudget(d.s.committed.owners, desired, (n) => isServing(stateOf(n)), d.s.policy.relistBudget, d.s.failures);
  const phase = mode === HandoffMode.Exclusive ? PendingPhase.Narrowing : PendingPhase.Widening;
  // Two generations per handoff: g+1 names the intermediate step (held ∪
  // new, or held ∩ new) that gainers or losers acknowledge, g+2 the new
  // table. With one, markApplied(g) could not tell the two range sets apart.
  // Above every report too: a member may have acknowledged a generation a
  // previous leader published and never persisted.
  const floor = Math.max(d.s.lastGeneration, ...d.s.members.map((m) => m.applied));
  const generation = floor + 2;
  const pending: PendingTable = { generation, owners: next, phase, startedAt: now, deadline: now + d.s.policy.timeoutMs };
  d.fx.push({ type: "publish", generation, phase, deadline: pending.deadline });
  const { gains, losses } = diff(d.s.committed.owners, next);
  if (phase === PendingPhase.Widening) {
    for (const [member, slots] of [...gains].sort()) d.fx.push({ type: "widen", member, slots });
  } else {
    for (const [member, slots] of [...losses].sort()) d.fx.push({ type: "narrow", member, slots });
  }
  d.s = { ...d.s, pending, lastGeneration: generation, deferred, phase: phase === PendingPhase.Widening ? Phase.Widening : Phase.Narrowing, change: planned(d.s.change) };
}

/** Records a change of the assignable members (joins, leaves, a member beginning to leave). A new leader's first sight is no change. */
function trackChange(d: Draft, now: number): void {
  const ready = d.s.members.filter((m) => isAssignable(m.state)).map((m) => m.name).sort(byName);
  const c = d.s.change;
  if (c === undefined) d.s = { ...d.s, change: { ready, firstAt: undefined, lastAt: now } };
  else if (ready.join("\n") !== c.ready.join("\n")) d.s = { ...d.s, change: { ready, firstAt: c.firstAt ?? now, lastAt: now } };
}

/** The change record once a table was planned for it: nothing waits any more. */
function planned(c: Change | undefined): Change | undefined {
  return c === undefined || c.firstAt === undefined ? c : { ...c, firstAt: undefined };
}

/** When a table that follows membership changes is due. */
function changeDueAt(c: Change, policy: HandoffPolicy): number {
  const quietEnd = c.lastAt + (policy.changeQuietMs ?? 0);
  const max = policy.changeMaxMs;
  return max === undefined || c.firstAt === undefined ? quietEnd : Math.min(quietEnd, c.firstAt + max);
}

/**
 * Whether the next table may be planned now, as far as membership changes
 * go (see {@link HandoffPolicy.changeQuietMs}): yes when nothing changed
 * since the last plan, when a committed slot's holder stopped serving, or
 * once the changes have been quiet long enough.
 */
function changeSettled(d: Draft, now: number, stateOf: (n: string) => MemberState): boolean {
  const c = d.s.change;
  if ((d.s.policy.changeQuietMs ?? 0) <= 0 || c === undefined || c.firstAt === undefined) return true;
  if (ownersOf(d.s.committed.owners).some((h) => !isServing(stateOf(h)))) return true;
  if (now >= changeDueAt(c, d.s.policy)) return true;
  d.s = { ...d.s, phase: Phase.Settling };
  return false;
}

/**
 * Whether a fresh ring's membership has settled enough for its first table:
 * no member joined for `settleQuietMs`, or `settleMaxMs` passed since the
 * first. A ring is fresh when it has no table and no member ever
 * acknowledged one: after a rebuilt status, members report the generations
 * they hold, and the table must follow at once. Records the membership in
 * `settle` meanwhile, and clears it once the ring is no longer fresh.
 */
function settled(d: Draft, now: number, ready: readonly string[]): boolean {
  const quiet = d.s.policy.settleQuietMs ?? 0;
  const fresh = !hasOwners(d.s.committed.owners) && d.s.members.every((m) => m.applied === 0);
  if (!fresh || quiet <= 0 || ready.length === 0) {
    if (d.s.settle !== undefined && !fresh) d.s = { ...d.s, settle: undefined };
    return true;
  }
  const prev = d.s.settle;
  const joined = prev === undefined || ready.some((m) => !prev.seen.includes(m));
  const settle: Settle = {
    firstAt: prev?.firstAt ?? now,
    lastJoinAt: joined ? now : prev.lastJoinAt,
    seen: joined ? [...new Set([...(prev?.seen ?? []), ...ready])].sort(byName) : prev.seen,
  };
  if (now >= settleAt(settle, d.s.policy)) {
    d.s = { ...d.s, settle: undefined };
    return true;
  }
  d.s = { ...d.s, settle, phase: Phase.Settling };
  return false;
}

/** When a fresh ring's first table is due, given its membership so far. */
function settleAt(settle: Settle, policy: HandoffPolicy): number {
  const quietEnd = settle.lastJoinAt + (policy.settleQuietMs ?? 0);
  const max = policy.settleMaxMs;
  return max === undefined ? quietEnd : Math.min(quietEnd, settle.firstAt + max);
}

/** The gaps an exclusive step opened, if a live loser had already dropped its slots. */
function openedGaps(d: Draft, moved: Map<string, number[]>, generation: number, now: number): Gap[] {
  const since = d.s.narrowedAt;
  if (since === undefined) return [];
  return [...moved].sort().map(([member, slots]) => ({ member, slots, generation, since: Math.min(since, now) }));
}

/** Closes the gaps whose new owner listed its slots; a gap whose owner stopped serving is a crash's now. */
function resolveGaps(d: Draft, now: number, stateOf: (n: string) => MemberState, appliedOf: (n: string) => number): void {
  if (d.s.gaps.length === 0) return;
  const left: Gap[] = [];
  for (const g of d.s.gaps) {
    if (!isServing(stateOf(g.member))) continue;
    if (appliedOf(g.member) >= g.generation) d.fx.push({ type: "gap-closed", member: g.member, uncoveredMs: now - g.since });
    else left.push(g);
  }
  d.s = { ...d.s, gaps: left };
}

function resolveCrashes(d: Draft, now: number, stateOf: (n: string) => MemberState, appliedOf: (n: string) => number): void {
  const left: Crash[] = [];
  for (const c of d.s.crashes) {
    const back = c.slots.every((s) => {
      const o = d.s.committed.owners[s];
      return o !== undefined && o !== c.member && isServing(stateOf(o)) && appliedOf(o) >= (d.s.since[s] ?? 0);
    });
    if (back) d.fx.push({ type: "recovered", member: c.member, uncoveredMs: now - c.since });
    else left.push(c);
  }
  if (left.length !== d.s.crashes.length) d.s = { ...d.s, crashes: left };
}

/**
 * ms until the leader must look again without any Lease changing: the
 * pending deadline, the end of a backoff, or a fresh ring's settle time. `undefined` when only Lease
 * changes (and their own timers, from `leaseTimes`) can move the ring.
 */
export function nextWakeMs(state: RingState, now: number): number | undefined {
  const deadline = state.pending !== undefined && hasOwners(state.committed.owners) ? state.pending.deadline : undefined;
  const at =
    state.pending !== undefined
      ? deadline
      : state.phase === Phase.Backoff
        ? state.retryAt
        : state.phase === Phase.Settling && state.settle !== undefined
          ? settleAt(state.settle, state.policy)
          : state.phase === Phase.Settling && state.change?.firstAt !== undefined
            ? changeDueAt(state.change, state.policy)
            : undefined;
  return at === undefined ? undefined : Math.max(0, at - now);
}

/**
 * The leader's model of how the keyspace is held right now, from the tables
 * and the members' reports (not measured in the proxies):
 * - `readyRatio`: share of slots with at least one owner that reported ready
 *   for the generation that gave it the slot;
 * - `overlapRatio`: share of slots delivered by two members (an overlap
 *   handoff in flight).
 */
export function coverage(state: RingState): { readyRatio: number; overlapRatio: number } {
  const obs = new Map(state.members.map((m) => [m.name, m]));
  const serving = (n: string): boolean => isServing(obs.get(n)?.state ?? MemberState.Gone);
  const applied = (n: string): number => obs.get(n)?.applied ?? 0;
  const p = state.pending;
  let ready = 0;
  let overlap = 0;
  for (let s = 0; s < state.slotCount; s++) {
    let holders = 0;
    let readyHolders = 0;
    const c = state.committed.owners[s];
    if (c !== undefined && serving(c)) {
      // An exclusive loser stops holding a slot once it acknowledged narrowing.
      const dropped = p !== undefined && p.phase === PendingPhase.Narrowing && p.owners[s] !== c && applied(c) >= stepGeneration(p);
      if (!dropped) {
        holders++;
        if (applied(c) >= (state.since[s] ?? 0)) readyHolders++;
      }
    }
    const g = p?.owners[s];
    if (p !== undefined && p.phase === PendingPhase.Widening && g !== undefined && g !== c && serving(g)) {
      holders++;
      if (applied(g) >= stepGeneration(p)) readyHolders++;
    }
    if (readyHolders > 0) ready++;
    if (holders > 1) overlap++;
  }
  return { readyRatio: ready / state.slotCount, overlapRatio: overlap / state.slotCount };
}

// ---------------------------------------------------------------------------
// The member side

/** The last committed table a member accepted: its slots and generation. */
export interface Held {
  readonly generation: number;
  readonly slots: readonly number[];
}

export interface Target {
  /** The generation the proxy's ranges are stamped with (and acknowledged under). */
  readonly generation: number;
  readonly slots: readonly number[];
  /** The new `Held`, to pass to the next call. */
  readonly held: Held;
}

/**
 * The slots member `name` must enforce, given the tables it last saw and
 * what it held before:
 * - a committed table is accepted only if its generation is above the held
 *   one, or equal with the same slots (a rolled-back status, or a table
 *   edited in place, is ignored: fail closed);
 * - `Widening`: held ∪ new slots, `Narrowing`: held ∩ new slots, both
 *   stamped with the step generation (one below the pending table's);
 * - otherwise exactly the held slots, stamped with their generation.
 *
 * So the generation of what a member enforces only grows as the leader
 * publishes, commits and abandons, and each generation names one range set.
 *
 * Widening from what the member *holds* rather than from the status's
 * committed table keeps the overlap promise even when a leader had to
 * rebuild the status from scratch.
 */
export function follow(held: Held, tables: RingTables | undefined, name: string): Target {
  let h = held;
  if (tables !== undefined) {
    const c = tables.committed;
    const slots = slotsOf(c.owners, name);
    // A generation's table never changes: the same generation with other
    // slots for us is an edit in place, not a commit, and is ignored.
    const same = c.generation === held.generation && slots.length === held.slots.length && slots.every((x, i) => x === held.slots[i]);
    if (c.generation > held.generation || same) h = { generation: c.generation, slots };
  }
  const p = tables?.pending;
  if (p !== undefined && stepGeneration(p) > h.generation) {
    const mine = new Set(slotsOf(p.owners, name));
    const slots = p.phase === PendingPhase.Widening ? [...new Set([...h.slots, ...mine])].sort((a, b) => a - b) : h.slots.filter((s) => mine.has(s));
    return { generation: stepGeneration(p), slots, held: h };
  }
  return { generation: h.generation, slots: h.slots, held: h };
}
