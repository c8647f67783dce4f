/**
 * Random interleavings of everything the proxy's handoff ledger observes:
 * LISTs (whole, cut, abandoned), WATCHes (resumes, watch-lists, re-watches
 * racing the end of the previous watch, server timeouts, aborts), range
 * changes (grow, shrink, mixed, the same ranges under a new generation),
 * held first requests, caches that reconnect after a restart, clients that
 * go away, jittered 410s, refused narrowings, and time passing.
 *
 * A model of the controller caches, kept apart from the ledger, records what
 * each cache holds (the ranges its contents were filtered with) and where it
 * would resume; after every step the invariants below are checked against
 * it. Seeded and reproducible: a failure prints its seed; PROPERTY_SEED=<n>
 * replays one run (PROPERTY_TRACE=1 prints every step), PROPERTY_RUNS,
 * PROPERTY_STEPS and PROPERTY_BASE explore more.
 *
 * Invariants (src/proxy/handoff/ledger/ledger.ts):
 * - I1+I2 (the brief's): no generation is reported applied while a cache of
 *   older ranges can still resume without a 410, or still has a watch open
 *   that the proxy did not end;
 * - I2 at admission: a resume is sent upstream only for a cache whose
 *   contents are of the ranges it is sent with (inside the restart window:
 *   never for a cache this proxy did not build), or, sent to be narrowed
 *   once served (a narrowing deferred to it), whose contents hold them all;
 * - a watch is served only under the current ranges, and a resume sent to
 *   be narrowed is narrowed in the step that serves it;
 * - I3: a watch is narrowed only to ranges inside what its cache holds;
 * - I1: `applied` names the current generation, once per generation;
 * - applied means rebuilt: at the first `applied` after a range change,
 *   every cache that was relisting, watching, held, or active within its
 *   quiet bound at the change holds the new ranges, or is neither relisting
 *   nor watching and (if it has watched, or holds a LIST it may still be
 *   reading) has been quiet for watcherQuietMs (or was released by the 2x
 *   bound);
 * - I8: after everyone goes quiet and time passes, the generation is
 *   reported applied (nothing stalls without a wake).
 *
 * Several caches of one lineage (two informers with the same query) cannot
 * be told apart by the proxy: for those the checks are the weaker "some
 * cache of the lineage is at that point with those ranges" (docs/rings.md,
 * "Limits").
 */
import t from "tap";
import { step } from "../../../src/proxy/handoff/ledger/ledger.ts";
import type { LedgerEffect, LedgerEvent, Rid } from "../../../src/proxy/handoff/ledger/types.ts";
import { difference, equal, normalize, shardRange, type Range } from "../../../src/shard/range.ts";
import { rng } from "../../support/rng.ts";
import { Drive, FULL, HIGH, LOW, QUARTER, RING, T0 } from "../support/ledger-driver.ts";

/** PROPERTY_TRACE=1 (with PROPERTY_SEED): print every step, for replaying a failure. */
const TRACE = process.env["PROPERTY_TRACE"] === "1";

const RANGE_SETS: ReadonlyArray<readonly Range[]> = [FULL, LOW, HIGH, QUARTER, normalize([shardRange(1, 4), shardRange(2, 4)]), []];

type Kind = "informer" | "watchlist" | "oneoff";
type Phase = "idle" | "held" | "listing" | "between" | "watch-sent" | "watching" | "told" | "gone";

interface Cache {
  readonly id: number;
  readonly lineage: string;
  readonly kind: Kind;
  phase: Phase;
  rid: Rid | undefined;
  /** Ranges the cache's contents were filtered with; "unknown" for one built through a previous proxy process. */
  content: readonly Range[] | "unknown" | undefined;
  /** Where it resumes from. */
  rv: string | undefined;
  /** The ranges its request was sent (its watch filters) with. */
  sentRanges: readonly Range[] | undefined;
  /** A watch-list whose initial events are not through yet. */
  replaying: boolean;
  watched: boolean;
  lastActivity: number;
  /** The proxy ordered its open watch ended (the 410 may still be on its way). */
  endOrdered: boolean;
  /** Watches it abandoned whose end the proxy has not seen yet. */
  readonly abandoned: Set<Rid>;
  /** Where an abandoned watch of it was narrowed before the proxy saw it go (review4 Q4): a resume from there is the known exposure. */
  q4rv: string | undefined;
  /** The range change (world epoch) at which it was listing or watching: it must rebuild before that change is reported. */
  mark: number | undefined;
  /**
   * A known limit hit it, and it is out of the checks until it rebuilds
   * (docs/rings.md, "Limits"): its abandoned watch was narrowed before the
   * proxy saw it go, so it never read the DELETEDs and resumes from the
   * resourceVersion they carried (review4 Q4); or, its lineage shared with
   * another cache at the same resourceVersion, its resume was taken for
   * that cache's.
   */
  limit: boolean;
}

