/**
 * The shard proxy: an HTTP handler that sits between one controller and the
 * apiserver. Sharded LIST and WATCH requests are rewritten with the pod's
 * selector and their responses filtered whenever the server did not;
 * everything else passes through http-proxy-3 untouched.
 *
 * Upstream requests always end when the controller goes away: a watch whose
 * client left must not stay open upstream (design.md, data path §1).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex, Transform } from "node:stream";
import { pipeline, Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { createProxyServer, type ProxyServer } from "http-proxy-3";
import type { Logger } from "../log.ts";
import { FULL_RANGE, HashMatcher, difference, equal, ratio, type Range } from "../shard/range.ts";
import type { ShardedResource } from "../shard/spec.ts";
import { encodingOf, filterableAccept, type Encoding } from "./accept.ts";
import { classify, indexResources, type ResourceIndex, type ResourceRequest } from "./classify.ts";
import { lineageKey, Lineages, ListSink, RvSink, WatchSink, type Lineage, type ResumePoint } from "./delivered.ts";
import { recordedPoint, rewriteFor, SHARDSELECTOR, type ProxyFiltering } from "./filtering.ts";
import type { ProxyMetrics, Verdict } from "./metrics.ts";
import type { Ownership, OwnershipSource } from "../shard/ownership.ts";
import { matchLockRequest, renameBody, renamedLock, type LockMatch, type LockSpec } from "./lock-rename.ts";
import type { Fallback } from "../settings/pod-settings.ts";
import { RecentKeys, RecordingMatcher } from "./recent.ts";
import { RelistTracker } from "./relist.ts";
import { createJsonListFilter } from "./scan/json-list-filter.ts";
import { createJsonWatchFilter } from "./scan/json-watch-filter.ts";
import { createProtoListFilter } from "./scan/proto-list-filter.ts";
import { createProtoWatchFilter } from "./scan/proto-watch-filter.ts";
import { createJsonListTap, createJsonWatchTap } from "./scan/json-tap.ts";
import { createProtoListTap, createProtoWatchTap } from "./scan/proto-tap.ts";
import type { ObjectKey } from "./scan/object-key.ts";
import type { ListFilterStats, NarrowableWatchFilter, WatchFilterStats } from "./scan/filter-contract.ts";
import type { DeliveredObject } from "./scan/tap.ts";
import { syntheticDelete } from "./synthetic-delete.ts";
import { sendStatus } from "./status.ts";
import { watchErrorEvent } from "./scan/status-encoding.ts";
import type { Upstream } from "./upstream.ts";

export interface ShardProxyOptions {
  readonly upstream: Upstream;
  readonly resources: readonly ShardedResource[];
  readonly ownership: OwnershipSource;
  readonly fallback: Fallback;
  readonly logger: Logger;
  readonly metrics: ProxyMetrics;
  /** How the apiserver is asked to filter (see filtering.ts). Default shardselector. */
  readonly filtering?: ProxyFiltering;
  /** Minimum gap between synthetic bookmarks on one watch. Default 1 s. */
  readonly bookmarkIntervalMs?: number;
  /** Forced relists after a range change are spread over this window. Default 0. */
  readonly relistJitterMs?: number;
  /**
   * Narrow without a relist: keep an index of what each controller cache was
   * delivered, and when the ranges only shrink, send synthetic DELETED events
   * for the objects leaving them instead of ending the watch with 410. For
   * ownership that changes (ring mode); static shards never narrow. Default false.
   */
  readonly syntheticDeletes?: boolean;
  /**
   * While the ownership has never had a generation (a ring member that has
   * not been given its slots yet), hold sharded requests up to this long
   * instead of answering them for an empty shard. The controller's first
   * LIST is then its real one, not an empty list followed by a relist (P7).
   * Default 0 (serve at once).
   */
  readonly waitForRangesMs?: number;
  /**
   * When the ranges change, a lineage with no open watch that listed (or
   * watched) this recently, or is listing now, may be between its LIST and
   * its WATCH: the generation waits for its relist, but no longer than this
   * (a one-off LIST has no watch to follow). Default 5000 ms.
   */
  readonly betweenListAndWatchMs?: number;
  /**
   * The same bound for a lineage that has watched (a reflector): how long
   * it may have nothing open and still be coming back to relist or resume.
   * Reflectors wait up to a minute (client-go's post-410 backoff, jittered;
   * client-node's wait between LIST and WATCH). Default 65000 ms.
   */
  readonly watcherQuietMs?: number;
  /** Largest single list item or watch event accepted from upstream. Default 16 MiB. */
  readonly maxItemBytes?: number;
  /**
   * With fallback=fail, how much of a list without shardInfo is held back
   * while deciding whether the server filtered it. Default 64 MiB.
   */
  readonly failBufferBytes?: number;
  readonly random?: () => number;
  /**
   * TEST-ONLY, never set in production and not reachable from any flag: the
   * watch filter keeps every event, as a proxy that forgot to filter watches
   * would. Exists so `npm run test:real` can show it catches such a proxy.
   */
  readonly unsafeSkipWatchFilter?: boolean;
  /**
   * Per-shard leader election: the controller's lock is renamed to
   * `<name>-<identity>` in paths and create bodies, and back in responses.
   */
  readonly lock?: { readonly spec: LockSpec; readonly identity: string };
}

// A lock object is tiny; anything near etcd's 1.5 MiB object limit is not a lock.
const MAX_LOCK_BODY_BYTES = 1536 * 1024;

