/**
 * The one place the handoff ledger (`src/proxy/handoff/ledger/`) meets time and
 * I/O: it reads the clock once per event, steps the ledger, keeps the one
 * wake-up timer the ledger asks for, and hands every other effect to the
 * proxy to carry out.
 *
 * Events raised while effects are being carried out (a narrowed watch's
 * confirmation, an ownership change made by `markApplied`'s listener) are
 * queued and stepped after the current effects, in order, so a step never
 * runs inside another and every step sees the ledger its predecessor left.
 * An event may be given as a function, built when its turn comes: a range
 * change's facts about the streams must be of the moment it is stepped.
 *
 * The ledger's shell (`LedgerShell`). Tests drive the pure ledger the same
 * way without time or I/O (test/proxy/support/ledger-driver.ts).
 */
import type { Clock } from "../../clock.ts";
import type { Logger } from "../../log.ts";
import { step } from "./ledger/ledger.ts";
import { NO_FACTS, type Ledger, type LedgerEffect, type LedgerEvent, type LedgerPolicy, type StepResult } from "./ledger/types.ts";

/** What the proxy needs of a clock: the time, and timers that do not keep the process alive. */
export type ProxyClock = Pick<Clock, "now" | "timer">;

export class LedgerShell {
  #ledger: Ledger;
  readonly #policy: LedgerPolicy;
  readonly #clock: ProxyClock;
  readonly #execute: (fx: LedgerEffect) => void;
  readonly #logger: Logger;
  readonly #queue: Array<LedgerEvent | (() => LedgerEvent)> = [];
  #draining = false;
  #cancelWake: (() => void) | undefined;

  constructor(o: { ledger: Ledger; policy: LedgerPolicy; clock: ProxyClock; logger: Logger; execute: (fx: LedgerEffect) => void }) {
    this.#ledger = o.ledger;
    this.#policy = o.policy;
    this.#clock = o.clock;
    this.#logger = o.logger;
    this.#execute = o.execute;
  }

  /** The ledger as of the last step (read-only: only `dispatch` moves it). */
  get ledger(): Ledger {
    return this.#ledger;
  }

  dispatch(event: LedgerEvent | (() => LedgerEvent)): void {
    this.#queue.push(event);
    if (this.#draining) return;
    this.#draining = true;
    try {
      for (let next = this.#queue.shift(); next !== undefined; next = this.#queue.shift()) {
        const r = this.#step(next);
        if (r === undefined) continue;
        this.#ledger = r.ledger;
        for (const fx of r.effects) this.#carryOut(fx);
      }
    } finally {
      this.#draining = false;
    }
  }

  /**
   * Steps one event, never throwing into the I/O callback that raised it
   * (the events queued after it would wait for the next dispatch). A range
   * change whose facts cannot be used is stepped again with none: every
   * lineage relists rather than narrows, and the ranges are not lost.
   */
  #step(next: LedgerEvent | (() => LedgerEvent)): StepResult | undefined {
    const now = this.#clock.now();
    let e: LedgerEvent | undefined;
    try {
      e = typeof next === "function" ? next() : next;
      return step(this.#ledger, e, now, this.#policy);
    } catch (err) {
      this.#logger.error({ err: err instanceof Error ? err.message : String(err), event: e?.type ?? "unbuilt" }, "stepping the ledger failed");
    }
    if (e?.type !== "ranges" || e.facts === NO_FACTS) return undefined;
    try {
      return step(this.#ledger, { ...e, facts: NO_FACTS }, now, this.#policy);
    } catch (err) {
      this.#logger.error({ err: err instanceof Error ? err.message : String(err), event: "ranges" }, "stepping a range change without facts failed too");
      return undefined;
    }
  }

  #carryOut(fx: LedgerEffect): void {
    if (fx.type === "wake") {
      this.#cancelWake?.();
      this.#cancelWake = fx.at === undefined ? undefined : this.#clock.timer(Math.max(0, fx.at - this.#clock.now()), () => this.dispatch({ type: "tick" }));
      return;
    }
    try {
      this.#execute(fx);
    } catch (err) {
      // One failed effect (an I/O bug) must not cost the effects after it:
      // a lost `applied` stalls the ring, a lost 410 leaves a stale cache.
      this.#logger.error({ err: err instanceof Error ? err.message : String(err), effect: fx.type }, "carrying out a ledger effect failed");
      // A narrowing waits for every watch's confirmation, with no timer: one
      // not carried out is refused, so those watches relist. The ledger
      // ignores the confirmation of a watch that already gave its own.
      if (fx.type === "narrow") for (const rid of fx.rids) this.dispatch({ type: "narrowed", rid, ok: false, rv: undefined });
    }
  }
}
