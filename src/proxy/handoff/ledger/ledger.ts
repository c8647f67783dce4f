/**
 * The proxy's side of a ring handoff as a pure state machine, in the shape
 * of `src/ring/handoff.ts`: `step(ledger, event, now, policy) → { ledger,
 * effects }`. The shell (`src/proxy/handoff/ledger-driver.ts`) reads the clock once
 * per event, steps, and carries the effects out; nothing here reads a
 * clock, sets a timer, draws a random number or does I/O
 * (test/proxy/handoff/ledger-purity.test.ts).
 *
 * The ledger answers: which caches may still hold old ranges (owe a
 * relist), when a generation may be reported applied, which resumes must
 * get 410, when a watch may narrow in place, which requests are held for
 * the first ranges, and when an owed lineage whose client went quiet is let
 * go. Vocabulary: a *lineage* is one cache's view of a resource (path,
 * selectors, `as=`); the *epoch* moves exactly when the enforced ranges
 * change; a *resume point* is where this proxy left a cache, under which
 * epoch (resume.ts).
 *
 * Invariants, each kept by one function (each has rows named after it in
 * test/proxy/handoff/ledger.test.ts; test/proxy/handoff/ledger-property.test.ts checks
 * I1-I3 and I8 against a model of the caches after every random step):
 *
 * I1 Applied means rebuilt (`settle`): `applied(g)` names the current
 *    generation, once, and only when no lineage owes a relist and no
 *    narrowing waits for its confirmation.
 * I2 Stale caches cannot resume (`placeResume` in owing.ts, and
 *    `onWatchResponse`): a WATCH continuing a cache built under an older
 *    epoch gets 410 before it reaches upstream, unless a narrowing was
 *    deferred to it (I3); one sent before the epoch moved gets 410 in its
 *    stream; one whose resourceVersion has no point gets 410 while a watch
 *    of its lineage is being ended; in ring mode one this proxy cannot
 *    place gets 410 (every one until a minute after the first non-empty
 *    ranges, then once per lineage).
 * I3 Narrow only to a subset of a trusted cache (`whyNotNarrow` and
 *    `deferredNarrowing` in narrowing.ts): a lineage narrows only with all
 *    of its open watches, each of the previous epoch, past its initial
 *    events, between events, with the new ranges inside its ranges and the
 *    index trusted. A lineage with nothing open or in flight whose cache is
 *    of the previous epoch (its informer between LIST and WATCH) defers the
 *    narrowing to the WATCH that resumes that cache: sent under the new
 *    ranges, narrowed in the step that serves it (`onWatchResponse`), while
 *    the new ranges stay inside that cache's and no newer snapshot swept
 *    the index (`advance`, `pruneIndexes`).
 * I4 Who owes at a change (`whyOwes` in owing.ts, and `changeRanges`):
 *    every lineage whose open watch is ended rather than narrowed, whose
 *    held requests are released into the new ranges, that has a WATCH in
 *    flight, that was told to relist and has not, or that has no live watch
 *    open and a LIST in flight or a request within its quiet bound (the
 *    long one for a reflector or a lineage whose cache is of older ranges:
 *    `quietBoundMs` in quiet.ts). A lineage let go as quiet that comes back
 *    before the generation is reported owes again (`useLineage`).
 *    Obligations carry into every later generation until cleared.
 * I5 What clears an obligation (`relisted`, `settleNarrowing`,
 *    `releaseQuiet`): a WATCH served under the current epoch (its resume
 *    checked by I2), a watch-list's initial events under it, a completed
 *    LIST of a lineage released from hold, every watch of a narrowed
 *    lineage confirming (a deferred narrowing: its resuming watch), or the
 *    quiet bound (`releaseAt` in quiet.ts: a lineage that has watched, or
 *    whose newest cache is of older ranges, only after watcherQuietMs of
 *    quiet, however slowly its client reads a LIST).
 * I6 Epochs only grow: the ledger's moves exactly when the ranges differ; a
 *    lineage's `listEpoch` never goes back (`advance`).
 * I7 Nothing is counted: open watches and requests in flight are read off
 *    the request records (records.ts).
 * I8 Never stalled without a timer (`schedule`): while requests are held or
 *    an idle owed lineage waits for its bound, a wake is asked for at the
 *    earliest such time.
 *
 * Limits (docs/rings.md, "Limits"): caches of one lineage are told apart
 * only by resourceVersion; a client that aborts in the turn its watch is
 * narrowed never reads the DELETEDs; an empty first table is reported while
 * held caches keep what a previous process gave them.
 */
