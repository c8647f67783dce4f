/**
 * The labeller's PATCH rate: a ceiling the user sets, and under it a target
 * that adapts to what the apiserver says (AIMD, as TCP does with a congested
 * link).
 *
 * - The ceiling (`--label-rate`, `maxRatePerSecond`) is a promise to the
 *   apiserver's operator: at most that many PATCHes begin in any one second,
 *   whatever the target or the token bucket's burst. It is kept by a sliding
 *   window over the last ⌈ceiling⌉ sends, not by the bucket alone (a full
 *   bucket of `burst` tokens would otherwise go on top of a second's rate).
 * - The target, which fills the token bucket, starts at 20/s (the ceiling
 *   if lower, the floor if higher: a user's `--label-rate 5` labels at 5/s
 *   from the start, as before the rate adapted) and, once a second while
 *   PATCHes come back fast and unthrottled and the rate is what holds work
 *   back (work is queued and the in-flight slots are not all taken), climbs
 *   toward the ceiling: it doubles until the apiserver first pushes back
 *   (TCP's slow start: 20/s reaches 500/s in five seconds, not 24), then
 *   climbs by the floor. It halves, not below the floor (`--label-rate-min`;
 *   by default a tenth of the ceiling, at most 20/s, so that even a small
 *   ceiling leaves room to back off), on a 429 (API Priority and Fairness
 *   refusing the request) or a PATCH slower than `slowPatchMs` (APF queueing
 *   it, or etcd struggling).
 *   At most one halving per second: the PATCHes in flight when the
 *   apiserver pushes back all come back throttled, and they are one signal,
 *   not eight.
 * - The achieved rate is what is reported (metric, `Labelled` condition):
 *   PATCHes answered in the last {@link ACHIEVED_WINDOW_MS}, per second. The
 *   target is an allowance; with `maxInFlight` PATCHes at once of latency L,
 *   no more than maxInFlight ÷ L are answered a second, whatever it says.
 *
 * Pure: the caller passes the time.
 */

export interface RatePolicy {
  /** The ceiling, per second (`--label-rate`): at most this many PATCHes begin in any one second. */
  readonly maxRatePerSecond: number;
  /** The floor, per second (`--label-rate-min`): what the target never halves below; at most the ceiling. Default {@link defaultFloor}. */
  readonly minRatePerSecond?: number | undefined;
  /** A PATCH slower than this is a sign of an apiserver under load. */
  readonly slowPatchMs: number;
}

export interface RateState {
  /** The target rate now, per second: what fills the token bucket. */
  target: number;
  /** When it last changed (or started). */
  changedAt: number;
  /** Halvings since the start, for metrics and the status message. */
  backoffs: number;
  /** When each of the last ⌈ceiling⌉ PATCHes began, a ring whose oldest entry is at `sentNext`. */
  readonly sent: number[];
  sentNext: number;
  /** When each PATCH was answered, oldest first from `answeredHead`; pruned to the achieved window. */
  readonly answered: number[];
  answeredHead: number;
}

/** How long the target holds after a change before the next increase or halving. */
export const ADAPT_INTERVAL_MS = 1_000;
/** The window the achieved rate is measured over. */
export const ACHIEVED_WINDOW_MS = 10_000;
/** Where the target starts, and the largest default floor: kube-controller-manager's default client rate (`--kube-api-qps`). */
export const START_RATE = 20;

/** The floor when none is set: a tenth of the ceiling (room to back off), at most {@link START_RATE}. */
export function defaultFloor(maxRatePerSecond: number): number {
  return Math.min(START_RATE, maxRatePerSecond / 10);
}

/** The floor, the ceiling and the start the policy means: floor ≤ start ≤ ceiling. */
export function rateBounds(p: RatePolicy): { readonly floor: number; readonly start: number; readonly ceiling: number } {
  const ceiling = p.maxRatePerSecond;
  const floor = Math.min(ceiling, p.minRatePerSecond ?? defaultFloor(ceiling));
  return { floor, start: Math.max(floor, Math.min(ceiling, START_RATE)), ceiling };
}

/** The ceiling's window: ⌈ceiling⌉ sends per `ms` (1 s for a whole ceiling). */
function ceilingWindow(p: RatePolicy): { readonly sends: number; readonly ms: number } {
  const sends = Math.max(1, Math.ceil(p.maxRatePerSecond));
  return { sends, ms: (1000 * sends) / p.maxRatePerSecond };
}

export function initialRate(p: RatePolicy, now: number): RateState {
  return { target: rateBounds(p).start, changedAt: now, backoffs: 0, sent: new Array<number>(ceilingWindow(p).sends).fill(Number.NEGATIVE_INFINITY), sentNext: 0, answered: [], answeredHead: 0 };
}

/** The earliest time, `now` or later, at which the ceiling lets one more PATCH begin. */
export function sendAllowedAt(s: RateState, p: RatePolicy, now: number): number {
  return Math.max(now, (s.sent[s.sentNext] ?? Number.NEGATIVE_INFINITY) + ceilingWindow(p).ms);
}

/** Records that a PATCH began at `now` (the caller checked {@link sendAllowedAt}). */
export function recordSend(s: RateState, now: number): void {
  s.sent[s.sentNext] = now;
  s.sentNext = (s.sentNext + 1) % s.sent.length;
}

/** PATCHes answered in the last {@link ACHIEVED_WINDOW_MS}, per second. */
export function achievedRate(s: RateState, now: number): number {
  let n = 0;
  for (let i = s.answered.length - 1; i >= s.answeredHead && (s.answered[i] ?? 0) > now - ACHIEVED_WINDOW_MS; i--) n++;
  return n / (ACHIEVED_WINDOW_MS / 1000);
}

function recordAnswer(s: RateState, now: number): void {
  s.answered.push(now);
  while (s.answeredHead < s.answered.length && (s.answered[s.answeredHead] ?? 0) <= now - ACHIEVED_WINDOW_MS) s.answeredHead++;
  if (s.answeredHead > 1024 && s.answeredHead * 2 > s.answered.length) {
    s.answered.splice(0, s.answeredHead);
    s.answeredHead = 0;
  }
}

export type RateSignal =
  /**
   * A PATCH came back (any outcome but throttled) after `latencyMs`;
   * `rateBound` is whether the rate is what held work back (work is queued
   * and the in-flight slots were not all taken): only then is a higher
   * target worth anything.
   */
  | { readonly type: "answered"; readonly latencyMs: number; readonly rateBound: boolean }
  /** The apiserver answered 429. */
  | { readonly type: "throttled" };

/** Applies one answer in place (it counts toward the achieved rate); returns whether the target changed. */
export function adaptRate(s: RateState, p: RatePolicy, signal: RateSignal, now: number): boolean {
  recordAnswer(s, now);
  const { floor, ceiling } = rateBounds(p);
  const settled = now - s.changedAt >= ADAPT_INTERVAL_MS;
  const congested = signal.type === "throttled" || signal.latencyMs > p.slowPatchMs;
  if (congested) {
    if (!settled || s.target <= floor) return false;
    s.target = Math.max(floor, s.target / 2);
    s.changedAt = now;
    s.backoffs++;
    return true;
  }
  // Only work held back by the rate proves the rate is the limit: an idle
  // labeller, or one whose in-flight slots are all taken, learns nothing.
  if (signal.type !== "answered" || !signal.rateBound || !settled || s.target >= ceiling) return false;
  s.target = Math.min(ceiling, s.backoffs === 0 ? s.target * 2 : s.target + floor);
  s.changedAt = now;
  return true;
}