/**
 * A cache that may come back as late as watcherQuietMs: a reflector, or one
 * holding a LIST (an informer may still be reading it, and resumes from it
 * when done). Not rebuilt and active within that bound, it holds a
 * generation back.
 */
function comesBackLate(c: Cache): boolean {
  return c.watched || c.content !== undefined;
}

class World {
  readonly d: Drive;
  readonly rand: () => number;
  readonly caches: Cache[] = [];
  readonly byRid = new Map<Rid, Cache>();
  readonly kindOf = new Map<Rid, "list" | "watch">();
  /** watch-ended events the shell still owes the ledger: the proxy's 410s (at their jitter), and watches abandoned by a re-watch. */
  readonly pendingEnds: Array<{ rid: Rid; at: number; byProxy: boolean }> = [];
  readonly trail: string[] = [];
  readonly violations: string[] = [];
  /** Resumes not admitted yet (a held one is admitted at the first ranges), with what their cache held when it asked. */
  readonly resumes = new Map<Rid, { cache: Cache; rv: string; content: Cache["content"] }>();
  readonly #pendingNarrow = new Map<Rid, readonly Range[]>();
  /** Resumes of a cache of older ranges sent to be narrowed once served (a narrowing deferred to them). */
  readonly #narrowOnServe = new Set<Rid>();
  /** Where the proxy left each cache (lineage, resourceVersion, ranges): the points it cannot tell apart. */
  readonly #placed = new Map<string, Set<number>>();