import { equal, ratio } from "../../../shard/range.ts";
import { jitterDelay } from "./jitter.ts";
import { deferredNarrowing, planNarrowing, type NarrowingContext } from "./narrowing.ts";
import { releaseAt } from "./quiet.ts";
import { isBusy, isOpenWatch, tally } from "./records.ts";
import { placeResume, whyOwes } from "./owing.ts";
import { PMap, type PMapDraft } from "./pmap.ts";
import { narrowAt, remember, watchEndAt } from "./resume.ts";
import type { Ledger, LedgerEffect, LedgerEvent, LedgerPolicy, LineageKey, LineageRecord, NarrowFacts, Narrowing, OpenWatch, Owed, RequestBase, RequestRecord, Rid, SentRequest, StepResult } from "./types.ts";

type Scalars = { -readonly [K in Exclude<keyof Ledger, "owed" | "narrowing" | "released" | "lineages" | "requests">]: Ledger[K] };

/** One step's working copy: the small maps are copied, the big ones edited as drafts, so the input ledger is never changed. */
interface Work {
  readonly s: Scalars;
  readonly owed: Map<LineageKey, Owed>;
  readonly narrowing: Map<LineageKey, Narrowing>;
  readonly released: Map<LineageKey, number>;
  readonly lineages: PMapDraft<LineageKey, LineageRecord>;
  readonly requests: PMapDraft<Rid, RequestRecord>;
  readonly fx: LedgerEffect[];
  readonly now: number;
  readonly p: LedgerPolicy;
}

/** What the client is told when a resume is refused or a watch ended because the ranges moved. */
export const RESUME_REFUSED = "shardcar: shard ranges changed since this watch's list; relist required";
export const OPENED_DURING_CHANGE = "shardcar: shard ranges changed while this watch was being opened; relist required";
export const SHUTTING_DOWN = "shardcar: proxy shutting down";

export function initialLedger(o: { generation: number; ranges: Ledger["ranges"]; now: number; waitForRangesMs: number; seed: number; policy: LedgerPolicy }): Ledger {
  return {
    generation: o.generation,
    ranges: o.ranges,
    epoch: 0,
    awaiting: false,
    owed: new Map(),
    narrowing: new Map(),
    released: new Map(),
    lineages: PMap.of(),
    requests: PMap.of(),
    // A member that has never had a generation holds its controller's
    // sharded requests, so that its first LIST is its real one (P7).
    holdUntil: o.waitForRangesMs > 0 && o.generation === 0 ? o.now + o.waitForRangesMs : undefined,
    // The restart window opens with the first non-empty ranges; a proxy may start with them.
    refuseUnplacedUntil: o.generation !== 0 && o.ranges.length > 0 ? o.now + o.policy.refuseUnplacedMs : 0,
    nextPointId: 1,
    seed: o.seed,
    wakeAt: undefined,
    lastPrune: o.now,
    shutdown: false,
  };
}

export function step(ledger: Ledger, event: LedgerEvent, now: number, policy: LedgerPolicy): StepResult {
  const { owed, narrowing, released, lineages, requests, ...scalars } = ledger;
  const w: Work = {
    s: { ...scalars },
    owed: new Map(owed),
    narrowing: new Map(narrowing),
    released: new Map(released),
    lineages: lineages.edit(),
    requests: requests.edit(),
    fx: [],
    now,
    p: policy,
  };
  switch (event.type) {
    case "ranges":
      onRanges(w, event.generation, event.ranges, event.facts);
      break;
    case "request": {
      // The request's own fields become its record; the event's tag does not.
      const { type, ...r } = event;
      void type;
      onRequest(w, r);
      break;
    }
    case "list-done":
      onListDone(w, event.rid, event.ok, event.rv);
      break;
    case "watch-response":
      onWatchResponse(w, event.rid);
      break;
    case "initial-events-end":
      onInitialEventsEnd(w, event.rid);
      break;
    case "narrowed":
      onNarrowed(w, event.rid, event.ok, event.rv);
      break;
    case "watch-ended":
      onWatchEnded(w, event.rid, event.rv, event.byProxy);
      break;
    case "closed":
      onClosed(w, event.rid);
      break;
    case "tick":
      // The wake the shell was asked for has fired: none is pending now.
      w.s.wakeAt = undefined;
      break;
    case "shutdown":
      onShutdown(w);
      break;
  }
  settle(w);
  return { ledger: { ...w.s, owed: w.owed, narrowing: w.narrowing, released: w.released, lineages: w.lineages.done(), requests: w.requests.done() }, effects: w.fx };
}

