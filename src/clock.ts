/**
 * The clock that shell code (the ring's coordinator and member, the proxy's
 * handoff ledger) reads and sleeps with. Injected, so tests
 * can drive time and so the decision code never reads it itself.
 */

export interface Clock {
  /** ms since the epoch. */
  now(): number;
  /** Resolves after `ms`, or at once (without rejecting) when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Calls `fn` after `ms`; returns a cancel function. Timers never keep the process alive. */
  timer(ms: number, fn: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      const done = (): void => {
        clearTimeout(t);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const t = setTimeout(done, Math.max(0, ms));
      signal?.addEventListener("abort", done, { once: true });
    }),
  timer: (ms, fn) => {
    const t = setTimeout(fn, Math.max(0, ms));
    t.unref();
    return () => clearTimeout(t);
  },
};

/**
 * The system clock's timers with a monotonic time: epoch-based, but never
 * stepped by NTP or an operator. For bounds that measure elapsed time on
 * this process (the proxy's quiet bounds): a wall clock stepped forward
 * would let each pass at once, stepped back would hold them for the step.
 * Not for times other processes read (the ring's lease clock is wall time).
 */
export const monotonicClock: Clock = {
  ...systemClock,
  now: () => performance.timeOrigin + performance.now(),
};
