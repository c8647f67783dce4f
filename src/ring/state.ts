/**
 * What a member Lease says about its holder, as an ordered state, so that
 * "may keep its slots" and "may get new slots" are comparisons.
 *
 * Pure: the current time is a parameter; no clock, no I/O.
 */
import { FENCED_PREFIX } from "./names.ts";
import { leaseTimes, type LeaseView } from "./times.ts";

/**
 * Ordered from "nothing to work with" to "healthy":
 *
 * - `Unknown`: the Lease is unreadable (no holder times). Treated like `Dead`:
 *   fenced before its slots move, because we cannot prove it stopped.
 * - `Gone`: no Lease, or a Lease its holder released. Its slots may move.
 * - `Fenced`: the leader took the Lease over. Its slots may move.
 * - `Dead`: expired for longer than the takeover delay. Must be fenced first.
 * - `Expired`: not renewed within its duration, not yet past the takeover
 *   delay. The member has fenced itself if it is alive; the leader waits.
 * - `Leaving`: renewing, and asked to be drained. Keeps its slots until the
 *   table moves them, gets no new ones.
 * - `Ready`: renewing. May own slots.
 */
export const MemberState = {
  Unknown: 0,
  Gone: 1,
  Fenced: 2,
  Dead: 3,
  Expired: 4,
  Leaving: 5,
  Ready: 6,
} as const;
export type MemberState = (typeof MemberState)[keyof typeof MemberState];

const NAMES = ["Unknown", "Gone", "Fenced", "Dead", "Expired", "Leaving", "Ready"] as const;

/** The state's name; `"Unknown"` for a number that is not a state. */
export function toString(state: number): string {
  return (Number.isInteger(state) && NAMES[state]) || "Unknown";
}

/** The state named `name` (case-sensitive); `Unknown` for anything else. */
export function fromString(name: string): MemberState {
  const i = NAMES.indexOf(name as (typeof NAMES)[number]);
  return i < 0 ? MemberState.Unknown : (i as MemberState);
}

/** Still delivering its ranges to its controller: may keep its slots. */
export function isServing(state: MemberState): boolean {
  return state >= MemberState.Leaving;
}

/** May be given slots in a new table. */
export function isAssignable(state: MemberState): boolean {
  return state === MemberState.Ready;
}

/** Its slots may be handed to others without fencing: it provably stopped. */
export function isReleased(state: MemberState): boolean {
  return state === MemberState.Gone || state === MemberState.Fenced;
}

/** The leader must take its Lease over before anyone else gets its slots. */
export function needsFence(state: MemberState): boolean {
  return state === MemberState.Dead || state === MemberState.Unknown;
}

/**
 * The state of a member from its Lease at `now`. `lease` undefined means no
 * Lease exists. `takeoverDelayMs` is the leader's; a value below the lease's
 * own duration counts as the duration (a member is never dead while its
 * Lease is valid).
 */
export function memberState(lease: LeaseView | undefined, now: number, takeoverDelayMs = 0): MemberState {
  if (lease === undefined) return MemberState.Gone;
  if (lease.holder === undefined || lease.holder === "") return MemberState.Gone;
  if (lease.holder.startsWith(FENCED_PREFIX)) return MemberState.Fenced;
  const times = leaseTimes(lease, now, takeoverDelayMs);
  if (times === undefined) return MemberState.Unknown;
  if (times.toExpired > 0) return lease.leaving ? MemberState.Leaving : MemberState.Ready;
  if (times.toDead > 0) return MemberState.Expired;
  return MemberState.Dead;
}
