/**
 * The labeller's PATCH rate, adapted to what the apiserver says (AIMD, as
 * TCP does with a congested link): a backfill of 200,000 objects at a fixed
 * 20/s takes nearly three hours, yet on most clusters the apiserver absorbs
 * far more. So the rate starts at the floor (`--label-rate`) and, once a
 * second while PATCHes come back fast and unthrottled and work is waiting,
 * climbs toward the ceiling (`--label-rate-max`): it doubles until the
 * apiserver first pushes back (TCP's slow start: 20/s reaches 500/s in five
 * seconds, not 24), then climbs by the floor. It halves (not below the
 * floor) on a 429 (API Priority and Fairness refusing the request) or a
 * PATCH slower than `slowPatchMs` (APF queueing it, or etcd struggling).
 *
 * At most one halving per second: the PATCHes in flight when the apiserver
 * pushes back all come back throttled, and they are one signal, not eight.
 *
 * Pure: the caller passes the time.
 */

export interface RatePolicy {
  /** The floor and the starting rate, per second. */
  readonly ratePerSecond: number;
  /** The ceiling, per second; equal to the floor for a fixed rate. */
  readonly maxRatePerSecond: number;
  /** A PATCH slower than this is a sign of an apiserver under load. */
  readonly slowPatchMs: number;
}

export interface RateState {
  /** The current rate, per second. */
  rate: number;
  /** When it last changed (or started). */
  changedAt: number;
  /** Halvings since the start, for metrics and the status message. */
  backoffs: number;
}

/** How long the rate holds after a change before the next increase or halving. */
export const ADAPT_INTERVAL_MS = 1_000;

export function initialRate(p: RatePolicy, now: number): RateState {
  return { rate: p.ratePerSecond, changedAt: now, backoffs: 0 };
}

export type RateSignal =
  /** A PATCH came back (any outcome but throttled) after `latencyMs`; `waiting` is whether more work is queued. */
  | { readonly type: "answered"; readonly latencyMs: number; readonly waiting: boolean }
  /** The apiserver answered 429. */
  | { readonly type: "throttled" };

/** Applies one signal in place; returns whether the rate changed. */
export function adaptRate(s: RateState, p: RatePolicy, signal: RateSignal, now: number): boolean {
  const floor = p.ratePerSecond;
  const ceiling = Math.max(floor, p.maxRatePerSecond);
  const settled = now - s.changedAt >= ADAPT_INTERVAL_MS;
  const congested = signal.type === "throttled" || signal.latencyMs > p.slowPatchMs;
  if (congested) {
    if (!settled || s.rate <= floor) return false;
    s.rate = Math.max(floor, s.rate / 2);
    s.changedAt = now;
    s.backoffs++;
    return true;
  }
  // Only a backlog proves the rate is the limit: an idle labeller learns nothing.
  if (signal.type !== "answered" || !signal.waiting || !settled || s.rate >= ceiling) return false;
  s.rate = Math.min(ceiling, s.backoffs === 0 ? s.rate * 2 : s.rate + floor);
  s.changedAt = now;
  return true;
}
