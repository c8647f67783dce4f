/**
 * Drives the pure handoff ledger (src/proxy/handoff/ledger/) as the proxy's shell
 * does, with no I/O and no real time: events are stepped in order, each
 * `narrow` effect is confirmed with a `narrowed` event right after the
 * step's other effects (as the shell's queue does), and time passes only by
 * `advance`, which fires a `tick` exactly at each wake the ledger asked for
 * (so a bound that was never scheduled never fires: that is a stall).
 */
import { initialLedger, openWatchesOf, step } from "../../../src/proxy/handoff/ledger/ledger.ts";
import { DEFAULT_POLICY, type Ledger, type LedgerEffect, type LedgerEvent, type LedgerPolicy, type NarrowFacts, type Rid } from "../../../src/proxy/handoff/ledger/types.ts";
import { FULL_RANGE, shardRange, type Range } from "../../../src/shard/range.ts";

export const T0 = 1_000_000;
export const FULL = [FULL_RANGE];
export const LOW = [shardRange(0, 2)];
export const HIGH = [shardRange(1, 2)];
export const QUARTER = [shardRange(0, 4)];
/** Lineage keys: L is "the informer's query", M another one (other selectors). */
export const L = "L";
export const M = "M";

export const RING: LedgerPolicy = { ...DEFAULT_POLICY, ring: true, syntheticDeletes: true };

export interface Start {
  readonly generation: number;
  readonly ranges: readonly Range[];
  readonly waitForRangesMs?: number;
}

export interface FactsSketch {
  /** Lineages whose index is not trusted (default: every lineage the ledger knows is). */
  readonly untrusted?: readonly string[];
  /** Watches not between events (default: every open watch whose client resourceVersion is known narrows). */
  readonly stuck?: readonly Rid[];
}

export class Drive {
  ledger: Ledger;
  now = T0;
  readonly policy: LedgerPolicy;
  /** Generations reported applied, in order. */
  readonly applied: number[] = [];
  /** Every step, in order. */
  readonly history: Array<{ readonly event: LedgerEvent; readonly now: number; readonly effects: readonly LedgerEffect[] }> = [];
  /** Effect types that named each request, in order. */
  readonly verdicts = new Map<Rid, string[]>();
  /** The client's newest resourceVersion on each watch, as the shell's sink would know it. */
  readonly clientRv = new Map<Rid, string>();
  /** Watches whose stream will refuse a narrowing (the shell's `narrow` returns undefined). */
  readonly refuseNarrow = new Set<Rid>();
  /** Called after every step with its event and effects (the property test checks invariants here). */
  onStep: ((event: LedgerEvent, effects: readonly LedgerEffect[]) => void) | undefined;
  readonly #queue: LedgerEvent[] = [];
  #draining = false;

  readonly #step: typeof step;

  /** `stepFn`: the ledger's step (a test may wrap it to show a check catches a broken ledger). */
  constructor(policy: LedgerPolicy = RING, start: Start = { generation: 1, ranges: FULL }, stepFn: typeof step = step) {
    this.policy = policy;
    this.#step = stepFn;
    this.ledger = initialLedger({ generation: start.generation, ranges: start.ranges, now: this.now, waitForRangesMs: start.waitForRangesMs ?? 0, seed: 42, policy });
    this.step({ type: "tick" });
  }

  step(e: LedgerEvent): void {
    this.#queue.push(e);
    if (this.#draining) return;
    this.#draining = true;
    try {
      for (let next = this.#queue.shift(); next !== undefined; next = this.#queue.shift()) {
        const r = this.#step(this.ledger, next, this.now, this.policy);
        this.ledger = r.ledger;
        this.history.push({ event: next, now: this.now, effects: r.effects });
        for (const fx of r.effects) this.#record(fx);
        this.onStep?.(next, r.effects);
      }
    } finally {
      this.#draining = false;
    }
  }

  #record(fx: LedgerEffect): void {
    if (fx.type === "applied") this.applied.push(fx.generation);
    if ("rid" in fx) this.verdicts.set(fx.rid, [...(this.verdicts.get(fx.rid) ?? []), fx.type]);
    if (fx.type === "narrow") {
      for (const rid of fx.rids) {
        this.verdicts.set(rid, [...(this.verdicts.get(rid) ?? []), "narrow"]);
        const ok = !this.refuseNarrow.has(rid);
        this.step({ type: "narrowed", rid, ok, rv: ok ? this.clientRv.get(rid) : undefined });
      }
    }
  }