/** Per-resource tallies, for the demo, the debug endpoint and tests. */
export interface ResourceStats {
  lists: number;
  watches: number;
  upstreamBytes: number;
  clientBytes: number;
  itemsKept: number;
  itemsDropped: number;
  eventsPassed: number;
  eventsDropped: number;
  syntheticBookmarks: number;
  forcedRelists: number;
  /** Watches narrowed in place (synthetic DELETEDs instead of a relist). */
  narrowedWatches: number;
  syntheticDeletes: number;
  errors: number;
  lastVerdict?: Verdict;
}

interface ShardedState {
  readonly kind: "list" | "watch";
  readonly request: ResourceRequest;
  readonly ranges: readonly Range[];
  readonly sentSelector: string | undefined;
  /** What the filters read to place an object (rewrite.ts). */
  readonly objectKey: ObjectKey;
  /** The server was given nothing to filter by (owner key, shardselector mode): the verdict is the proxy's. */
  readonly proxyFilters: boolean;
  readonly generation: number;
  /** The range epoch the request was rewritten under (see {@link RelistTracker}). */
  readonly epoch: number;
  readonly query: URLSearchParams;
  readonly lineage: Lineage;
  /** Ends the request's in-flight count on its lineage (idempotent). */
  readonly landed: () => void;
  /** A resuming watch: the epoch of the cache it continues, if placed (see Lineage.consumeResume). */
  readonly resumeEpoch: number | undefined;
  /** The point this watch continues; replaced when a narrowing records a new one. */
  resumePoint: ResumePoint | undefined;
}

interface OpenWatch {
  readonly resource: string;
  /** Range epoch of the ranges the watch enforces; moves when it is narrowed in place. */
  epoch: number;
  ranges: readonly Range[];
  readonly lineage: Lineage;
  /** Set once a 410 is scheduled for it: it will not be narrowed. */
  doomed: boolean;
  /** The filter's live tallies, folded into {@link ShardProxy.stats} while open. */
  readonly live: WatchFilterStats;
  terminate(message: string): void;
  /** Synthetic DELETEDs for `leaving`, then filtering with `ranges`; false when the watch cannot narrow now. */
  narrow(ranges: readonly Range[], leaving: readonly DeliveredObject[], epoch: number): boolean;
  /** Whether {@link narrow} would succeed right now. */
  narrowable(): boolean;
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade", "trailer"]);

function resourceId(r: ShardedResource): string {
  return r.group === "" ? r.resource : `${r.resource}.${r.group}`;
}

function isTrue(v: string | null): boolean {
  return v === "true" || v === "1";
}

/** A watch that continues from a specific resourceVersion (typically a LIST's), without initial state. */
function isResumingWatch(q: URLSearchParams): boolean {
  const rv = q.get("resourceVersion");
  return !isTrue(q.get("sendInitialEvents")) && rv !== null && rv !== "" && rv !== "0";
}

export class ShardProxy {
  readonly #opts: ShardProxyOptions;
  readonly #index: ResourceIndex;
  readonly #passthrough: ProxyServer;
  readonly #sharded: ProxyServer;
  readonly #locks: ProxyServer;
  readonly #renamedLock: string | undefined;
  readonly #state = new WeakMap<IncomingMessage, ShardedState>();
  readonly #watches = new Set<OpenWatch>();
  readonly #stats = new Map<string, ResourceStats>();
  readonly #recent = new Map<string, RecentKeys>();
  readonly #relists: RelistTracker;
  /** Moves only when the enforced ranges change; a new generation with the same ranges keeps it. */
  #epoch = 0;
  #ranges: readonly Range[] = [];
  /** Per lineage (one cache's view of a resource): its list epoch and delivered index. */
  readonly #lineages = new Lineages();
  readonly #unsubscribe: () => void;
  #closed = false;
  /** Sharded requests waiting for the first ranges (see `waitForRangesMs`), by resource. */
  #held: Array<{ readonly lineage: string; readonly release: () => void }> | undefined;
  /**
   * Lineages whose held requests were released into the first ranges: the
   * generation waits for them, and a completed LIST counts (a held LIST may
   * be a one-off with no watch to follow it).
   */
  readonly #heldOwed = new Set<string>();
  /** Ring mode (ownership that changes): a resume this proxy cannot place is refused. */
  readonly #dynamic: boolean;
  /** Releases owed lineages whose client went quiet (see #releaseIdle). */
  readonly #idleSweep: NodeJS.Timeout | undefined;
  /** When an owed lineage this proxy no longer knows (evicted) was first seen owed. */
  readonly #owedSince = new Map<string, number>();
  /** Until then, every resume this proxy cannot place is refused (a restart's caches reconnect then). */
  #refuseUnplacedUntil = 0;

