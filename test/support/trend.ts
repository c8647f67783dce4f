/**
 * Whether a resource is flat over a long run: the least-squares slope of its
 * samples after a warm-up, judged against a bound per minute. Pure; the soak
 * (test/soak) samples, this decides.
 */

export interface Point {
  /** Minutes since the start. */
  readonly minute: number;
  readonly value: number;
}

/** Least-squares slope of `value` over `minute` (units per minute); 0 with fewer than two distinct minutes. */
export function slope(points: readonly Point[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p.minute, 0) / n;
  const my = points.reduce((s, p) => s + p.value, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const p of points) {
    sxy += (p.minute - mx) * (p.value - my);
    sxx += (p.minute - mx) ** 2;
  }
  return sxx === 0 ? 0 : sxy / sxx;
}

export interface Bound {
  /** Largest growth per minute that still counts as flat. */
  readonly perMinute: number;
  /**
   * Growth over the fitted window allowed however short the window is: a
   * window of a few minutes cannot tell a slope of `perMinute` from the
   * noise of one garbage collection, so a short run (CI's 2 minutes) may
   * grow by this much before it fails. Default 0 (the slope bound alone).
   */
  readonly noiseAllowance?: number;
}

export interface Verdict {
  readonly slope: number;
  /** The slope bound for this window: `perMinute`, or `noiseAllowance / window` when that is larger. */
  readonly bound: number;
  /** Minutes between the first and the last fitted sample. */
  readonly window: number;
  readonly fitted: number;
  readonly flat: boolean;
}

/** Fits the samples at or after `warmupMinutes` and judges the slope against `bound`. */
export function judge(points: readonly Point[], warmupMinutes: number, bound: Bound): Verdict {
  const fitted = points.filter((p) => p.minute >= warmupMinutes);
  const window = fitted.length < 2 ? 0 : Math.max(...fitted.map((p) => p.minute)) - Math.min(...fitted.map((p) => p.minute));
  const s = slope(fitted);
  const allowance = window > 0 ? (bound.noiseAllowance ?? 0) / window : Infinity;
  const b = Math.max(bound.perMinute, allowance);
  return { slope: s, bound: b, window, fitted: fitted.length, flat: fitted.length >= 3 && s <= b };
}
