/**
 * Time for a cluster simulated in one process: the time it would have seen
 * on a quiet machine.
 *
 * The ring tests run devapi, the coordinator, every member, their proxies
 * and their informers on one event loop. On a loaded 2-core machine that
 * process waits, runnable, while other jobs hold both cores, and on the wall
 * clock those waits add up to seconds: every member misses its 1.2 s renew
 * deadline at once and fences itself, and a request times out before its
 * answer is even read. An artefact of the machine, not of the protocol: in a
 * cluster, a member's renewals do not wait for another pod's LIST or for a
 * neighbour's compile.
 *
 * Under this clock time passes as the wall clock's, except for the time the
 * process was kept from running: a {@link TICK_MS} ticker advances it by the
 * real time since its last turn, but by no more than {@link TICK_MS} plus the
 * CPU time the process used meanwhile (its own work counts in full; waiting
 * for a core does not). On an idle machine it keeps pace with the wall clock.
 *
 * Deadlines keep their values: a renewal that really does not arrive (a
 * partition, a dead member) expires exactly as before. Timestamps it hands
 * out fall behind the wall clock on a loaded machine, so code that compares
 * them with `Date.now()` must not share objects with it.
 */
import type { Clock } from "../../src/ring/clock.ts";

export const TICK_MS = 10;

interface Timer {
  readonly at: number;
  readonly fn: () => void;
}

/** This process's CPU time (all threads) in ms. */
function processCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

export class QuietClock implements Clock {
  readonly #realNow: () => number;
  readonly #cpuNow: () => number;
  #now: number;
  #lastReal: number;
  #lastCpu: number;
  readonly #timers = new Set<Timer>();
  readonly #ticker: NodeJS.Timeout;
  #sleepers = 0;

  constructor(realNow: () => number = Date.now, cpuNow: () => number = processCpuMs) {
    this.#realNow = realNow;
    this.#cpuNow = cpuNow;
    this.#now = this.#lastReal = realNow();
    this.#lastCpu = cpuNow();
    this.#ticker = setInterval(() => this.tick(), TICK_MS);
    this.#ticker.unref();
  }

  now(): number {
    const real = Math.max(0, this.#realNow() - this.#lastReal);
    const ran = Math.max(0, this.#cpuNow() - this.#lastCpu);
    return this.#now + Math.min(real, TICK_MS + ran);
  }

  /** Advances time by this turn's step and runs what is due; the ticker calls it. */
  tick(): void {
    this.#now = this.now();
    this.#lastReal = this.#realNow();
    this.#lastCpu = this.#cpuNow();
    const due = [...this.#timers].filter((t) => t.at <= this.#now).sort((a, b) => a.at - b.at);
    for (const t of due) {
      this.#timers.delete(t);
      t.fn();
    }
  }

  timer(ms: number, fn: () => void): () => void {
    const t = { at: this.now() + Math.max(0, ms), fn };
    this.#timers.add(t);
    return () => this.#timers.delete(t);
  }

  /** Calls `fn` every `ms` until the returned function is called. */
  every(ms: number, fn: () => void): () => void {
    let cancel = (): void => {};
    const again = (): void => {
      cancel = this.timer(ms, again);
      fn();
    };
    cancel = this.timer(ms, again);
    return () => cancel();
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      // A pending sleep keeps the process alive, as a setTimeout would.
      if (this.#sleepers++ === 0) this.#ticker.ref();
      let settled = false;
      const done = (): void => {
        if (settled) return;
        settled = true;
        cancel();
        signal?.removeEventListener("abort", done);
        if (--this.#sleepers === 0) this.#ticker.unref();
        resolve();
      };
      const cancel = this.timer(ms, done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** Stops the ticker; pending timers never fire. */
  stop(): void {
    clearInterval(this.#ticker);
    this.#timers.clear();
  }
}