/** Open watches of `lineage` right now (derived, I7); the object index asks this to tell whether a snapshot had the lineage to itself. */
export function openWatchesOf(ledger: Ledger, lineage: LineageKey): number {
  let n = 0;
  for (const r of ledger.requests.values()) if (r.phase === "open" && r.lineage === lineage) n++;
  return n;
}

/** Watches of `lineage` ever opened (a sequence); see {@link openWatchesOf}. */
export function watchesOpenedOf(ledger: Ledger, lineage: LineageKey): number {
  return ledger.lineages.get(lineage)?.watchesOpened ?? 0;
}

// ---------------------------------------------------------------------------
// After every event

function settle(w: Work): void {
  if (w.s.shutdown) {
    // Nothing is reported or released once the proxy is going away.
    if (w.s.wakeAt !== undefined) {
      w.s.wakeAt = undefined;
      w.fx.push({ type: "wake", at: undefined });
    }
    return;
  }
  // Held requests whose wait ran out are served under whatever ranges hold
  // now (none: an empty shard); they owe nothing, no generation took them.
  if (w.s.holdUntil !== undefined && w.now >= w.s.holdUntil) releaseHeld(w, "waited long enough");
  releaseQuiet(w);
  // I1: the member may report the generation only once every cache that
  // could hold older ranges has relisted or narrowed (or went quiet).
  if (w.s.awaiting && w.owed.size === 0 && w.narrowing.size === 0 && !sentUnderOlderEpoch(w)) {
    w.s.awaiting = false;
    w.released.clear();
    w.fx.push({ type: "log", level: "info", msg: "every watched resource relisted under the new ranges", fields: { generation: w.s.generation } });
    w.fx.push({ type: "applied", generation: w.s.generation });
  }
  schedule(w);
}

/**
 * I1: a request rewritten under older ranges and not landed yet may build a
 * cache of them, whatever its lineage's open watches do (one may be a
 * watch its client already abandoned for it). Read off the records.
 */
function sentUnderOlderEpoch(w: Work): boolean {
  for (const r of w.requests.values()) if (r.phase === "sent" && r.epoch < w.s.epoch) return true;
  return false;
}

/** I5: owed lineages whose client went quiet past their bound are let go. */
function releaseQuiet(w: Work): void {
  if (w.owed.size === 0) return;
  const busy = tally(w.requests.values());
  for (const [key, o] of [...w.owed]) {
    const at = releaseAt(o, w.lineages.get(key), busy.get(key), w.p, w.s.epoch);
    if (at === undefined || w.now < at) continue;
    w.owed.delete(key);
    w.released.set(key, o.since);
    w.fx.push({ type: "log", level: "debug", msg: "released an owed cache whose client went quiet", fields: { lineage: key, owedMs: w.now - o.since } });
  }
}

/** I8: the one wake the shell keeps, at the earliest time something is due. */
function schedule(w: Work): void {
  let at = w.s.holdUntil;
  if (w.owed.size > 0) {
    const busy = tally(w.requests.values());
    for (const [key, o] of w.owed) {
      const r = releaseAt(o, w.lineages.get(key), busy.get(key), w.p, w.s.epoch);
      if (r !== undefined && (at === undefined || r < at)) at = r;
    }
  }
  if (at === w.s.wakeAt) return;
  w.s.wakeAt = at;
  w.fx.push({ type: "wake", at });
}

// ---------------------------------------------------------------------------
// Range changes