  #place(c: Cache, rv: string | undefined, ranges: Cache["content"]): void {
    if (rv === undefined || ranges === undefined || ranges === "unknown") return;
    const k = `${c.lineage}|${rv}|${JSON.stringify(ranges.map((x) => [String(x.start), String(x.end)]))}`;
    this.#placed.set(k, (this.#placed.get(k) ?? new Set()).add(c.id));
  }

  /** Another cache of `c`'s lineage was left at `rv` with `ranges`: the proxy may take `c` for it. */
  #alibi(c: Cache, rv: string, ranges: readonly Range[]): boolean {
    if (this.single(c)) return false;
    const k = `${c.lineage}|${rv}|${JSON.stringify(ranges.map((x) => [String(x.start), String(x.end)]))}`;
    return [...(this.#placed.get(k) ?? [])].some((id) => id !== c.id);
  }
  generation: number;
  ranges: readonly Range[];
  rv = 100;
  nextRid = 1;
  readonly applied: number[] = [];
  readonly shared: boolean;
  readonly restart: boolean;
  /** Moves when the ranges differ (the model's own count, not the ledger's). */
  epoch = 0;
  /** The change whose first `applied` was checked for rebuilt caches. */
  checkedEpoch = 0;
  /** Lineages let go by the 2x quiet bound since the last change. */
  readonly released2x = new Set<string>();

  readonly trace: boolean;

  constructor(seed: number, stepFn: typeof step = step, trace = false) {
    this.trace = trace;
    this.rand = rng(seed);
    this.shared = this.rand() < 0.4;
    this.restart = this.rand() < 0.3;
    const jitter = this.rand() < 0.3 ? 1 + Math.floor(this.rand() * 3000) : 0;
    const policy = { ...RING, relistJitterMs: jitter, syntheticDeletes: this.rand() < 0.8 };
    this.generation = this.restart ? 0 : 1;
    this.ranges = this.restart ? [] : FULL;
    this.d = new Drive(policy, { generation: this.generation, ranges: this.ranges, waitForRangesMs: this.restart ? 30_000 : 0 }, stepFn);
    const n = 2 + Math.floor(this.rand() * 3);
    for (let i = 0; i < n; i++) {
      const kind: Kind = this.shared && this.rand() < 0.3 ? "oneoff" : this.rand() < 0.3 ? "watchlist" : "informer";
      const lineage = this.shared ? (this.rand() < 0.5 ? "A" : "B") : `L${i}`;
      // After a restart, some caches were built through the previous process.
      const stranger = this.restart && kind === "informer" && this.rand() < 0.5;
      this.caches.push({
        id: i,
        lineage,
        kind,
        phase: stranger ? "between" : "idle",
        rid: undefined,
        content: stranger ? "unknown" : undefined,
        rv: stranger ? String(50 + i) : undefined,
        sentRanges: undefined,
        replaying: false,
        watched: false,
        // Never active yet: a cache that made no request is not relisting.
        lastActivity: Number.NEGATIVE_INFINITY,
        endOrdered: false,
        mark: undefined,
        limit: false,
        abandoned: new Set(),
        q4rv: undefined,
      });
    }
    this.d.onStep = (e, fx) => this.#observe(e, fx);
  }

  /** Caches sharing a lineage with another (one-off listers included) are indistinguishable to the proxy. */
  single(c: Cache): boolean {
    return this.caches.filter((x) => x.lineage === c.lineage).length === 1;
  }

  violate(what: string): void {
    this.violations.push(`${what} (after: ${this.trail.at(-1) ?? "start"})`);
  }

  #stale(c: Cache): boolean {
    return c.content === "unknown" || (c.content !== undefined && !equal(c.content, this.ranges));
  }

  // -- the ledger's effects, as the shell and the clients see them

  #observe(e: LedgerEvent, effects: readonly LedgerEffect[]): void {
    if (this.trace) {
      const l = this.d.ledger;
      const fx = effects.filter((x) => x.type !== "log").map((x) => ("rid" in x ? `${x.type}(${x.rid})` : x.type === "applied" ? `applied(${x.generation})` : x.type));
      const show = (r: Cache["content"]): string => (r === undefined ? "-" : r === "unknown" ? "?" : r.map((x) => `${Number((x.start * 100n) >> 64n)}-${Number((x.end * 100n) >> 64n)}%`).join("+"));
      const caches = this.caches.map((c) => `${c.id}:${c.phase}@${c.rv ?? "-"}[${show(c.content)}]`).join(" ");
      console.log(`${this.trail.at(-1) ?? ""}\n  ${this.d.now - T0} ${e.type}${"rid" in e ? `(${e.rid})` : ""} -> [${fx.join(" ")}] epoch=${l.epoch} owed=[${[...l.owed.keys()].join(",")}] released=[${[...l.released.keys()].join(",")}] awaiting=${l.awaiting} | ${caches}`);
    }
    // The DELETEDs reached the stream before the ledger heard back.
    if (e.type === "narrowed") this.#narrowed(e.rid, e.ok);
    for (const fx of effects) this.#effect(e, fx);
    this.#checkNarrowedOnServe(effects);
    this.#checkStanding();
  }

  #effect(e: LedgerEvent, fx: LedgerEffect): void {
    const c = "rid" in fx ? this.byRid.get(fx.rid) : undefined;
    const current = c !== undefined && "rid" in fx && c.rid === fx.rid;
    switch (fx.type) {
      case "hold":
        if (current) c.phase = "held";
        return;
      case "send": {
        const r = this.resumes.get(fx.rid);
        this.resumes.delete(fx.rid);
        if (!current) return;
        // A WATCH that reached the proxy's lineages (a held one its client gave up on never did).
        if (this.kindOf.get(fx.rid) === "watch") c.watched = true;
        c.lastActivity = this.d.now;
        c.sentRanges = fx.ranges;
        if (c.phase === "held") c.phase = this.kindOf.get(fx.rid) === "list" ? "listing" : "watch-sent";
        const sent = this.d.ledger.requests.get(fx.rid);
        const narrowing = sent?.phase === "sent" && sent.narrowFrom !== undefined;
        if (narrowing) this.#narrowOnServe.add(fx.rid);
        if (r !== undefined) this.#checkAdmittedResume(c, r.rv, r.content, fx.ranges, narrowing);
        return;
      }
      case "refuse-resume":
      case "expire-watch":
        this.resumes.delete(fx.rid);
        if (!current) return;
        c.watched = true;
        c.lastActivity = this.d.now;
        c.phase = "told";
        c.rid = undefined;
        return;
      case "serve-watch":
        if (!current) return;
        c.lastActivity = this.d.now;
        if (!equal(c.sentRanges ?? [], this.ranges)) this.violate(`watch ${fx.rid} served with other ranges than the current ones`);
        c.phase = "watching";
        c.replaying = this.d.ledger.requests.get(fx.rid)?.watchList === true;
        return;
      case "end-watch":
        if (!current) return;
        c.endOrdered = true;
        this.pendingEnds.push({ rid: fx.rid, at: this.d.now + fx.delayMs, byProxy: true });
        return;
      case "narrow":
        for (const rid of fx.rids) this.#pendingNarrow.set(rid, fx.ranges);
        return;
      case "log":
        if (fx.msg.startsWith("released") && Number(fx.fields["owedMs"]) >= 2 * this.d.policy.watcherQuietMs) this.released2x.add(String(fx.fields["lineage"]));
        return;
      case "applied":
        if (fx.generation !== this.generation) this.violate(`applied ${fx.generation} while the current generation is ${this.generation}`);
        if (this.applied.at(-1) === fx.generation) this.violate(`generation ${fx.generation} reported applied twice`);
        this.applied.push(fx.generation);
        this.#checkRebuilt(e);
        return;
      default:
        return;
    }
  }

  #narrowed(rid: Rid, ok: boolean): void {
    const ranges = this.#pendingNarrow.get(rid);
    this.#pendingNarrow.delete(rid);
    const c = this.byRid.get(rid);
    if (!ok || ranges === undefined || c === undefined) return;
    if (c.rid !== rid) {
      // The proxy left a cache there, as far as it can know; this one never read it.
      this.#place(c, this.d.clientRv.get(rid), ranges);
      // A resume of it from exactly there takes that point without the DELETEDs read (review4 Q4).
      if (c.abandoned.has(rid)) c.q4rv = this.d.clientRv.get(rid);
      return;
    }
    // I3: DELETEDs only remove; the cache must not miss anything of the new ranges.
    if (!c.limit && (c.content === "unknown" || c.content === undefined || difference(ranges, c.content).length > 0)) this.violate(`watch ${rid} narrowed to ranges its cache does not hold`);
    if (c.replaying) this.violate(`watch ${rid} narrowed while replaying its initial events`);
    c.content = ranges;
    c.sentRanges = ranges;
    this.#place(c, c.rv, c.content);
  }

  /** I3, deferred: a resume sent to be narrowed is narrowed in the step that serves it, before any event reaches it. */
  #checkNarrowedOnServe(effects: readonly LedgerEffect[]): void {
    for (const fx of effects) {
      if (fx.type !== "serve-watch" || !this.#narrowOnServe.delete(fx.rid)) continue;
      if (!effects.some((x) => x.type === "narrow" && x.rids.includes(fx.rid))) this.violate(`watch ${fx.rid}, a resume of older ranges, served without its narrowing`);
    }
  }

  /**
   * I2 at admission: the cache a resume continues is of the ranges it is
   * sent with; or (`narrowing`: a narrowing deferred to it, I3) holds them
   * all, so that DELETEDs make it theirs.
   */
  #checkAdmittedResume(c: Cache, rv: string, content: Cache["content"], ranges: readonly Range[], narrowing: boolean): void {
    if (c.limit) return;
    if (narrowing && content !== undefined && content !== "unknown" && c.q4rv !== rv) {
      if (difference(ranges, content).length === 0) return;
      if (!this.single(c)) c.limit = true;
      else this.violate(`cache ${c.id} resumed from ${rv} to be narrowed to ranges it does not hold`);
      return;
    }
    if (c.q4rv !== undefined && c.q4rv === rv) {
      c.limit = true;
      return;
    }
    if (content === "unknown") {
      const l = this.d.ledger;
      if (l.refuseUnplacedUntil === 0 || this.d.now < l.refuseUnplacedUntil) this.violate(`cache ${c.id}, built through a previous proxy, resumed inside the restart window`);
      // After the window, once per lineage (a GET-then-WATCH client must not be refused forever).
      c.limit = true;
      return;
    }
    if (content !== undefined && equal(content, ranges)) return;
    // Indistinguishable caches: the proxy may have taken it for another cache of the lineage at that point.
    if (!this.#alibi(c, rv, ranges)) this.violate(`cache ${c.id} resumed from ${rv}, its contents of other ranges than it is sent with`);
    // Taken for the other cache: it carries that mistake until it rebuilds (docs/rings.md, "Limits").
    else c.limit = true;
  }

  /** What a resume from `rv` would get right now: a pure probe, the ledger is not changed. */
  #probe(lineage: string, rv: string): string | undefined {
    const rid = 1e9;
    const r = step(this.d.ledger, { type: "request", rid, lineage, kind: "watch", watchList: false, page: false, resumeRv: rv, answerable: true }, this.d.now, this.d.policy);
    const sent = r.ledger.requests.get(rid);
    // Sent to be narrowed once served (checked when it is, above): not a resume that goes on stale.
    if (sent?.phase === "sent" && sent.narrowFrom !== undefined) return "send-to-narrow";
    return r.effects.find((fx) => "rid" in fx && fx.rid === rid)?.type;
  }

  /** I1+I2: while the current generation stands reported applied, no cache of older ranges goes on without a 410. */
  #checkStanding(): void {
    if (this.applied.at(-1) !== this.generation || this.d.ledger.awaiting) return;
    for (const c of this.caches) {
      if (c.kind === "oneoff" || c.phase === "gone" || c.phase === "told" || c.limit || !this.#stale(c)) continue;
      // Its DELETEDs are on the stream; the ledger hears back next.
      if (c.rid !== undefined && this.#pendingNarrow.has(c.rid)) continue;
      // A watch-list replaying under the current ranges is a relist in progress.
      const relisting = c.phase === "watching" && c.replaying && equal(c.sentRanges ?? [], this.ranges);
      if (c.phase === "watching" && !c.endOrdered && !relisting) this.violate(`generation ${this.generation} applied while cache ${c.id} watches with older ranges`);
      // Only a cache between a LIST (or a watch the server ended) and its WATCH resumes; after a 410 or a failed LIST a reflector lists again.
      if (c.phase === "between" && c.rv !== undefined && c.content !== "unknown" && c.q4rv !== c.rv) {
        if (!this.#alibi(c, c.rv, this.ranges) && this.#probe(c.lineage, c.rv) === "send") this.violate(`generation ${this.generation} applied while cache ${c.id} (older ranges) can resume from ${c.rv} without a 410`);
      }
    }
  }

  /**
   * Applied means rebuilt, at the first `applied` after a range change: a
   * cache that was listing or watching at the change (the ones the ledger
   * must wait for) and still holds older ranges is neither listing nor
   * watching, and one that has watched has been quiet for watcherQuietMs
   * (or its lineage was let go by the 2x bound). Caches the proxy can tell
   * apart only; held requests are exempt (docs/rings.md, "Limits").
   */
  #checkRebuilt(e: LedgerEvent): void {
    if (this.checkedEpoch === this.epoch) return;
    this.checkedEpoch = this.epoch;
    for (const c of this.caches) {
      // Not rebuilt: contents of older ranges, or none yet (a member must not report ready with an empty cache).
      const rebuilt = c.content !== undefined && c.content !== "unknown" && equal(c.content, this.ranges);
      if (c.mark !== this.epoch || c.kind === "oneoff" || c.phase === "gone" || c.phase === "held" || c.limit || !this.single(c) || rebuilt) continue;
      if (c.phase === "listing" || c.phase === "watch-sent" || c.phase === "watching") {
        this.violate(`generation ${this.generation} applied (on ${e.type}) while cache ${c.id}, not rebuilt, is ${c.phase}`);
      } else if (comesBackLate(c) && this.d.now - c.lastActivity < this.d.policy.watcherQuietMs && !this.released2x.has(c.lineage)) {
        this.violate(`generation ${this.generation} applied (on ${e.type}) while cache ${c.id}, not rebuilt, ${c.watched ? "a reflector" : "holding a LIST of older ranges"} (${c.phase}), was active ${this.d.now - c.lastActivity} ms ago`);
      }
    }
  }

  // -- the world's moves

  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.rand() * xs.length)] as T;
  }

  move(): void {
    const r = this.rand();
    if (r < 0.07) return this.#changeRanges();
    if (r < 0.15) return this.#passTime();
    if (r < 0.3 && this.pendingEnds.length > 0) return this.#deliverEnd();
    if (r < 0.33) this.rv++; // a write somewhere
    this.#act(this.pick(this.caches));
  }

  #changeRanges(): void {
    const same = this.rand() < 0.25;
    const next = same ? this.ranges : this.pick(RANGE_SETS);
    this.generation++;
    if (!equal(next, this.ranges)) {
      this.epoch++;
      this.released2x.clear();
      // The caches the ledger must wait for (I4): relisting or watching now,
      // held for these ranges, or active within their quiet bound.
      for (const c of this.caches) {
        const bound = comesBackLate(c) ? this.d.policy.watcherQuietMs : this.d.policy.betweenListAndWatchMs;
        const busy = c.phase === "listing" || c.phase === "watch-sent" || c.phase === "watching" || c.phase === "held";
        if (c.phase !== "gone" && (busy || this.d.now - c.lastActivity < bound)) c.mark = this.epoch;
      }
    }
    this.ranges = next;
    const stuck = [...this.byRid.keys()].filter(() => this.rand() < 0.1);
    const untrusted = [...new Set(this.caches.map((c) => c.lineage))].filter(() => this.rand() < 0.1);
    for (const rid of this.byRid.keys()) if (this.rand() < 0.05) this.d.refuseNarrow.add(rid);
    this.trail.push(`ranges g${this.generation} ${same ? "(same)" : JSON.stringify(next.map((x) => [String(x.start), String(x.end)]))}`);
    this.d.ranges(this.generation, next, { stuck, untrusted });
  }

  #passTime(): void {
    // A closed connection is seen within the turn: no time passes first.
    this.#endDue(this.d.now, false);
    const ms = this.rand() < 0.7 ? Math.floor(this.rand() * 3000) : Math.floor(this.rand() * 140_000);
    this.trail.push(`advance ${ms}`);
    // The proxy's jittered 410s fire as time passes, and each stream's end follows at once.
    const until = this.d.now + ms;
    for (let p = this.#nextProxyEnd(until); p !== undefined; p = this.#nextProxyEnd(until)) {
      this.d.advance(p.at - this.d.now);
      this.pendingEnds.splice(this.pendingEnds.indexOf(p), 1);
      this.#end(p);
    }
    this.d.advance(until - this.d.now);
  }

  #nextProxyEnd(until: number): { rid: Rid; at: number; byProxy: boolean } | undefined {
    return this.pendingEnds.filter((p) => p.byProxy && p.at <= until).sort((a, b) => a.at - b.at)[0];
  }

  /** Delivers every pending end due by `now` (abandoned ones whatever their time, unless `onlyProxy`). */
  #endDue(now: number, onlyProxy: boolean): void {
    for (const p of this.pendingEnds.filter((x) => (!onlyProxy && !x.byProxy) || (x.byProxy && x.at <= now))) {
      this.pendingEnds.splice(this.pendingEnds.indexOf(p), 1);
      this.#end(p);
    }
  }

  /** A 410 the proxy wrote reaches its client, which will relist. */
  #tellClient(rid: Rid): void {
    const c = this.byRid.get(rid);
    if (c === undefined || c.rid !== rid || c.phase !== "watching") return;
    c.phase = "told";
    c.rid = undefined;
  }

  #deliverEnd(): void {
    const i = this.pendingEnds.findIndex((p) => p.at <= this.d.now || !p.byProxy);
    if (i < 0) return this.#passTime();
    const [p] = this.pendingEnds.splice(i, 1);
    if (p === undefined) return;
    this.#end(p);
  }

  #end(p: { rid: Rid; byProxy: boolean }): void {
    if (p.byProxy) this.#tellClient(p.rid);
    this.byRid.get(p.rid)?.abandoned.delete(p.rid);
    this.trail.push(`watch ${p.rid} ends (byProxy=${p.byProxy})`);
    this.d.ended(p.rid, { byProxy: p.byProxy });
  }

  #request(c: Cache, kind: "list" | "watch", o: { from?: string; watchList?: boolean } = {}): void {
    const rid = this.nextRid++;
    c.rid = rid;
    c.phase = kind === "list" ? "listing" : "watch-sent";
    c.endOrdered = false;
    this.byRid.set(rid, c);
    this.kindOf.set(rid, kind);
    if (o.from !== undefined) this.resumes.set(rid, { cache: c, rv: o.from, content: c.content });
    this.trail.push(`cache ${c.id} (${c.lineage}) ${kind} ${rid}${o.from === undefined ? "" : ` from ${o.from}`}${o.watchList === true ? " watch-list" : ""}`);
    if (kind === "list") this.d.list(rid, c.lineage);
    else this.d.watch(rid, c.lineage, o);
  }

  #act(c: Cache): void {
    // Its abandoned watches' closes reach the proxy before anything else
    // happens to it (a request or a response is a round trip later); other
    // caches' events and range changes may come in between.
    for (const p of this.pendingEnds.filter((x) => !x.byProxy && c.abandoned.has(x.rid))) {
      this.pendingEnds.splice(this.pendingEnds.indexOf(p), 1);
      this.#end(p);
    }
    const r = this.rand();
    switch (c.phase) {
      case "idle":
      case "told":
        return c.kind === "watchlist" ? this.#request(c, "watch", { watchList: true }) : this.#request(c, "list");
      case "held":
        if (r < 0.1 && c.rid !== undefined) {
          this.trail.push(`cache ${c.id} gives up its held request ${c.rid}`);
          const rid = c.rid;
          c.phase = "idle";
          c.rid = undefined;
          this.d.closed(rid);
        }
        return;
      case "listing":
        return this.#listAnswered(c, c.rid as Rid, r);
      case "between":
        if (c.kind === "oneoff") return this.#request(c, "list");
        if (r < 0.1) return this.#goAway(c);
        return this.#request(c, "watch", { from: c.rv as string });
      case "watch-sent": {
        const rid = c.rid as Rid;
        if (r < 0.85) {
          this.trail.push(`upstream answers watch ${rid}`);
          this.d.served(rid);
          return;
        }
        this.trail.push(`client abandons watch ${rid} before its answer`);
        c.rid = undefined;
        c.phase = c.rv === undefined || c.kind === "watchlist" ? "idle" : "between";
        this.d.closed(rid);
        return;
      }
      case "watching":
        return this.#watching(c, c.rid as Rid, r);
      case "gone":
        return;
    }
  }

  #listAnswered(c: Cache, rid: Rid, r: number): void {
    c.rid = undefined;
    c.lastActivity = this.d.now;
    if (r < 0.8) {
      this.trail.push(`list ${rid} delivered at ${this.rv}`);
      c.content = c.sentRanges;
      if (equal(c.sentRanges ?? [], this.ranges)) {
        c.limit = false;
        c.q4rv = undefined;
      }
      c.rv = String(this.rv);
      this.#place(c, c.rv, c.content);
      c.phase = c.kind === "oneoff" ? "idle" : "between";
      this.d.listed(rid, String(this.rv));
    } else if (r < 0.9) {
      this.trail.push(`list ${rid} cut`);
      c.phase = "idle";
      this.d.cut(rid);
    } else {
      this.trail.push(`list ${rid} abandoned by its client`);
      c.phase = "idle";
      this.d.closed(rid);
    }
  }

  #watching(c: Cache, rid: Rid, r: number): void {
    if (c.replaying) {
      if (r >= 0.6) return this.#event(c, rid);
      this.trail.push(`watch-list ${rid} initial events end at ${this.rv}`);
      c.replaying = false;
      if (equal(c.sentRanges ?? [], this.ranges)) {
        c.limit = false;
        c.q4rv = undefined;
      }
      c.content = c.sentRanges;
      c.rv = String(this.rv);
      this.#place(c, c.rv, c.content);
      this.d.initialEnd(rid, String(this.rv));
      return;
    }
    if (r < 0.5) return this.#event(c, rid);
    if (r < 0.65) {
      this.trail.push(`server ends watch ${rid}`);
      c.rid = undefined;
      c.phase = "between";
      this.d.ended(rid, { byProxy: false });
      return;
    }
    if (r < 0.85) {
      // The client aborts and re-watches at once, before the proxy sees the old watch end.
      this.trail.push(`client aborts watch ${rid} and re-watches`);
      this.pendingEnds.push({ rid, at: this.d.now, byProxy: false });
      c.abandoned.add(rid);
      return this.#request(c, "watch", { from: c.rv as string });
    }
    if (r < 0.9) return this.#goAway(c);
    if (r < 0.95 && c.kind !== "watchlist" && process.env["PROPERTY_NO_ABANDON_RELIST"] !== "1") {
      // The client abandons its watch and relists at once (a reflector whose
      // watch failed on its side), before the proxy sees the old watch end.
      this.trail.push(`client abandons watch ${rid} and relists`);
      this.pendingEnds.push({ rid, at: this.d.now, byProxy: false });
      c.abandoned.add(rid);
      return this.#request(c, "list");
    }
    return this.#event(c, rid);
  }

  #event(c: Cache, rid: Rid): void {
    this.rv++;
    c.rv = String(this.rv);
    this.#place(c, c.rv, c.content);
    this.trail.push(`watch ${rid} delivers an event at ${this.rv}`);
    this.d.event(rid, String(this.rv));
  }

  #goAway(c: Cache): void {
    this.trail.push(`cache ${c.id} goes away for good`);
    const rid = c.rid;
    c.phase = "gone";
    c.rid = undefined;
    if (rid === undefined) return;
    if (this.d.ledger.requests.get(rid)?.phase === "open") this.d.ended(rid, { byProxy: false });
    else this.d.closed(rid);
  }

  /** Everyone stops, the shell delivers what it owes, and time passes past every bound. */
  quiesce(): void {
    this.trail.push("quiesce");
    for (const c of this.caches) if (c.phase !== "gone") this.#goAway(c);
    for (let p = this.pendingEnds.shift(); p !== undefined; p = this.pendingEnds.shift()) this.#end(p);
    this.d.advance(3 * this.d.policy.watcherQuietMs);
  }
}