  constructor(opts: ShardProxyOptions) {
    this.#opts = opts;
    this.#index = indexResources(opts.resources);
    const common = { target: opts.upstream.url.href, agent: opts.upstream.agent, changeOrigin: true, secure: true, xfwd: false };
    this.#passthrough = createProxyServer({ ...common, ws: true });
    this.#sharded = createProxyServer({ ...common, selfHandleResponse: true });
    this.#locks = createProxyServer({ ...common, selfHandleResponse: true });
    this.#renamedLock = opts.lock === undefined ? undefined : renamedLock(opts.lock.spec, opts.lock.identity);
    this.#locks.on("proxyReq", (proxyReq) => proxyReq.removeHeader("accept-encoding"));
    this.#locks.on("proxyRes", (proxyRes, _req, res) => this.#onLockResponse(proxyRes, res));
    for (const p of [this.#passthrough, this.#sharded, this.#locks]) {
      p.on("error", (err: Error, _req: IncomingMessage, res: ServerResponse | Duplex) => {
        opts.logger.warn({ err: err.message }, "upstream request failed");
        if ("writeHead" in res) sendStatus(res, 502, `shardcar: apiserver unreachable: ${err.message}`, "InternalError");
        else res.destroy();
      });
    }
    this.#sharded.on("proxyReq", (proxyReq, req) => {
      // The proxy must be able to read the body; it never inflates gzip.
      proxyReq.removeHeader("accept-encoding");
      const accept = filterableAccept(req.headers.accept);
      if (accept !== undefined) proxyReq.setHeader("accept", accept);
    });
    this.#sharded.on("proxyRes", (proxyRes, req, res) => this.#onShardedResponse(proxyRes, req, res));
    this.#dynamic = opts.ownership.markApplied !== undefined;
    if (this.#dynamic) {
      const windowMs = opts.betweenListAndWatchMs ?? 5000;
      const watcherMs = opts.watcherQuietMs ?? 65_000;
      this.#idleSweep = setInterval(() => this.#releaseIdle(windowMs, watcherMs), Math.max(50, Math.floor(Math.min(windowMs, watcherMs) / 5)));
      this.#idleSweep.unref();
    }
    this.#relists = new RelistTracker((g) => {
      opts.logger.info({ generation: g }, "every watched resource relisted under the new ranges");
      opts.ownership.markApplied?.(g);
    });
    const waitMs = opts.waitForRangesMs ?? 0;
    if (waitMs > 0 && opts.ownership.current().generation === 0) {
      this.#held = [];
      setTimeout(() => this.#releaseHeld("waited long enough"), waitMs).unref();
    }
    this.#onOwnership(opts.ownership.current(), undefined);
    this.#unsubscribe = opts.ownership.subscribe((next, prev) => this.#onOwnership(next, prev));
  }

  /** Per-resource tallies since start, including watches still open. A snapshot. */
  stats(): ReadonlyMap<string, Readonly<ResourceStats>> {
    const out = new Map<string, ResourceStats>();
    for (const [id, s] of this.#stats) out.set(id, { ...s });
    for (const w of this.#watches) {
      const s = out.get(w.resource);
      if (s === undefined) continue;
      s.upstreamBytes += w.live.bytesIn;
      s.clientBytes += w.live.bytesOut;
      s.eventsPassed += w.live.passed;
      s.eventsDropped += w.live.dropped;
      s.syntheticBookmarks += w.live.syntheticBookmarks;
    }
    return out;
  }

  /** Node `request` handler. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    if (this.#opts.lock !== undefined && this.#renamedLock !== undefined) {
      const m = matchLockRequest(req.method ?? "GET", req.url ?? "/", this.#opts.lock.spec, this.#renamedLock);
      if (m !== undefined) {
        this.#serveLock(req, res, m, this.#opts.lock.spec.name, this.#renamedLock);
        return;
      }
    }
    const cls = classify(req.method ?? "GET", req.url ?? "/", this.#index);
    if (cls.kind === "passthrough") {
      this.#opts.metrics.requests.inc({ class: "passthrough", resource: "" });
      this.#passthrough.web(req, res);
      return;
    }
    const id = resourceId(cls.resource);
    if (this.#held !== undefined) {
      const held = this.#held;
      const entry = { lineage: lineageKey(cls.path, cls.query, req.headers.accept), release: () => this.handle(req, res) };
      held.push(entry);
      res.on("close", () => {
        const i = held.indexOf(entry);
        if (i >= 0) held.splice(i, 1);
      });
      return;
    }
    const stats = this.#statsFor(id);
    this.#opts.metrics.requests.inc({ class: cls.kind, resource: id });
    if (cls.kind === "list") stats.lists++;
    else stats.watches++;

    const own = this.#opts.ownership.current();
    const rw = rewriteFor(cls.query, cls.resource.key, own.ranges, this.#opts.filtering ?? SHARDSELECTOR);
    if (!rw.ok) {
      this.#answeredEarly(cls.path, cls.query, req.headers.accept);
      sendStatus(res, rw.status, rw.message);
      return;
    }
    if (filterableAccept(req.headers.accept) === undefined) {
      this.#answeredEarly(cls.path, cls.query, req.headers.accept);
      sendStatus(res, 406, `shardcar: sharded ${id} can only be served as JSON or Kubernetes protobuf; Accept was ${JSON.stringify(req.headers.accept)}`);
      return;
    }
    const qs = rw.query.toString();
    const lineage = this.#lineages.get(lineageKey(cls.path, cls.query, req.headers.accept), id);
    req.url = qs === "" ? cls.path : `${cls.path}?${qs}`;
    if (cls.kind === "watch") lineage.watchAttempts++;
    let resumeEpoch: number | undefined;
    let resumePoint: ResumePoint | undefined;
    if (cls.kind === "watch" && isResumingWatch(cls.query)) {
      // A watch resumes from the resourceVersion of an earlier LIST. If the
      // ranges changed since that LIST, the controller's cache holds the old
      // shard: resuming would keep objects it no longer owns and miss the
      // ones it gained. 410 makes its reflector relist instead.
      // In ring mode a resume this proxy cannot place (its LIST went through
      // another proxy process, before a restart) is refused too: the ranges
      // may have moved meanwhile.
      // Once per lineage: a client that never lists (a GET, then a watch)
      // must not be refused forever.
      const resumed = lineage.consumeResume(cls.query.get("resourceVersion") ?? "");
      resumeEpoch = resumed.epoch;
      resumePoint = resumed.point;
      // Every such resume while a restart's caches reconnect (the first
      // minute with ranges), then once per lineage. Inside that minute, a
      // resume from a resourceVersion this process never left a cache at
      // (every LIST and every watch end is recorded) is one too, even where
      // the lineage has relisted since: another cache of it may not have.
      const inWindow = Date.now() < this.#refuseUnplacedUntil;
      const unplaced = this.#dynamic && (inWindow ? resumePoint === undefined : resumeEpoch === undefined && !lineage.unplacedRefused);
      if (unplaced) lineage.unplacedRefused = true;
      if (unplaced || (resumeEpoch !== undefined && resumeEpoch < this.#epoch)) {
        this.#statsFor(id).forcedRelists++;
        this.#opts.metrics.forcedRelists.inc({ resource: id });
        sendStatus(res, 410, `shardcar: shard ranges changed since this watch's list; relist required`, "Expired");
        return;
      }
    }
    // In flight until answered: a range change meanwhile must know of it.
    lineage.inflight++;
    let flying = true;
    const landed = (): void => {
      if (!flying) return;
      flying = false;
      lineage.inflight--;
      this.#lineages.touch(lineage);
    };
    res.on("close", landed);
    this.#state.set(req, { kind: cls.kind, request: cls, ranges: rw.ranges, sentSelector: rw.sentSelector, objectKey: rw.objectKey, proxyFilters: rw.proxyFilters, generation: own.generation, epoch: this.#epoch, query: rw.query, lineage, landed, resumeEpoch, resumePoint });
    this.#sharded.web(req, res);
  };

  /** Node `upgrade` handler: exec, attach and port-forward pass through. */
  readonly handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    this.#passthrough.ws(req, socket, head);
  };

  /** Ends every open watch and stops following ownership. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe();
    for (const w of [...this.#watches]) w.terminate("shardcar: proxy shutting down");
    this.#releaseHeld("proxy shutting down");
    if (this.#idleSweep !== undefined) clearInterval(this.#idleSweep);
    this.#passthrough.close();
    this.#sharded.close();
    this.#locks.close();
  }

  /** Renames the leader-election lock in the request; {@link #onLockResponse} renames it back. */
  #serveLock(req: IncomingMessage, res: ServerResponse, m: LockMatch, name: string, renamed: string): void {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (b: Buffer) => {
      size += b.length;
      if (size > MAX_LOCK_BODY_BYTES) {
        req.destroy();
        sendStatus(res, 413, "shardcar: leader-election lock request body too large", "RequestEntityTooLarge");
        return;
      }
      chunks.push(b);
    });
    req.on("end", () => {
      if (res.headersSent) return;
      const raw = Buffer.concat(chunks);
      // Creates and updates name the lock in the body too; a server refuses a
      // body whose name differs from the path's.
      const body = raw.length === 0 ? raw : (renameBody(raw, req.headers["content-type"], name, renamed) ?? raw);
      req.url = `${m.path}${m.query}`;
      if (req.method !== "GET" && req.method !== "DELETE") req.headers["content-length"] = String(body.length);
      delete req.headers["transfer-encoding"];
      this.#lockNames.set(res, { name, renamed });
      this.#locks.web(req, res, { buffer: Readable.from([body]) });
    });
  }

  readonly #lockNames = new WeakMap<ServerResponse, { name: string; renamed: string }>();

  #onLockResponse(proxyRes: IncomingMessage, res: ServerResponse): void {
    const names = this.#lockNames.get(res);
    const chunks: Buffer[] = [];
    let size = 0;
    proxyRes.on("data", (b: Buffer) => {
      size += b.length;
      if (size > MAX_LOCK_BODY_BYTES) {
        proxyRes.destroy();
        sendStatus(res, 502, "shardcar: leader-election lock response too large");
        return;
      }
      chunks.push(b);
    });
    proxyRes.on("error", () => res.destroy());
    proxyRes.on("end", () => {
      if (res.headersSent) return;
      const raw = Buffer.concat(chunks);
      const body = names === undefined ? raw : (renameBody(raw, proxyRes.headers["content-type"], names.renamed, names.name) ?? raw);
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(proxyRes.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
      headers["content-length"] = String(body.length);
      res.writeHead(proxyRes.statusCode ?? 502, headers);
      res.end(body);
    });
  }

  /**
   * Whether a watch of each resource recently passed an event whose shard
   * key value (uid, namespace or owner uid, per the resource's key) is
   * `key`; in labels mode, an event of that value's slot. Remembers the
   * last {@link RECENT_KEYS_PER_RESOURCE} events per resource.
   */
  delivered(key: string): Record<string, boolean> {
    const point = recordedPoint(this.#opts.filtering ?? SHARDSELECTOR, key);
    return Object.fromEntries([...this.#recent].map(([id, r]) => [id, point === undefined ? r.has(key) : r.hasHash(point.hi, point.lo)]));
  }

  /** Labels mode: an object without a readable slot label reached a filter and was dropped. Counted at once, not at the stream's end: it is in no cache. */
  #unlabelled(id: string): (object: string) => void {
    return (object) => {
      this.#opts.metrics.unlabelled.inc({ resource: id });
      this.#opts.logger.debug({ resource: id, object }, "dropped an object without a readable slot label");
    };
  }

  #recentFor(id: string): RecentKeys {
    let r = this.#recent.get(id);
    if (r === undefined) {
      r = new RecentKeys();
      this.#recent.set(id, r);
    }
    return r;
  }

  #statsFor(id: string): ResourceStats {
    let s = this.#stats.get(id);
    if (s === undefined) {
      s = { lists: 0, watches: 0, upstreamBytes: 0, clientBytes: 0, itemsKept: 0, itemsDropped: 0, eventsPassed: 0, eventsDropped: 0, syntheticBookmarks: 0, forcedRelists: 0, narrowedWatches: 0, syntheticDeletes: 0, errors: 0 };
      this.#stats.set(id, s);
    }
    return s;
  }

  /** A held request refused before it reached a lineage owes nothing (it never will list). */
  #answeredEarly(path: string, query: URLSearchParams, accept: string | undefined): void {
    const key = lineageKey(path, query, accept);
    if (this.#heldOwed.delete(key)) this.#relists.relisted(key, this.#epoch);
  }

  /** Serves the requests held for the first ranges, under whatever ranges hold now. */
  #releaseHeld(why: string): void {
    const held = this.#held;
    if (held === undefined) return;
    this.#held = undefined;
    if (held.length > 0) this.#opts.logger.info({ requests: held.length, why }, "serving the requests held for the first ranges");
    for (const h of held) h.release();
  }

  #onOwnership(next: Ownership, prev: Ownership | undefined): void {
    const m = this.#opts.metrics;
    m.ownedRatio.set(ratio(next.ranges));
    m.generation.set(next.generation);
    if (prev === undefined) {
      this.#ranges = next.ranges;
      return;
    }
    // Held requests are served under the first non-empty ranges, and that
    // generation is applied only once they listed. Not under an empty first
    // table: the informer would list nothing and might be between its LIST
    // and its WATCH, with nothing open to end, when its ranges arrive.
    const first = next.generation !== 0 && next.ranges.length > 0;
    if (first && this.#refuseUnplacedUntil === 0) this.#refuseUnplacedUntil = Date.now() + 60_000;
    const held = first && this.#held !== undefined ? this.#held.map((h) => h.lineage) : [];
    for (const r of held) this.#heldOwed.add(r);
    try {
      this.#changeRanges(next, prev, held);
    } finally {
      if (first) this.#releaseHeld(`generation ${next.generation}`);
    }
  }

  #changeRanges(next: Ownership, prev: Ownership, held: readonly string[]): void {
    const m = this.#opts.metrics;
    if (equal(next.ranges, this.#ranges)) {
      // Same ranges under a new generation (the ring moved elsewhere, or an
      // abandon re-committed ours): nothing to relist.
      this.#relists.begin(next.generation, this.#epoch, held);
      return;
    }
    const prevEpoch = this.#epoch;
    this.#ranges = next.ranges;
    const epoch = ++this.#epoch;
    const message = `shardcar: shard ranges changed (generation ${prev.generation} -> ${next.generation}); relist required`;
    const open = [...this.#watches].filter((w) => w.epoch < epoch && !w.doomed);
    const ending = this.#narrowInPlace(open, next.ranges, prevEpoch, epoch);
    // Every other open sharded watch was opened with the old selector: end it
    // with 410 Expired so the reflector relists under the new one. Its informer
    // replaces the store atomically, so the controller never sees an empty cache.
    const watched = new Set<string>(held);
    // A controller between its LIST and its WATCH has nothing open to end,
    // but its resume will get 410 and relist: the generation waits for that,
    // up to a bound, since a one-off LIST looks the same and never watches.
    const windowMs = this.#opts.betweenListAndWatchMs ?? 5000;
    for (const l of this.#lineages.betweenListAndWatch(prevEpoch, windowMs, this.#opts.watcherQuietMs ?? 65_000)) watched.add(l.key);
    const jitter = this.#opts.relistJitterMs ?? 0;
    const random = this.#opts.random ?? Math.random;
    for (const w of ending) {
      watched.add(w.lineage.key);
      w.doomed = true;
      const delay = jitter > 0 ? Math.floor(random() * jitter) : 0;
      if (delay === 0) w.terminate(message);
      else setTimeout(() => w.terminate(message), delay).unref();
      this.#statsFor(w.resource).forcedRelists++;
      m.forcedRelists.inc({ resource: w.resource });
    }
    this.#opts.logger.info({ generation: next.generation, epoch, owned: ratio(next.ranges), relisting: [...watched], narrowed: open.length - ending.length }, "owned ranges changed");
    this.#relists.begin(next.generation, epoch, watched);
  }

  /**
   * Every owed cache lineage is released once its client has gone quiet:
   * no open watch and nothing in flight for `windowMs`. A controller that is
   * relisting is never quiet that long (its LIST is in flight, then its
   * watch opens); a one-off LIST, a `kubectl get -w` that exits on its 410,
   * or a stopped informer never comes back, and must not hold the ring up.
   */
  #releaseIdle(windowMs: number, watcherMs: number): void {
    const now = Date.now();
    const pending = this.#relists.pending();
    for (const key of [...this.#owedSince.keys()]) if (!pending.includes(key)) this.#owedSince.delete(key);
    for (const key of pending) {
      const since = this.#owedSince.get(key) ?? now;
      this.#owedSince.set(key, since);
      const l = this.#lineages.find(key);
      if (l === undefined) {
        // Evicted, or a held request that never made one: the longer bound.
        if (now - since < watcherMs) continue;
      } else if (l.watchAttempts === 0) {
        // Never watched: an informer before its first watch (which follows
        // its LIST at once) or a one-off lister, which may list again and
        // again and never be quiet. A fixed bound from when it became owed,
        // but not while a LIST of it is in flight.
        if (l.openWatches > 0 || l.inflight > 0 || now - since < windowMs) continue;
      } else if (l.openWatches > 0 || l.inflight > 0 || (now - l.lastUsed < watcherMs && now - since < 2 * watcherMs)) continue;
      this.#owedSince.delete(key);
      this.#heldOwed.delete(key);
      this.#relists.relisted(key, this.#epoch);
    }
  }

  /**
   * Narrows what it can of `open` without a relist; returns the watches that
   * must end instead. A lineage narrows in place only when every one of its
   * open watches can: the new ranges lie inside each watch's ranges, its
   * index is complete and readable, its cache was at the previous epoch, and
   * the type of its objects is known. Its watches then get synthetic
   * DELETEDs for the indexed objects leaving the ranges, and filter with the
   * new ranges from the same point in their streams.
   */
  #narrowInPlace(open: readonly OpenWatch[], ranges: readonly Range[], prevEpoch: number, epoch: number): OpenWatch[] {
    if (this.#opts.syntheticDeletes !== true) return [...open];
    const byLineage = new Map<Lineage, OpenWatch[]>();
    for (const w of open) byLineage.set(w.lineage, [...(byLineage.get(w.lineage) ?? []), w]);
    const ending: OpenWatch[] = [];
    for (const [lineage, watches] of byLineage) {
      const why = !lineage.complete
        ? "no complete snapshot went through this proxy"
        : lineage.typeMeta === undefined
          ? "the type of its objects is unknown"
          : lineage.listEpoch !== prevEpoch
            ? "its cache is not of the previous ranges"
            : lineage.openWatches !== watches.length
              ? "another of its watches is ending"
              : watches.some((w) => w.epoch !== prevEpoch || difference(ranges, w.ranges).length > 0)
                ? "the ranges grow"
                : watches.some((w) => !w.narrowable())
                  ? "a watch is not between events past its initial events"
                  : undefined;
      if (why !== undefined) {
        this.#opts.logger.debug({ lineage: lineage.key, watches: watches.length, why }, "relisting instead of narrowing in place");
        ending.push(...watches);
        continue;
      }
      const leaving = lineage.leaving(ranges);
      let all = true;
      for (const w of watches) {
        if (w.narrow(ranges, leaving, epoch)) continue;
        all = false;
        ending.push(w);
      }
      // A watch that could not narrow relists, and its new LIST sets the epoch.
      if (all) lineage.listEpoch = epoch;
    }
    return ending;
  }

  #onShardedResponse(proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse): void {
    const st = this.#state.get(req);
    if (st === undefined) {
      proxyRes.destroy();
      sendStatus(res, 500, "shardcar: internal error: lost request state");
      return;
    }
    // Upstream must end with the client, even when the response itself
    // finished first (a filter may end a watch on its own).
    res.on("close", () => proxyRes.destroy());
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(proxyRes.headers)) {
      if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
    }
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
    headers["x-shardcar-generation"] = String(st.generation);
    if (st.kind === "list") this.#serveList(st, encoding, body, res, headers);
    else this.#serveWatch(st, encoding, body, res, headers);
  }

  #serveList(st: ShardedState, encoding: Encoding, proxyRes: Readable, res: ServerResponse, headers: Record<string, string | string[]>): void {
    const id = resourceId(st.request.resource);
    const filterOpts = {
      matcher: new HashMatcher(st.ranges),
      key: st.objectKey,
      onUnlabelled: this.#unlabelled(id),
      ...(st.sentSelector === undefined ? {} : { sentSelector: st.sentSelector }),
      ...(this.#opts.maxItemBytes === undefined ? {} : { maxItemBytes: this.#opts.maxItemBytes }),
    };
    const filter: Transform & { readonly stats: ListFilterStats } = encoding === "json" ? createJsonListFilter(filterOpts) : createProtoListFilter(filterOpts);
    let sink: ListSink | RvSink | undefined;
    if (this.#opts.syntheticDeletes === true || this.#dynamic) {
      // What the controller receives, not what upstream sent: the index is of
      // delivered objects (fast path included). Without synthetic deletes,
      // ring mode still reads the list's resourceVersion (see consumeResume).
      sink = this.#opts.syntheticDeletes === true ? new ListSink(st.lineage, st.query.get("continue") ?? undefined) : new RvSink();
      const tap = encoding === "json" ? createJsonListTap(sink, st.objectKey) : createProtoListTap(sink, st.objectKey);
      filter.on("data", (b: Buffer) => tap.write(b));
    }
    const done = (err: Error | null | undefined): void => {
      if (!err && sink?.rv !== undefined && !st.query.has("continue")) st.lineage.rememberList(sink.rv, st.epoch);
      this.#finishList(id, st, filter.stats, err, res);
      if (!err) sink?.finish();
      st.landed();
    };
    if (this.#opts.fallback === "fail") {
      this.#serveListOrRefuse(id, proxyRes, filter, res, headers, done);
      return;
    }
    res.writeHead(200, headers);
    pipeline(proxyRes, filter, res, done);
  }

  /**
   * fallback=fail: hold the filtered body back until it is clear whether the
   * server filtered. The fast path (shardInfo matched) streams at once; a body
   * from which the proxy had to drop anything becomes a 503.
   */
  #serveListOrRefuse(id: string, proxyRes: Readable, filter: Transform & { readonly stats: ListFilterStats }, res: ServerResponse, headers: Record<string, string | string[]>, done: (err: Error | null | undefined) => void): void {
    const limit = this.#opts.failBufferBytes ?? 64 * 1024 * 1024;
    const held: Buffer[] = [];
    let heldBytes = 0;
    let streaming = false;
    const refuse = (why: string): void => {
      this.#opts.metrics.fallbackRefusals.inc({ resource: id });
      proxyRes.destroy();
      filter.destroy();
      sendStatus(res, 503, `shardcar: the apiserver did not apply the shard selector for ${id} (${why}) and fallback=fail`, "ServiceUnavailable");
    };
    const startStreaming = (): void => {
      streaming = true;
      res.writeHead(200, headers);
      for (const b of held) res.write(b);
      held.length = 0;
    };
    filter.on("data", (chunk: Buffer) => {
      if (streaming) {
        if (!res.write(chunk)) {
          filter.pause();
          res.once("drain", () => filter.resume());
        }
        return;
      }
      if (filter.stats.path === "fast") {
        held.push(chunk);
        startStreaming();
        return;
      }
      if (filter.stats.dropped > 0) return refuse("items outside this shard were returned");
      held.push(chunk);
      heldBytes += chunk.length;
      if (heldBytes > limit) refuse(`no shardInfo within the first ${limit} bytes`);
    });
    pipeline(proxyRes, filter, (err) => {
      if (err) {
        done(err);
        return;
      }
      if (res.headersSent && !streaming) return;
      if (!streaming) {
        if (filter.stats.dropped > 0) {
          refuse("items outside this shard were returned");
          return;
        }
        startStreaming();
      }
      res.end();
      done(undefined);
    });
  }

  #finishList(id: string, st: ShardedState, s: ListFilterStats, err: Error | null | undefined, res: ServerResponse): void {
    const m = this.#opts.metrics;
    const stats = this.#statsFor(id);
    stats.upstreamBytes += s.bytesIn;
    stats.clientBytes += s.bytesOut;
    m.upstreamBytes.inc({ resource: id, class: "list" }, s.bytesIn);
    m.clientBytes.inc({ resource: id, class: "list" }, s.bytesOut);
    if (err) {
      stats.errors++;
      m.streamErrors.inc({ resource: id, class: "list" });
      this.#opts.logger.warn({ resource: id, err: err.message }, "list response ended with an error; aborting the client's response");
      // Never end cleanly: a cut chunked response fails in the client instead
      // of looking like a shorter, valid list.
      res.destroy(err);
      return;
    }
    stats.itemsKept += s.kept;
    stats.itemsDropped += s.dropped;
    const verdict: Verdict = st.proxyFilters ? "proxy" : s.serverFiltered;
    stats.lastVerdict = verdict;
    m.items.inc({ resource: id, outcome: "kept" }, s.kept);
    m.items.inc({ resource: id, outcome: "dropped" }, s.dropped);
    m.serverFiltered.inc({ resource: id, verdict });
    // The controller's cache is rebuilt from this list once it resumes
    // watching from it; the relist counts then (see #serveWatch).
    if (!st.query.has("continue")) {
      st.lineage.advance(st.epoch);
      if (this.#heldOwed.delete(st.lineage.key)) this.#relists.relisted(st.lineage.key, st.epoch);
    }
  }

  #serveWatch(st: ShardedState, encoding: Encoding, proxyRes: Readable, res: ServerResponse, headers: Record<string, string | string[]>): void {
    const id = resourceId(st.request.resource);
    st.landed();
    if (st.epoch < this.#epoch) {
      // Sent upstream under older ranges, answered after they changed: this
      // watch missed its narrowing or widening. It relists instead.
      proxyRes.destroy();
      this.#statsFor(id).forcedRelists++;
      this.#opts.metrics.forcedRelists.inc({ resource: id });
      res.writeHead(200, headers);
      res.end(watchErrorEvent(encoding, 410, "shardcar: shard ranges changed while this watch was being opened; relist required", "Expired"));
      return;
    }
    const q = st.query;
    const rv = q.get("resourceVersion");
    const initialEvents = isTrue(q.get("sendInitialEvents")) || rv === null || rv === "" || rv === "0";
    const watchList = isTrue(q.get("sendInitialEvents"));
    const recent = this.#recentFor(id);
    const matcherFor = (ranges: readonly Range[]): RecordingMatcher => new RecordingMatcher(this.#opts.unsafeSkipWatchFilter === true ? [FULL_RANGE] : ranges, recent);
    // The delivery tap runs inside the filter's push, so the index already
    // holds every event handed to the client when the ranges change.
    const sink = this.#opts.syntheticDeletes === true ? new WatchSink(st.lineage, watchList) : undefined;
    const tap = sink === undefined ? undefined : encoding === "json" ? createJsonWatchTap(sink, st.objectKey) : createProtoWatchTap(sink, st.objectKey);
    const filterOpts = {
      matcher: matcherFor(st.ranges),
      key: st.objectKey,
      onUnlabelled: this.#unlabelled(id),
      allowBookmarks: isTrue(q.get("allowWatchBookmarks")),
      initialEvents,
      ...(this.#opts.bookmarkIntervalMs === undefined ? {} : { bookmarkIntervalMs: this.#opts.bookmarkIntervalMs }),
      ...(tap === undefined ? {} : { onDeliver: (b: Buffer) => tap.write(b) }),
    };
    const filter: NarrowableWatchFilter =
      encoding === "json"
        ? createJsonWatchFilter({ ...filterOpts, ...(this.#opts.maxItemBytes === undefined ? {} : { maxEventBytes: this.#opts.maxItemBytes }) })
        : createProtoWatchFilter({ ...filterOpts, ...(this.#opts.maxItemBytes === undefined ? {} : { maxFrameBytes: this.#opts.maxItemBytes }) });
    const m = this.#opts.metrics;
    let finished = false;
    let endedByUs = false;
    // The client's resume point: the newest RV it was handed, or the one it resumed from.
    const clientRv = (): string | undefined => sink?.rv ?? (isResumingWatch(q) ? (rv ?? undefined) : undefined);
    const watch: OpenWatch = {
      resource: id,
      epoch: st.epoch,
      ranges: st.ranges,
      lineage: st.lineage,
      doomed: false,
      live: filter.stats,
      terminate: (message) => {
        if (finished) return;
        endedByUs = true;
        filter.unpipe(res);
        proxyRes.destroy();
        if (!res.writableEnded) res.end(watchErrorEvent(encoding, 410, message, "Expired"));
      },
      narrowable: () => !finished && sink !== undefined && sink.readable && filter.narrowable && clientRv() !== undefined,
      narrow: (ranges, leaving, epoch) => {
        const resumeAt = clientRv();
        const type = st.lineage.typeMeta;
        if (finished || sink === undefined || !sink.readable || resumeAt === undefined || type === undefined) return false;
        const events = leaving.map((o) => syntheticDelete(encoding, type, o, resumeAt));
        if (!filter.narrow(matcherFor(ranges), events)) return false;
        // A re-watch may arrive before this watch's end is recorded (a
        // client's timeout aborts and re-watches in one turn): its resume
        // point is of the new ranges from now on.
        if (st.resumePoint !== undefined && st.resumePoint.rv === resumeAt) st.resumePoint.epoch = epoch;
        else st.resumePoint = st.lineage.rememberList(resumeAt, epoch);
        watch.ranges = ranges;
        watch.epoch = epoch;
        const stats = this.#statsFor(id);
        stats.narrowedWatches++;
        stats.syntheticDeletes += events.length;
        m.narrowedWatches.inc({ resource: id });
        m.syntheticDeletes.inc({ resource: id }, events.length);
        return true;
      },
    };
    this.#watches.add(watch);
    st.lineage.openWatches++;
    st.lineage.watchOpens++;
    m.activeWatches.inc({ resource: id });
    if (watchList) {
      // A watch-list is a relist: done once its initial events are through,
      // and the cache it built is of this epoch's ranges.
      filter.once("initial-events-end", () => {
        sink?.initialEventsEnded();
        st.lineage.advance(st.epoch);
        this.#heldOwed.delete(st.lineage.key);
        this.#relists.relisted(st.lineage.key, st.epoch);
      });
    } else if (!isResumingWatch(q) || st.resumeEpoch === undefined || st.resumeEpoch === st.epoch) {
      // A watch from "now" with initial state, one resuming from a list of
      // this epoch, or one this proxy cannot place and let through (refused
      // once already): the cache is the new shard's from here on.
      this.#heldOwed.delete(st.lineage.key);
      this.#relists.relisted(st.lineage.key, st.epoch);
    }
    res.writeHead(200, headers);
    // Headers now, not with the first event: a reflector waits for them.
    res.flushHeaders();
    pipeline(proxyRes, filter, res, (err) => {
      finished = true;
      this.#watches.delete(watch);
      // Its re-watch resumes from where this one left the cache, under the
      // epoch it reached (narrowings included); not after the proxy's 410,
      // which makes the client relist.
      const endRv = clientRv();
      if (!endedByUs && endRv !== undefined) st.lineage.rememberWatchEnd(endRv, watch.epoch, st.resumePoint);
      st.lineage.openWatches--;
      this.#lineages.touch(st.lineage);
      m.activeWatches.dec({ resource: id });
      const s = filter.stats;
      const stats = this.#statsFor(id);
      stats.upstreamBytes += s.bytesIn;
      stats.clientBytes += s.bytesOut;
      stats.eventsPassed += s.passed;
      stats.eventsDropped += s.dropped;
      stats.syntheticBookmarks += s.syntheticBookmarks;
      m.upstreamBytes.inc({ resource: id, class: "watch" }, s.bytesIn);
      m.clientBytes.inc({ resource: id, class: "watch" }, s.bytesOut);
      m.watchEvents.inc({ resource: id, outcome: "passed" }, s.passed);
      m.watchEvents.inc({ resource: id, outcome: "dropped" }, s.dropped);
      m.syntheticBookmarks.inc({ resource: id }, s.syntheticBookmarks);
      if (s.errors > 0) {
        stats.errors += s.errors;
        m.streamErrors.inc({ resource: id, class: "watch" }, s.errors);
      }
      if (err && !res.writableEnded) res.destroy();
    });
  }
}