function onRanges(w: Work, generation: number, ranges: Ledger["ranges"], facts: NarrowFacts): void {
  const prevGeneration = w.s.generation;
  // A real generation with slots. Not an empty first table: the informer
  // would list nothing and might be between its LIST and its WATCH, with
  // nothing open to end, when its ranges arrive.
  const first = generation !== 0 && ranges.length > 0;
  // The restart window opens with the first real ranges: caches built
  // through a previous proxy process reconnect then.
  if (first && w.s.refuseUnplacedUntil === 0) w.s.refuseUnplacedUntil = w.now + w.p.refuseUnplacedMs;
  const releasing = first && w.s.holdUntil !== undefined;
  // I4: the held requests' lineages owe their first relist to this
  // generation; a completed LIST counts (a held LIST may be a one-off).
  if (releasing) for (const r of w.requests.values()) if (r.phase === "held") owe(w, r.lineage, true);
  w.s.generation = generation;
  w.s.awaiting = true;
  // I6: a generation that keeps the ranges keeps the epoch; nothing relists.
  if (!equal(ranges, w.s.ranges)) changeRanges(w, prevGeneration, ranges, facts);
  if (releasing) releaseHeld(w, `generation ${generation}`);
}

function changeRanges(w: Work, prevGeneration: number, ranges: Ledger["ranges"], facts: NarrowFacts): void {
  const prevEpoch = w.s.epoch;
  const prevRanges = w.s.ranges;
  w.s.ranges = ranges;
  w.s.epoch = prevEpoch + 1;
  const busy = tally(w.requests.values());
  const ctx: NarrowingContext = {
    syntheticDeletes: w.p.syntheticDeletes,
    ranges,
    prevEpoch,
    facts,
    lineages: w.lineages,
    openWatches: (key) => busy.get(key)?.open ?? 0,
  };
  for (const l of [...w.lineages.values()]) {
    // I3: a cache between its LIST and its WATCH narrows on that WATCH (it still owes until then).
    const deferred = deferredNarrowing(l, busy.get(l.key), prevRanges, ctx);
    if (deferred !== l.narrowOnResume) w.lineages.set(l.key, { ...l, narrowOnResume: deferred });
    if (deferred !== undefined && deferred !== l.narrowOnResume) w.fx.push({ type: "log", level: "debug", msg: "narrowing deferred to the watch that resumes this lineage's cache", fields: { lineage: l.key, epoch: deferred.epoch } });
    const why = whyOwes(l, busy.get(l.key), w.now, w.p, w.s.epoch);
    if (why === undefined) continue;
    owe(w, l.key, false);
    w.fx.push({ type: "log", level: "debug", msg: "a cache of this lineage may hold the old ranges", fields: { lineage: l.key, why } });
  }
  // A narrowing still unconfirmed is overtaken (only a shell that confirms
  // late leaves one): its watches are of no one epoch, so its lineage relists.
  for (const key of w.narrowing.keys()) owe(w, key, false);
  w.narrowing.clear();
  const open = [...w.requests.values()].filter(isOpenWatch).filter((r) => !r.doomed);
  const plan = planNarrowing(open, ctx);
  for (const [lineage, why] of plan.why) {
    w.fx.push({ type: "log", level: "debug", msg: "relisting instead of narrowing in place", fields: { lineage, watches: plan.end.filter((r) => r.lineage === lineage).length, why } });
  }
  // Every other open watch was opened with the old selector: it ends with
  // 410 so its reflector relists (its informer replaces the store at once,
  // so the controller never sees an empty cache), and its lineage owes it.
  const message = `shardcar: shard ranges changed (generation ${prevGeneration} -> ${w.s.generation}); relist required`;
  for (const r of plan.end) {
    owe(w, r.lineage, false);
    doom(w, r, message);
  }
  let narrowed = 0;
  for (const [lineage, watches] of plan.narrow) {
    // Not applied until every one of them confirms (I1): a stream may refuse.
    w.narrowing.set(lineage, { epoch: w.s.epoch, waiting: watches.map((r) => r.rid), failed: false });
    for (const r of watches) w.requests.set(r.rid, { ...r, narrowing: { epoch: w.s.epoch, ranges } });
    w.fx.push({ type: "narrow", lineage, rids: watches.map((r) => r.rid), ranges, epoch: w.s.epoch });
    narrowed += watches.length;
  }
  w.fx.push({ type: "log", level: "info", msg: "owned ranges changed", fields: { generation: w.s.generation, epoch: w.s.epoch, owned: ratio(ranges), relisting: [...w.owed.keys()], narrowed } });
}

