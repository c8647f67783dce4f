/**
 * The shard proxy: an HTTP handler that sits between one controller and the
 * apiserver. Sharded LIST and WATCH requests are rewritten with the pod's
 * selector and their responses filtered whenever the server did not;
 * everything else passes through http-proxy-3 untouched.
 *
 * This file routes requests and carries out the handoff ledger's effects.
 * The jobs live next to it: `serving/routing.ts` (the ways upstream),
 * `serving/lock-serving.ts` (the renamed leader-election lock),
 * `serving/list-serving.ts` and `serving/watch-serving.ts` (filtering
 * responses), `reporting/resource-stats.ts` (stats and metrics),
 * `handoff/object-index.ts` (the object index), and the ledger
 * (`handoff/ledger/`, pure) with its shell (`handoff/ledger-driver.ts`):
 * which caches owe a relist, which resumes get 410, when a watch narrows in
 * place and when a generation is reported applied are decided there, never
 * here.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { pipeline, Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { monotonicClock } from "../clock.ts";
import { ratio, type Range } from "../shard/range.ts";
import type { HandoffView, ShardProxyOptions } from "./proxy-options.ts";
import { resourceId, type Exchange, type Sent } from "./exchange.ts";
import { encodingOf, filterableAccept, type Encoding } from "./request/accept.ts";
import { Accounting, type LiveWatch, type OpenStream, type ResourceStats } from "./reporting/resource-stats.ts";
import { classify, indexResources, readsNoBody, type ResourceIndex, type ResourceRequest } from "./request/classify.ts";
import { DeliveredIndex, ListSink, WatchSink, atOrBefore, type Resend } from "./handoff/object-index.ts";
import { rewriteFor, SHARDSELECTOR, type ProxyFiltering } from "./request/filtering.ts";
import { initialLedger, openWatchesOf, RESUME_REFUSED, watchesOpenedOf } from "./handoff/ledger/ledger.ts";
import { DEFAULT_POLICY, NO_FACTS, type LedgerEffect, type LedgerPolicy, type NarrowFacts, type Rid } from "./handoff/ledger/types.ts";
import { describeOwed } from "./handoff/ledger/view.ts";
import { LedgerShell, type ProxyClock } from "./handoff/ledger-driver.ts";
import { isResumingWatch, isTrue, lineageKey } from "./handoff/lineage.ts";
import { serveList, RvSink } from "./serving/list-serving.ts";
import { matchLockRequest, renamedLock } from "./serving/lock-rename.ts";
import { LockServing } from "./serving/lock-serving.ts";
import type { Ownership } from "../shard/ownership.ts";
import { createRoutes, endToEndHeaders, type Routes } from "./serving/routing.ts";
import { sendStatus } from "./serving/status.ts";
import { expireWatch, serveWatch } from "./serving/watch-serving.ts";

export type { ResourceStats } from "./reporting/resource-stats.ts";

export type { HandoffView, ShardProxyOptions } from "./proxy-options.ts";

export class ShardProxy {
  readonly #opts: ShardProxyOptions;
  readonly #filtering: ProxyFiltering;
  readonly #resources: ResourceIndex;
  readonly #routes: Routes;
  readonly #locks: LockServing;
  readonly #renamedLock: string | undefined;
  readonly #accounting: Accounting;
  readonly #index: DeliveredIndex;
  readonly #shell: LedgerShell;
  readonly #clock: ProxyClock;
  readonly #policy: LedgerPolicy;
  readonly #exchanges = new Map<Rid, Exchange>();
  readonly #ridOf = new WeakMap<IncomingMessage, Rid>();
  readonly #unsubscribe: () => void;
  #nextRid = 1;
  #closed = false;

  constructor(opts: ShardProxyOptions) {
    this.#opts = opts;
    this.#filtering = opts.filtering ?? SHARDSELECTOR;
    this.#resources = indexResources(opts.resources);
    this.#clock = opts.clock ?? monotonicClock;
    this.#routes = createRoutes({
      upstream: opts.upstream,
      logger: opts.logger,
      upstreamFailed: opts.upstreamFailed,
      onSharded: (proxyRes, req, res) => this.#onShardedResponse(proxyRes, req, res),
      onLock: (proxyRes, res) => this.#locks.response(proxyRes, res),
    });
    this.#locks = new LockServing(this.#routes.locks);
    this.#renamedLock = opts.lock === undefined ? undefined : renamedLock(opts.lock.spec, opts.lock.identity);
    this.#accounting = new Accounting(opts.metrics, () => this.#liveWatches());
    this.#index = new DeliveredIndex({
      openWatches: (l) => openWatchesOf(this.#shell.ledger, l),
      watchesOpened: (l) => watchesOpenedOf(this.#shell.ledger, l),
    });
    const policy: LedgerPolicy = {
      ...DEFAULT_POLICY,
      ring: opts.ownership.markApplied !== undefined,
      syntheticDeletes: opts.syntheticDeletes === true,
      betweenListAndWatchMs: opts.betweenListAndWatchMs ?? DEFAULT_POLICY.betweenListAndWatchMs,
      watcherQuietMs: opts.watcherQuietMs ?? DEFAULT_POLICY.watcherQuietMs,
      relistJitterMs: opts.relistJitterMs ?? 0,
    };
    this.#policy = policy;
    const own = opts.ownership.current();
    this.#metricsFor(own);
    this.#shell = new LedgerShell({
      ledger: initialLedger({ generation: own.generation, ranges: own.ranges, now: this.#clock.now(), waitForRangesMs: opts.waitForRangesMs ?? 0, seed: Math.floor((opts.random ?? Math.random)() * 2 ** 32), policy }),
      policy,
      clock: this.#clock,
      logger: opts.logger,
      execute: (fx) => this.#carryOut(fx),
    });
    // Asks for the ledger's first wake (the end of the wait for ranges).
    this.#shell.dispatch({ type: "tick" });
    this.#unsubscribe = opts.ownership.subscribe((next) => this.#onOwnership(next));
  }

  /** Per-resource tallies since start, including watches still open. A snapshot. */
  stats(): ReadonlyMap<string, Readonly<ResourceStats>> {
    return this.#accounting.snapshot();
  }

  /** What the handoff ledger is waiting for right now (tests, and operators reading the debug log). A snapshot. */
  handoff(): HandoffView {
    const l = this.#shell.ledger;
    let held = 0;
    for (const r of l.requests.values()) if (r.phase === "held") held++;
    return { generation: l.generation, epoch: l.epoch, applied: !l.awaiting, owed: [...l.owed.keys()], narrowing: [...l.narrowing.keys()], held, waiting: describeOwed(l, this.#clock.now(), this.#policy) };
  }

  /**
   * Whether a watch of each resource recently passed an event whose shard
   * key value (uid, namespace or owner uid, per the resource's key) is
   * `key`; in labels mode, an event of that value's slot while this proxy
   * still owns it.
   */
  delivered(key: string): Record<string, boolean> {
    return this.#accounting.delivered(key, this.#filtering, this.#opts.ownership.current().ranges);
  }

  /** Node `request` handler. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    if (this.#opts.lock !== undefined && this.#renamedLock !== undefined) {
      const m = matchLockRequest(req.method ?? "GET", req.url ?? "/", this.#opts.lock.spec, this.#renamedLock);
      if (m !== undefined) {
        this.#locks.serve(req, res, m, this.#opts.lock.spec.name, this.#renamedLock);
        return;
      }
    }
    const cls = classify(req.method ?? "GET", req.url ?? "/", this.#resources);
    if (!readsNoBody(cls)) {
      this.#accounting.passthrough();
      this.#routes.passthrough.web(req, res);
      return;
    }
    // A GET whose body the apiserver never reads: none is forwarded. Drop
    // any the client sends: unread, it would stop its connection reading,
    // and the proxy would not see the client leave; forwarded, it did the
    // same to the apiserver's connection, which then kept a watch open with
    // no one on either end.
    req.resume();
    // Nor its framing, since http-proxy-3 copies these headers: a
    // Content-Length with no body sent would make the apiserver read the
    // next request on the pooled connection as this one's body. `Expect`
    // too: the front has answered it, and http-proxy-3 skips its proxyReq
    // hooks (the sharded route's Accept rewrite) for a request that has one.
    delete req.headers["content-length"];
    delete req.headers["transfer-encoding"];
    delete req.headers.expect;
    if (cls.kind === "passthrough") {
      this.#accounting.passthrough();
      this.#routes.reads.web(req, res, { buffer: Readable.from([]) });
      return;
    }
    const rid = this.#nextRid++;
    const resource = resourceId(cls.resource);
    const ex: Exchange = { rid, req, res, kind: cls.kind, request: cls, resource, lineage: lineageKey(cls.path, cls.query, req.headers.accept), early: this.#early(cls, req.headers.accept, resource), sent: undefined, answered: undefined, watch: undefined, listing: false };
    this.#exchanges.set(rid, ex);
    this.#ridOf.set(req, rid);
    res.on("close", () => {
      // A served watch is forgotten when its stream ends (its `watch-ended`),
      // a served LIST when its body is done (its `list-done`, which may come
      // after the close and still records the list's resourceVersion).
      if (ex.watch !== undefined || ex.listing) return;
      this.#exchanges.delete(rid);
      this.#shell.dispatch({ type: "closed", rid });
    });
    this.#shell.dispatch({
      type: "request",
      rid,
      lineage: ex.lineage,
      kind: cls.kind,
      watchList: cls.kind === "watch" && isTrue(cls.query.get("sendInitialEvents")),
      page: cls.kind === "list" && cls.query.has("continue"),
      resumeRv: cls.kind === "watch" && isResumingWatch(cls.query) ? (cls.query.get("resourceVersion") ?? "") : undefined,
      answerable: ex.early === undefined,
    });
  };

  /** Node `upgrade` handler: exec, attach and port-forward pass through. */
  readonly handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    this.#routes.passthrough.ws(req, socket, head);
  };

  /** Ends every open watch and stops following ownership. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe();
    this.#shell.dispatch({ type: "shutdown" });
    this.#routes.close();
  }

  /** The answer to a request the proxy cannot serve, whatever the ranges (neither depends on them). */
  #early(cls: ResourceRequest, accept: string | undefined, resource: string): Exchange["early"] {
    const rw = rewriteFor(cls.query, cls.resource.key, [], this.#filtering);
    if (!rw.ok) return { status: rw.status, message: rw.message };
    if (filterableAccept(accept) === undefined) return { status: 406, message: `shardcar: sharded ${resource} can only be served as JSON or Kubernetes protobuf; Accept was ${JSON.stringify(accept)}` };
    return undefined;
  }

  #metricsFor(own: Ownership): void {
    this.#opts.metrics.ownedRatio.set(ratio(own.ranges));
    this.#opts.metrics.generation.set(own.generation);
  }

  #onOwnership(next: Ownership): void {
    this.#metricsFor(next);
    // Built when stepped: the facts must be of the streams at that moment.
    this.#shell.dispatch(() => ({ type: "ranges", generation: next.generation, ranges: next.ranges, facts: this.#safeFacts() }));
  }

  /** The facts, or none (every lineage relists instead of narrowing) when reading them fails: the range change is never lost. */
  #safeFacts(): NarrowFacts {
    try {
      return this.#facts();
    } catch (err) {
      this.#opts.logger.error({ err: err instanceof Error ? err.message : String(err) }, "reading the streams' facts for a range change failed; relisting every lineage instead of narrowing");
      return NO_FACTS;
    }
  }

  /** What the ledger needs to know of the streams and the index to decide which watches may narrow in place. */
  #facts(): NarrowFacts {
    if (this.#opts.syntheticDeletes !== true) return NO_FACTS;
    // Every trusted lineage, watched or not: one between its LIST and its WATCH narrows on that WATCH.
    const trusted = new Set(this.#index.trustedLineages());
    const narrowable = new Set<Rid>();
    for (const ex of this.#exchanges.values()) if (ex.watch?.narrowable() === true) narrowable.add(ex.rid);
    return { trusted, narrowable };
  }

  *#liveWatches(): Iterable<LiveWatch> {
    for (const ex of this.#exchanges.values()) if (ex.watch !== undefined) yield ex.watch;
  }

  // -------------------------------------------------------------------------
  // The ledger's effects

  #carryOut(fx: LedgerEffect): void {
    switch (fx.type) {
      case "hold":
      case "wake":
        return;
      case "send":
        return this.#send(fx.rid, fx.generation, fx.ranges);
      case "reject": {
        const ex = this.#exchanges.get(fx.rid);
        if (ex === undefined) return;
        this.#accounting.request(ex.kind, ex.resource);
        sendStatus(ex.res, ex.early?.status ?? 500, ex.early?.message ?? "shardcar: internal error: request refused without a reason");
        return;
      }
      case "refuse-resume": {
        const ex = this.#exchanges.get(fx.rid);
        if (ex === undefined) return;
        this.#accounting.request(ex.kind, ex.resource);
        this.#accounting.forcedRelist(ex.resource);
        this.#opts.logger.debug({ resource: ex.resource, lineage: ex.lineage, why: fx.why }, "refused a resume: its cache must relist");
        sendStatus(ex.res, 410, RESUME_REFUSED, "Expired");
        return;
      }
      case "serve-watch":
        return this.#serveWatch(fx.rid);
      case "expire-watch": {
        const ex = this.#exchanges.get(fx.rid);
        const a = ex?.answered;
        if (ex === undefined || a === undefined) return;
        ex.answered = undefined;
        a.body.destroy();
        this.#accounting.forcedRelist(ex.resource);
        expireWatch(ex.res, a.headers, a.encoding, fx.why);
        return;
      }
      case "end-watch": {
        const ex = this.#exchanges.get(fx.rid);
        const w = ex?.watch;
        if (ex === undefined || w === undefined) return;
        if (fx.cause === "ranges") this.#accounting.forcedRelist(ex.resource);
        if (fx.delayMs === 0) w.terminate(fx.why);
        else this.#clock.timer(fx.delayMs, () => w.terminate(fx.why));
        return;
      }
      case "narrow":
        return this.#narrow(fx.lineage, fx.rids, fx.ranges);
      case "applied":
        this.#opts.ownership.markApplied?.(fx.generation);
        return;
      case "drop-index":
        this.#index.drop(fx.lineage);
        return;
      case "log":
        this.#opts.logger[fx.level](fx.fields, fx.msg);
        return;
    }
  }

  #send(rid: Rid, generation: number, ranges: readonly Range[]): void {
    const ex = this.#exchanges.get(rid);
    if (ex === undefined) return;
    this.#accounting.request(ex.kind, ex.resource);
    const rw = rewriteFor(ex.request.query, ex.request.resource.key, ranges, this.#filtering);
    if (!rw.ok) {
      // Checked on arrival (#early); neither failure depends on the ranges.
      sendStatus(ex.res, rw.status, rw.message);
      return;
    }
    const qs = rw.query.toString();
    ex.req.url = qs === "" ? ex.request.path : `${ex.request.path}?${qs}`;
    ex.sent = { generation, query: rw.query, ranges: rw.ranges, sentSelector: rw.sentSelector, objectKey: rw.objectKey, proxyFilters: rw.proxyFilters };
    this.#routes.sharded.web(ex.req, ex.res, { buffer: Readable.from([]) });
  }

  /** Narrows every watch of `lineage` to `ranges` and confirms each to the ledger. */
  #narrow(lineage: string, rids: readonly Rid[], ranges: readonly Range[]): void {
    // One list of leaving objects for the lineage: its watches share the index.
    // A narrowing deferred to a resuming watch runs later than the facts it
    // was decided on: an index no longer trusted cannot name what leaves.
    const trusted = this.#index.trusted(lineage);
    const leaving = this.#index.find(lineage)?.leaving(ranges) ?? [];
    // One record per narrowing, at the newest resourceVersion its DELETEDs
    // carried: a resume at or before it may have missed them.
    let newest: string | undefined;
    for (const rid of rids) {
      // Every watch is confirmed, one that throws as refused: the ledger
      // waits for each, and a narrowing never confirmed has no timer.
      let rv: string | undefined;
      try {
        const ex = trusted ? this.#exchanges.get(rid) : undefined;
        // A controller's own shardSelector still applies: the new ranges, within it.
        const rw = ex === undefined ? undefined : rewriteFor(ex.request.query, ex.request.resource.key, ranges, this.#filtering);
        rv = rw?.ok === true ? ex?.watch?.narrow(rw.ranges, leaving) : undefined;
        if (ex !== undefined && rv !== undefined) {
          this.#accounting.narrowed(ex.resource, leaving.length);
          newest = newest === undefined || atOrBefore(newest, rv) ? rv : newest;
        }
      } catch (err) {
        rv = undefined;
        this.#opts.logger.error({ err: err instanceof Error ? err.message : String(err), rid, lineage }, "narrowing a watch failed; it relists instead");
      } finally {
        this.#shell.dispatch({ type: "narrowed", rid, ok: rv !== undefined, rv });
      }
    }
    const type = this.#index.find(lineage)?.typeMeta;
    if (newest !== undefined && type !== undefined) this.#index.recordNarrowing(lineage, newest, type, leaving);
  }

  // -------------------------------------------------------------------------
  // Responses

  #onShardedResponse(proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse): void {
    const rid = this.#ridOf.get(req);
    const ex = rid === undefined ? undefined : this.#exchanges.get(rid);
    const sent = ex?.sent;
    if (ex === undefined || sent === undefined) {
      proxyRes.destroy();
      sendStatus(res, 500, "shardcar: internal error: lost request state");
      return;
    }
    // Upstream must end with the client, even when the response itself
    // finished first (a filter may end a watch on its own).
    res.on("close", () => proxyRes.destroy());
    const headers = endToEndHeaders(proxyRes);
    const status = proxyRes.statusCode ?? 502;
    if (status !== 200) {
      // Errors (Status objects, 410, 500 for a bad selector) carry no objects.
      if (proxyRes.headers["content-length"] !== undefined) headers["content-length"] = proxyRes.headers["content-length"];
      res.writeHead(status, headers);
      pipeline(proxyRes, res, () => {});
      return;
    }
    const encoding = encodingOf(proxyRes.headers["content-type"]);
    if (encoding === undefined) {
      proxyRes.destroy();
      sendStatus(res, 502, `shardcar: cannot filter a ${JSON.stringify(proxyRes.headers["content-type"])} response; refusing to pass it unfiltered`);
      return;
    }
    // Accept-Encoding was removed upstream, but a server (or a proxy in
    // between) may compress anyway; gzip is read, anything else refused.
    const contentEncoding = (proxyRes.headers["content-encoding"] ?? "identity").toLowerCase();
    let body: Readable = proxyRes;
    if (contentEncoding === "gzip") {
      const gunzip = createGunzip();
      proxyRes.on("error", (e) => gunzip.destroy(e));
      body = proxyRes.pipe(gunzip);
      delete headers["content-encoding"];
    } else if (contentEncoding !== "identity") {
      proxyRes.destroy();
      sendStatus(res, 502, `shardcar: cannot read a ${JSON.stringify(contentEncoding)}-encoded response; refusing to pass it unfiltered`);
      return;
    }
    headers["x-shardcar-generation"] = String(sent.generation);
    if (ex.kind === "list") {
      this.#serveList(ex, sent, encoding, body, headers);
      return;
    }
    // The index's sink is made before the ledger records the watch open (it
    // asks whether the watch has the lineage to itself).
    const sink = this.#opts.syntheticDeletes === true ? new WatchSink(this.#index, ex.lineage, isTrue(sent.query.get("sendInitialEvents"))) : undefined;
    ex.answered = { body, encoding, headers, sink };
    this.#shell.dispatch({ type: "watch-response", rid: ex.rid });
  }

  #serveList(ex: Exchange, sent: Sent, encoding: Encoding, body: Readable, headers: Record<string, string | string[]>): void {
    // Ring mode reads every list's resourceVersion (the ledger's resume
    // points); with synthetic deletes the index learns what was delivered.
    const sink = this.#opts.syntheticDeletes === true ? new ListSink(this.#index, ex.lineage, sent.query.get("continue") ?? undefined) : this.#opts.ownership.markApplied !== undefined ? new RvSink() : undefined;
    ex.listing = true;
    let open: OpenStream | undefined;
    serveList({
      resource: ex.resource,
      encoding,
      body,
      res: ex.res,
      headers,
      ranges: sent.ranges,
      key: sent.objectKey,
      onUnlabelled: this.#unlabelled(ex.resource),
      sentSelector: sent.sentSelector,
      maxItemBytes: this.#opts.maxItemBytes,
      fallback: this.#opts.fallback,
      failBufferBytes: this.#opts.failBufferBytes,
      sink,
      onRefused: () => this.#accounting.fallbackRefused(ex.resource),
      onStart: (stats) => {
        open = this.#accounting.streamStarted("list", ex.resource, stats);
      },
      onDone: (err, stats) => {
        if (open !== undefined) this.#accounting.listDone(open, stats, err !== undefined, sent.proxyFilters);
        if (err !== undefined) this.#opts.logger.warn({ resource: ex.resource, err: err.message }, "list response ended with an error; aborting the client's response");
        // The index first: a step this triggers may narrow, and asks whether the index is complete.
        else sink?.finish();
        this.#exchanges.delete(ex.rid);
        this.#shell.dispatch({ type: "list-done", rid: ex.rid, ok: err === undefined, rv: sink?.rv });
      },
    });
  }

  /** Labels mode: an object without a readable slot label reached a filter and was dropped. Counted at once, not at the stream's end: it is in no cache. */
  #unlabelled(id: string): (object: string) => void {
    return (object) => {
      this.#accounting.unlabelled(id);
      this.#opts.logger.debug({ resource: id, object }, "dropped an object without a readable slot label");
    };
  }

  /** What a watch resuming a cache of `lineage` must delete again first (see `DeliveredIndex.leftSince`). */
  #resendFor(lineage: string, query: URLSearchParams, ranges: readonly Range[]): Resend | undefined {
    const rv = query.get("resourceVersion");
    if (this.#opts.syntheticDeletes !== true || !isResumingWatch(query) || rv === null) return undefined;
    return this.#index.leftSince(lineage, rv, ranges);
  }

  #serveWatch(rid: Rid): void {
    const ex = this.#exchanges.get(rid);
    const a = ex?.answered;
    const sent = ex?.sent;
    if (ex === undefined || a === undefined || sent === undefined) return;
    ex.answered = undefined;
    let open: OpenStream | undefined;
    ex.watch = serveWatch({
      resource: ex.resource,
      encoding: a.encoding,
      body: a.body,
      res: ex.res,
      headers: a.headers,
      query: sent.query,
      ranges: sent.ranges,
      key: sent.objectKey,
      onUnlabelled: this.#unlabelled(ex.resource),
      recent: this.#accounting.recentFor(ex.resource),
      bookmarkIntervalMs: this.#opts.bookmarkIntervalMs,
      maxItemBytes: this.#opts.maxItemBytes,
      unsafeSkipWatchFilter: this.#opts.unsafeSkipWatchFilter === true,
      sink: a.sink,
      resendDeletes: this.#resendFor(ex.lineage, sent.query, sent.ranges),
      onInitialEventsEnd: () => this.#shell.dispatch({ type: "initial-events-end", rid }),
      onResent: (deletes) => this.#accounting.resentDeletes(ex.resource, deletes),
      onStart: (stats) => {
        open = this.#accounting.streamStarted("watch", ex.resource, stats);
      },
      onEnd: (end) => {
        if (open !== undefined) this.#accounting.watchDone(open, end.stats);
        this.#exchanges.delete(rid);
        this.#shell.dispatch({ type: "watch-ended", rid, rv: end.rv, byProxy: end.byProxy });
      },
    });
  }
}
