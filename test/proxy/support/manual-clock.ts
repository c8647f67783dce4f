/**
 * A clock that moves only when a test says so, for the proxy's handoff
 * shell (`ShardProxyOptions.clock`): the ledger's bounds (quiet caches, the
 * wait for ranges, the restart window) pass in no time and exactly, so no
 * test sleeps against them.
 */
import type { ProxyClock } from "../../../src/proxy/handoff/ledger-driver.ts";

export class ManualClock implements ProxyClock {
  #now: number;
  #timers: Array<{ at: number; seq: number; fn: () => void }> = [];
  #seq = 0;

  constructor(start = 1_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  timer(ms: number, fn: () => void): () => void {
    const t = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn };
    this.#timers.push(t);
    return () => {
      this.#timers = this.#timers.filter((x) => x !== t);
    };
  }

  /** Moves time forward by `ms`, running every timer that falls due, in order, at its time. */
  advance(ms: number): void {
    const until = this.#now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.at <= until).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (due === undefined) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.#now = Math.max(this.#now, due.at);
      due.fn();
    }
    this.#now = until;
  }

  /** Timers not yet run. */
  get pending(): number {
    return this.#timers.length;
  }
}