/** Orders a 410 for an open watch (spread over the jitter window); it will not be narrowed from now on. */
function doom(w: Work, r: OpenWatch, why: string): void {
  const j = jitterDelay(w.s.seed, w.p.relistJitterMs);
  w.s.seed = j.seed;
  w.requests.set(r.rid, { ...r, doomed: true, narrowing: undefined });
  tell(w, r.lineage);
  w.fx.push({ type: "end-watch", rid: r.rid, delayMs: j.delayMs, why, cause: "ranges" });
}

/** A cache of `key` is told to relist (a 410): until the lineage relists, it owes every change. */
function tell(w: Work, key: LineageKey): void {
  const l = w.lineages.get(key);
  if (l !== undefined && !l.told) w.lineages.set(key, { ...l, told: true });
}

function owe(w: Work, key: LineageKey, listCounts: boolean): void {
  w.released.delete(key);
  const o = w.owed.get(key);
  w.owed.set(key, { since: o?.since ?? w.now, listCounts: (o?.listCounts ?? false) || listCounts });
}

/**
 * I5: `key` relisted under `epoch`. Counts only for the current epoch; a
 * lineage released from hold has used its one LIST credit either way.
 */
function relisted(w: Work, key: LineageKey, epoch: number): void {
  const l = w.lineages.get(key);
  if (l?.told === true && epoch >= w.s.epoch) w.lineages.set(key, { ...l, told: false });
  const o = w.owed.get(key);
  if (o === undefined) return;
  if (epoch >= w.s.epoch) w.owed.delete(key);
  else if (o.listCounts) w.owed.set(key, { ...o, listCounts: false });
}

/**
 * I6: a LIST sent before a change may land after it; the lineage's epoch
 * never goes back. A cache of a newer epoch ends any deferred narrowing: its
 * snapshot swept the index of what the older cache held.
 */
function advance(l: LineageRecord, epoch: number): LineageRecord {
  return l.listEpoch === undefined || epoch > l.listEpoch ? { ...l, listEpoch: epoch, narrowOnResume: undefined } : l;
}

// ---------------------------------------------------------------------------
// Requests

function onRequest(w: Work, r: RequestBase): void {
  if (w.s.holdUntil !== undefined) {
    // A held WATCH makes its lineage a reflector's even if its client gives
    // it up before release: its cache (the previous process's, after a
    // restart) may come back as late as a reflector does (quiet.ts).
    if (r.kind === "watch" && r.answerable) {
      const l = useLineage(w, r.lineage);
      w.lineages.set(l.key, { ...l, watched: true });
    }
    w.requests.set(r.rid, { ...r, phase: "held" });
    w.fx.push({ type: "hold", rid: r.rid });
    return;
  }
  admit(w, r);
}

/** Serves the held requests under the ranges of now, in arrival order. */
function releaseHeld(w: Work, why: string): void {
  w.s.holdUntil = undefined;
  const held = [...w.requests.values()].filter((r) => r.phase === "held");
  if (held.length > 0) w.fx.push({ type: "log", level: "info", msg: "serving the requests held for the first ranges", fields: { requests: held.length, why } });
  for (const r of held) {
    w.requests.delete(r.rid);
    admit(w, r);
  }
}