function run(seed: number, stepFn: typeof step = step, trace = false): World {
  const w = new World(seed, stepFn, trace);
  for (let i = 0; i < STEPS && w.violations.length === 0; i++) w.move();
  if (w.violations.length > 0) return w;
  w.quiesce();
  // I8: nothing stalls without a wake.
  if (w.generation !== 0 && w.applied.at(-1) !== w.generation) w.violate(`generation ${w.generation} never applied after every client went quiet (applied: ${JSON.stringify(w.applied)})`);
  return w;
}

const RUNS = Number(process.env["PROPERTY_RUNS"] ?? 1000);
const STEPS = Number(process.env["PROPERTY_STEPS"] ?? 160);
/** Seeds are SEED_BASE × 1, × 2, …: another base explores other runs. */
const SEED_BASE = Number(process.env["PROPERTY_BASE"] ?? 7919);
const ONE = process.env["PROPERTY_SEED"];

t.test(`random interleavings keep the ledger's invariants (${ONE === undefined ? `${RUNS} seeded runs` : `seed ${ONE}`}, ${STEPS} moves each)`, async (t) => {
  const seeds = ONE === undefined ? Array.from({ length: RUNS }, (_, i) => SEED_BASE * (i + 1)) : [Number(ONE)];
  const failures: string[] = [];
  for (const seed of seeds) {
    const w = run(seed, step, TRACE);
    if (w.violations.length === 0) continue;
    failures.push(`seed ${seed}: ${w.violations[0]}`);
    t.comment(`seed ${seed} (replay: PROPERTY_SEED=${seed}):\n  ${w.violations[0]}\n  last moves:\n    ${w.trail.slice(-30).join("\n    ")}`);
    if (failures.length >= 3) break;
  }
  t.same(failures, [], "no invariant broken");
});