  /** What the shell would report about its streams right now. */
  facts(s: FactsSketch = {}): NarrowFacts {
    const trusted = new Set([...this.ledger.lineages.keys()].filter((key) => !(s.untrusted ?? []).includes(key)));
    const narrowable = new Set<Rid>();
    for (const r of this.ledger.requests.values()) {
      if (r.phase !== "open") continue;
      // The filters refuse while a watch-list replays its initial events.
      if (!(s.stuck ?? []).includes(r.rid) && this.clientRv.has(r.rid) && !r.replaying) narrowable.add(r.rid);
    }
    return { trusted, narrowable };
  }

  ranges(generation: number, ranges: readonly Range[], facts: FactsSketch = {}): this {
    this.step({ type: "ranges", generation, ranges, facts: this.facts(facts) });
    return this;
  }

  list(rid: Rid, lineage = L, o: { page?: boolean; answerable?: boolean } = {}): this {
    this.step({ type: "request", rid, lineage, kind: "list", watchList: false, page: o.page ?? false, resumeRv: undefined, answerable: o.answerable ?? true });
    return this;
  }

  /** The LIST was delivered whole at `rv`. */
  listed(rid: Rid, rv: string | undefined): this {
    this.step({ type: "list-done", rid, ok: true, rv });
    return this;
  }

  /** The LIST's body was cut. */
  cut(rid: Rid): this {
    this.step({ type: "list-done", rid, ok: false, rv: undefined });
    return this;
  }

  /** A WATCH: resuming `from` a resourceVersion, a watch-list, or from "now" (neither). */
  watch(rid: Rid, lineage = L, o: { from?: string; watchList?: boolean; answerable?: boolean } = {}): this {
    if (o.from !== undefined) this.clientRv.set(rid, o.from);
    this.step({ type: "request", rid, lineage, kind: "watch", watchList: o.watchList ?? false, page: false, resumeRv: o.from, answerable: o.answerable ?? true });
    return this;
  }

  /** Upstream answered the WATCH. */
  served(rid: Rid): this {
    this.step({ type: "watch-response", rid });
    return this;
  }

  /** The watch delivered an event (or a bookmark) at `rv`. */
  event(rid: Rid, rv: string): this {
    this.clientRv.set(rid, rv);
    return this;
  }

  initialEnd(rid: Rid, rv: string): this {
    this.clientRv.set(rid, rv);
    this.step({ type: "initial-events-end", rid });
    return this;
  }

  /** The watch's stream ended: by the proxy's 410 when it ordered one (the default), else by the client or server. */
  ended(rid: Rid, o: { byProxy?: boolean } = {}): this {
    const ordered = (this.verdicts.get(rid) ?? []).includes("end-watch");
    this.step({ type: "watch-ended", rid, rv: this.clientRv.get(rid), byProxy: o.byProxy ?? ordered });
    return this;
  }

  closed(rid: Rid): this {
    this.step({ type: "closed", rid });
    return this;
  }

  /** Time passes: a tick at every wake the ledger asked for up to `ms` from now. */
  advance(ms: number): this {
    const until = this.now + ms;
    for (let at = this.ledger.wakeAt; at !== undefined && at <= until; at = this.ledger.wakeAt) {
      this.now = Math.max(this.now, at);
      this.step({ type: "tick" });
    }
    this.now = until;
    return this;
  }

  /** The last effect that named `rid`. */
  verdict(rid: Rid): string | undefined {
    return this.verdicts.get(rid)?.at(-1);
  }

  openWatches(lineage = L): number {
    return openWatchesOf(this.ledger, lineage);
  }

  /** LIST at `rv` and WATCH resuming from it, served: an informer in sync. */
  informer(list: Rid, watch: Rid, rv: string, lineage = L): this {
    return this.list(list, lineage).listed(list, rv).watch(watch, lineage, { from: rv }).served(watch);
  }
}