function admit(w: Work, r: RequestBase): void {
  if (!r.answerable) {
    // Answered by the shell itself: a lineage released from hold owes
    // nothing for it, it will never list.
    // Not while another request of it, held or sent, may still be its LIST.
    if (w.owed.get(r.lineage)?.listCounts === true && !otherRequestOf(w, r.lineage, r.rid)) relisted(w, r.lineage, w.s.epoch);
    w.fx.push({ type: "reject", rid: r.rid });
    return;
  }
  let l = useLineage(w, r.lineage);
  if (r.kind === "watch") l = { ...l, watched: true };
  let point: number | undefined;
  let narrowFrom: number | undefined;
  if (r.resumeRv !== undefined) {
    const p = placeResume(l, r.resumeRv, {
      epoch: w.s.epoch,
      ranges: w.s.ranges,
      ring: w.p.ring,
      // Before its first non-empty ranges a member has placed nothing: its
      // wait for ranges may have run out with every cache still the
      // previous process's.
      inWindow: w.s.refuseUnplacedUntil === 0 || w.now < w.s.refuseUnplacedUntil,
      ending: someOpen(w, r.lineage, (x) => x.doomed),
    });
    l = p.lineage;
    point = p.point;
    narrowFrom = p.narrowFrom;
    w.lineages.set(l.key, l);
    if (p.refuse !== undefined) {
      // I2: it relists instead; until its lineage does, it owes every change (I4).
      tell(w, l.key);
      w.fx.push({ type: "refuse-resume", rid: r.rid, why: p.refuse });
      return;
    }
  }
  w.lineages.set(l.key, l);
  w.requests.set(r.rid, { ...r, phase: "sent", epoch: w.s.epoch, ranges: w.s.ranges, point, narrowFrom });
  w.fx.push({ type: "send", rid: r.rid, generation: w.s.generation, epoch: w.s.epoch, ranges: w.s.ranges });
}

function otherRequestOf(w: Work, lineage: LineageKey, rid: Rid): boolean {
  for (const r of w.requests.values()) if (r.rid !== rid && r.lineage === lineage && (r.phase === "sent" || (r.phase === "held" && r.answerable))) return true;
  return false;
}

function someOpen(w: Work, lineage: LineageKey, p: (r: OpenWatch) => boolean): boolean {
  for (const r of w.requests.values()) if (r.phase === "open" && r.lineage === lineage && p(r)) return true;
  return false;
}

/** The lineage of a request starting now (made, or evicting the least recently used to make room). */
function useLineage(w: Work, key: LineageKey): LineageRecord {
  if (w.now - w.s.lastPrune > w.p.pruneEveryMs) pruneIndexes(w);
  // I4: let go as quiet, and back before the generation was reported: it
  // is relisting now, and owes again (its first `since` keeps the 2x bound).
  const since = w.released.get(key);
  if (since !== undefined) {
    w.released.delete(key);
    w.owed.set(key, { since, listCounts: false });
  }
  const known = w.lineages.get(key);
  // Evict before adding, so the new lineage is never the one evicted.
  if (known === undefined && w.lineages.size >= w.p.maxLineages) evictOne(w);
  const l: LineageRecord = {
    ...(known ?? { key, listEpoch: undefined, watched: false, book: [], unplacedRefused: false, told: false, watchesOpened: 0, narrowOnResume: undefined }),
    lastUsed: w.now,
    indexDropped: false,
  };
  w.lineages.set(key, l);
  return l;
}

function pruneIndexes(w: Work): void {
  w.s.lastPrune = w.now;
  const busy = tally(w.requests.values());
  for (const l of [...w.lineages.values()]) {
    if (l.indexDropped || isBusy(busy.get(l.key)) || w.now - l.lastUsed <= w.p.idleIndexMs) continue;
    // Idle for long: its next narrowing relists rather than trust an old index.
    w.lineages.set(l.key, { ...l, indexDropped: true, narrowOnResume: undefined });
    w.fx.push({ type: "drop-index", lineage: l.key });
  }
}

function evictOne(w: Work): void {
  const busy = tally(w.requests.values());
  let oldest: LineageRecord | undefined;
  for (const l of w.lineages.values()) if (!isBusy(busy.get(l.key)) && (oldest === undefined || l.lastUsed < oldest.lastUsed)) oldest = l;
  if (oldest === undefined) return;
  w.lineages.delete(oldest.key);
  w.fx.push({ type: "drop-index", lineage: oldest.key });
}

/** A request is no longer in flight: its lineage was used now. */
function land(w: Work, r: RequestRecord): void {
  w.requests.delete(r.rid);
  touch(w, r.lineage);
}

function touch(w: Work, key: LineageKey): void {
  const l = w.lineages.get(key);
  if (l !== undefined) w.lineages.set(key, { ...l, lastUsed: w.now });
}

function sentOf(w: Work, rid: Rid, kind: "list" | "watch"): SentRequest | undefined {
  const r = w.requests.get(rid);
  return r?.phase === "sent" && r.kind === kind ? r : undefined;
}

function openOf(w: Work, rid: Rid): OpenWatch | undefined {
  const r = w.requests.get(rid);
  return r?.phase === "open" ? r : undefined;
}