t.test("the checks catch a ledger that reports every generation applied at once (they can fail)", async (t) => {
  // I1 broken: `applied` right after every range change, whatever is owed.
  const broken: typeof step = (l, e, now, p) => {
    const r = step(l, e, now, p);
    if (e.type !== "ranges" || !r.ledger.awaiting) return r;
    return { ledger: { ...r.ledger, awaiting: false, owed: new Map(), narrowing: new Map() }, effects: [...r.effects, { type: "applied", generation: e.generation }] };
  };
  const caught = Array.from({ length: 40 }, (_, i) => run(7919 * (i + 1), broken)).filter((w) => w.violations.length > 0);
  t.ok(caught.length > 10, `${caught.length} of 40 runs caught it; e.g. ${caught[0]?.violations[0] ?? "none"}`);
});

t.test("the checks catch a ledger that lets a stale resume through (they can fail)", async (t) => {
  // I2 broken: every refused resume is sent instead.
  const broken: typeof step = (l, e, now, p) => {
    const r = step(l, e, now, p);
    if (!r.effects.some((fx) => fx.type === "refuse-resume")) return r;
    const fixed = step({ ...l, epoch: -1 }, e, now, p);
    return { ledger: { ...fixed.ledger, epoch: l.epoch }, effects: fixed.effects };
  };
  const caught = Array.from({ length: 40 }, (_, i) => run(7919 * (i + 1), broken)).filter((w) => w.violations.length > 0);
  t.ok(caught.length > 5, `${caught.length} of 40 runs caught it; e.g. ${caught[0]?.violations[0] ?? "none"}`);
});

t.test("the checks catch a ledger that serves a resume of older ranges without narrowing it (they can fail)", async (t) => {
  // I3 deferred broken: the narrowing ordered with a resume's serve-watch is lost.
  const broken: typeof step = (l, e, now, p) => {
    const r = step(l, e, now, p);
    return e.type === "watch-response" ? { ...r, effects: r.effects.filter((fx) => fx.type !== "narrow") } : r;
  };
  const caught = Array.from({ length: 200 }, (_, i) => run(7919 * (i + 1), broken)).filter((w) => w.violations.length > 0);
  t.ok(caught.length > 5, `${caught.length} of 200 runs caught it; e.g. ${caught[0]?.violations[0] ?? "none"}`);
});