function onListDone(w: Work, rid: Rid, ok: boolean, rv: string | undefined): void {
  const r = sentOf(w, rid, "list");
  if (r === undefined) return;
  const l = w.lineages.get(r.lineage);
  // A later page is not a snapshot; the first page's resourceVersion is the list's.
  if (ok && !r.page && l !== undefined) {
    // The cache rebuilt from this LIST is of its epoch, at its resourceVersion (I2).
    const book = rv === undefined ? l.book : remember(l.book, { id: w.s.nextPointId++, rv, epoch: r.epoch, used: false });
    w.lineages.set(l.key, advance({ ...l, book }, r.epoch));
    // A lineage released from hold may be a one-off lister: its completed LIST is its relist.
    if (w.owed.get(r.lineage)?.listCounts === true) relisted(w, r.lineage, r.epoch);
  }
  // I4: a LIST of older ranges landed: its cache (whole, or cut and about
  // to relist) may hold them, even beside a watch that narrowed; the
  // lineage owes from now, and its resume is refused (I2).
  if (r.epoch < w.s.epoch) owe(w, r.lineage, false);
  land(w, r);
}

function onWatchResponse(w: Work, rid: Rid): void {
  const r = sentOf(w, rid, "watch");
  if (r === undefined) return;
  w.requests.delete(rid);
  touch(w, r.lineage);
  if (r.epoch < w.s.epoch) {
    // I2: sent under older ranges, answered after they changed: it missed
    // its narrowing or widening, and relists instead.
    tell(w, r.lineage);
    w.fx.push({ type: "expire-watch", rid, why: OPENED_DURING_CHANGE });
    return;
  }
  const l0 = w.lineages.get(r.lineage);
  if (r.narrowFrom !== undefined && (l0?.narrowOnResume === undefined || l0.narrowOnResume.epoch !== r.narrowFrom)) {
    // I3: the deferral was revoked while the resume was in flight (a newer
    // snapshot swept the index of what its cache held): it cannot be
    // narrowed from the index, so it relists, and its lineage owes that.
    tell(w, r.lineage);
    owe(w, r.lineage, false);
    w.fx.push({ type: "expire-watch", rid, why: OPENED_DURING_CHANGE });
    return;
  }
  const { narrowFrom, ...sent } = r;
  // A resume narrowed once served: its cache stays of its older epoch until the stream confirms (I1, I3).
  const narrowing = narrowFrom === undefined ? undefined : { epoch: w.s.epoch, ranges: w.s.ranges };
  const open: OpenWatch = { ...sent, kind: "watch", phase: "open", sentEpoch: r.epoch, epoch: narrowFrom ?? r.epoch, ranges: r.ranges, point: r.point, doomed: false, replaying: r.watchList, narrowing };
  w.requests.set(rid, open);
  const l = w.lineages.get(r.lineage);
  if (l !== undefined) w.lineages.set(l.key, { ...l, watchesOpened: l.watchesOpened + 1 });
  w.fx.push({ type: "serve-watch", rid });
  if (narrowing !== undefined) {
    // The lineage's obligation moves to the narrowing: applied once the
    // stream confirms it (I1). Not one a cache told to relist still owes:
    // that cache is not this one.
    if (l?.told !== true) w.owed.delete(r.lineage);
    const n = w.narrowing.get(r.lineage);
    w.narrowing.set(r.lineage, { epoch: narrowing.epoch, waiting: [...(n?.epoch === narrowing.epoch ? n.waiting : []), rid], failed: n?.epoch === narrowing.epoch && n.failed });
    w.fx.push({ type: "narrow", lineage: r.lineage, rids: [rid], ranges: narrowing.ranges, epoch: narrowing.epoch });
    return;
  }
  // I5: a WATCH from "now" with initial state, or one resuming a cache of
  // this epoch (I2 refused any other): the cache is the new shard's from
  // here on. A watch-list counts once its initial events are through.
  if (!r.watchList) relisted(w, r.lineage, r.epoch);
}

function onInitialEventsEnd(w: Work, rid: Rid): void {
  const r = openOf(w, rid);
  if (r === undefined || !r.replaying) return;
  w.requests.set(rid, { ...r, replaying: false });
  // A watch-list is a relist: the cache it built is of the epoch it was sent under.
  const l = w.lineages.get(r.lineage);
  if (l !== undefined) w.lineages.set(l.key, advance(l, r.sentEpoch));
  relisted(w, r.lineage, r.sentEpoch);
}

function onNarrowed(w: Work, rid: Rid, ok: boolean, rv: string | undefined): void {
  const r = openOf(w, rid);
  if (r?.narrowing === undefined) return;
  const n = w.narrowing.get(r.lineage);
  if (n === undefined || n.epoch !== r.narrowing.epoch || r.doomed) {
    // Overtaken by a later change, which ended it: only forget the order.
    w.requests.set(rid, { ...r, narrowing: undefined });
    return;
  }
  const l = w.lineages.get(r.lineage);
  if (ok && rv !== undefined && l !== undefined) {
    // The stream took the DELETEDs and filters with the narrower ranges:
    // its cache is of them, and a re-watch from the resourceVersion the
    // DELETEDs carried continues it (a client may abort and re-watch before
    // this watch's end is seen).
    const at = narrowAt(l.book, rv, r.narrowing.epoch, r.point, w.s.nextPointId++);
    w.lineages.set(l.key, { ...l, book: at.book });
    w.requests.set(rid, { ...r, epoch: r.narrowing.epoch, ranges: r.narrowing.ranges, point: at.point.id, narrowing: undefined });
  } else {
    // The stream refused: this watch relists instead, and its lineage owes it.
    doom(w, r, `shardcar: shard ranges changed (generation ${w.s.generation}); relist required`);
  }
  settleNarrowing(w, r.lineage, { ...n, waiting: n.waiting.filter((x) => x !== rid), failed: n.failed || !ok || rv === undefined || l === undefined });
}

/** A lineage's narrowing is done once every watch answered: its cache is of the new epoch, or (one refused) it owes a relist. */
function settleNarrowing(w: Work, key: LineageKey, n: Narrowing): void {
  if (n.waiting.length > 0) {
    w.narrowing.set(key, n);
    return;
  }
  w.narrowing.delete(key);
  const l = w.lineages.get(key);
  if (n.failed || l === undefined) owe(w, key, false);
  else w.lineages.set(key, advance(l, n.epoch));
}

function onWatchEnded(w: Work, rid: Rid, rv: string | undefined, byProxy: boolean): void {
  const r = openOf(w, rid);
  if (r === undefined) return;
  w.requests.delete(rid);
  const l = w.lineages.get(r.lineage);
  if (l !== undefined) {
    // Its re-watch resumes from where this one left the cache, under the
    // epoch it reached (narrowings included). Not after the proxy's 410,
    // which makes the client relist: a point there could only mislead.
    const book = !byProxy && rv !== undefined ? watchEndAt(l.book, rv, r.epoch, r.point, w.s.nextPointId++) : l.book;
    w.lineages.set(l.key, { ...l, book, lastUsed: w.now });
  }
  const n = w.narrowing.get(r.lineage);
  if (r.narrowing !== undefined && n !== undefined) settleNarrowing(w, r.lineage, { ...n, waiting: n.waiting.filter((x) => x !== rid), failed: true });
}

function onClosed(w: Work, rid: Rid): void {
  const r = w.requests.get(rid);
  if (r === undefined) return;
  // A held request whose client left owes nothing: it never reached a lineage.
  if (r.phase === "held") w.requests.delete(rid);
  else if (r.phase === "sent") {
    // I4: one of older ranges given up by its client: the cache it was to
    // rebuild holds what it held before (its client relists, or resumes
    // it), so the lineage owes, as when it lands (`onListDone`).
    if (r.epoch < w.s.epoch) owe(w, r.lineage, false);
    land(w, r);
  }
  // An open watch ends with its own `watch-ended`.
}

function onShutdown(w: Work): void {
  w.s.shutdown = true;
  for (const r of [...w.requests.values()]) {
    if (!isOpenWatch(r)) continue;
    w.requests.set(r.rid, { ...r, doomed: true, narrowing: undefined });
    w.fx.push({ type: "end-watch", rid: r.rid, delayMs: 0, why: SHUTTING_DOWN, cause: "shutdown" });
  }
  releaseHeld(w, "proxy shutting down");
}
