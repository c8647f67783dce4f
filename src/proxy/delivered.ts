/**
 * What each controller cache holds, as far as the proxy delivered it: the
 * index behind narrowing without a relist (docs/rings.md, "Narrowing without
 * a relist").
 *
 * A *lineage* is one cache's view of a resource: the same path (resource and
 * namespace), label and field selectors, and `as=` transform. Lists and
 * watches of a lineage feed its index through taps on their output. The
 * index only has to be a superset of every cache of the lineage: a synthetic
 * DELETED for an object a cache does not hold is a no-op for an informer,
 * while a missing one would leave an object of another shard in a cache. So
 * entries are added freely, removed only by a delivered DELETED or by a
 * sweep after a complete snapshot (an unpaginated LIST, the last page of a
 * paginated one, or a watch-list's initial events), and an index is trusted
 * (`complete`) only once such a snapshot went through this proxy.
 */
import { HashMatcher, type Range } from "../shard/range.ts";
import type { DeliveredObject, TapSink } from "./scan/tap.ts";
import type { TypeMeta } from "./synthetic-delete.ts";

interface Entry extends DeliveredObject {
  uid: string;
  keyHi: number;
  keyLo: number;
  /** The lineage clock when the entry was last delivered. */
  stamp: number;
}

/** An index idle this long (no open watch, no request) is dropped; its lineage relists on the next narrowing. */
export const IDLE_INDEX_MS = 10 * 60 * 1000;
/** Lineages remembered at most; the least recently used without an open watch go first. */
export const MAX_LINEAGES = 1024;
/** LIST resourceVersions remembered per lineage; a resume comes right after its LIST. */
const MAX_LIST_RVS = 32;
const MAX_LISTS_PER_RV = 8;

/** A cache of a lineage at a resourceVersion, under a range epoch; used once a resume continued it. */
export interface ResumePoint {
  readonly rv: string;
  epoch: number;
  used: boolean;
}

export class Lineage {
  readonly key: string;
  /** The sharded resource's id (`pods`, `widgets.example.com`). */
  readonly resource: string;
  /** Range epoch the lineage's cache was last rebuilt or narrowed under (see ShardProxy). */
  listEpoch: number | undefined;
  /** The index holds at least what any cache of this lineage holds. */
  complete = false;
  typeMeta: TypeMeta | undefined;
  openWatches = 0;
  /** Watches ever opened (served), to tell whether a snapshot had the lineage to itself. */
  watchOpens = 0;
  /** WATCH requests ever made, served or refused: a lineage that tried is a reflector's. */
  watchAttempts = 0;
  /** Requests of this lineage sent upstream and not yet answered (lists: until served whole). */
  inflight = 0;
  /** When a request of this lineage last started or ended (ms). */
  lastUsed: number;
  readonly #objects = new Map<string, Entry>();
  #clock = 0;
  /** A paginated LIST in progress: where its snapshot began, and the token of its next page. */
  #chain: { start: number; token: string } | undefined;
  /**
   * Range epochs of recent LISTs, by the resourceVersion a watch resumes
   * from, oldest first. Several LISTs (the informer's, a one-off of the same
   * query) can answer at one resourceVersion on a quiet resource; each
   * resume uses up the oldest entry not yet used.
   */
  readonly #listRvs = new Map<string, ResumePoint[]>();
  /** A resume this proxy could not place was refused once already (see ShardProxy). */
  unplacedRefused = false;

  constructor(key: string, resource: string, now: number) {
    this.key = key;
    this.resource = resource;
    this.lastUsed = now;
  }

  get size(): number {
    return this.#objects.size;
  }

  upsert(obj: DeliveredObject): void {
    const id = `${obj.namespace}/${obj.name}`;
    const e = this.#objects.get(id);
    const stamp = ++this.#clock;
    if (e === undefined) this.#objects.set(id, { namespace: obj.namespace, name: obj.name, uid: obj.uid, keyHi: obj.keyHi, keyLo: obj.keyLo, stamp });
    else {
      e.stamp = stamp;
      if (obj.uid !== "") e.uid = obj.uid;
      // An owner key moves with the object's controller reference: the cache holds the latest.
      e.keyHi = obj.keyHi;
      e.keyLo = obj.keyLo;
    }
  }

  remove(namespace: string, name: string): void {
    this.#objects.delete(`${namespace}/${name}`);
  }

  /** A snapshot (a full LIST or a watch-list) starts; returns its start stamp. */
  beginSnapshot(): number {
    return ++this.#clock;
  }

  /**
   * The snapshot begun at `start` is complete: whatever was not delivered
   * since is gone from every cache rebuilt from it.
   */
  completeSnapshot(start: number): void {
    for (const [id, e] of this.#objects) if (e.stamp < start) this.#objects.delete(id);
    this.complete = true;
  }

  /** Continues a paginated snapshot; the page answering `token` resumes it. */
  chain(start: number, token: string): void {
    this.#chain = { start, token };
  }

  /** The start of the paginated snapshot whose next page is `token`, if it is the one in progress. */
  chainStart(token: string): number | undefined {
    return this.#chain?.token === token ? this.#chain.start : undefined;
  }

  /**
   * A cache of this lineage is at `rv` under range epoch `epoch`: a LIST
   * answered there, or a watch was narrowed in place at that resume point.
   */
  rememberList(rv: string, epoch: number): ResumePoint {
    const entries = this.#listRvs.get(rv) ?? [];
    this.#listRvs.delete(rv);
    const point: ResumePoint = { rv, epoch, used: false };
    entries.push(point);
    if (entries.length > MAX_LISTS_PER_RV) entries.shift();
    this.#listRvs.set(rv, entries);
    if (this.#listRvs.size > MAX_LIST_RVS) this.#listRvs.delete(this.#listRvs.keys().next().value as string);
    return point;
  }

  /**
   * A watch of this lineage ended (not by the proxy's 410): its cache is at
   * `rv` under `epoch`. Its re-watch resumes from there. `own` is the point
   * the watch resumed from, updated in place when it is the same RV so
   * repeated watches do not pile entries up.
   */
  rememberWatchEnd(rv: string, epoch: number, own: ResumePoint | undefined): void {
    if (own !== undefined && own.rv === rv && this.#listRvs.get(rv)?.includes(own) === true) {
      own.epoch = epoch;
      own.used = false;
      return;
    }
    this.rememberList(rv, epoch);
  }

  /**
   * The range epoch of the cache a watch resuming from `rv` continues, and
   * uses that LIST up: the oldest unused LIST that answered at `rv` (a
   * one-off LIST of the same query must not stand in for the informer's
   * own), else the newest used one, else the lineage's newest epoch (a
   * resume from an event's resourceVersion continues the last watch).
   * Call once per resume.
   */
  consumeResume(rv: string): { epoch: number | undefined; point: ResumePoint | undefined } {
    const entries = this.#listRvs.get(rv);
    if (entries === undefined || entries.length === 0) return { epoch: this.listEpoch, point: undefined };
    const unused = entries.find((e) => !e.used);
    if (unused === undefined) {
      const newest = entries[entries.length - 1] as ResumePoint;
      return { epoch: newest.epoch, point: newest };
    }
    unused.used = true;
    return { epoch: unused.epoch, point: unused };
  }

  /** Moves the lineage's newest epoch forward (never back: a LIST sent before a change may land after it). */
  advance(epoch: number): void {
    if (this.listEpoch === undefined || epoch > this.listEpoch) this.listEpoch = epoch;
  }

  /** Forgets the index: the caches may hold what it never saw. */
  drop(): void {
    this.#objects.clear();
    this.complete = false;
    this.#chain = undefined;
  }

  /** Indexed objects whose key (as the tap read it) is outside `ranges`, in no particular order. */
  leaving(ranges: readonly Range[]): DeliveredObject[] {
    const m = new HashMatcher(ranges);
    const out: DeliveredObject[] = [];
    for (const e of this.#objects.values()) if (!m.matchesParts(e.keyHi, e.keyLo)) out.push(e);
    return out;
  }
}

/** Feeds a lineage from one LIST response; see {@link Lineage}. */
export class ListSink implements TapSink {
  readonly #lineage: Lineage;
  readonly #start: number | undefined;
  readonly #opens: number;
  readonly #alone: boolean;
  #token: string | undefined;
  #unreadable = false;
  /** The list's resourceVersion, once seen. */
  rv: string | undefined;

  /** `continueToken`: the request's `continue` parameter, when it asks for a later page. */
  constructor(lineage: Lineage, continueToken: string | undefined) {
    this.#lineage = lineage;
    this.#start = continueToken === undefined ? lineage.beginSnapshot() : lineage.chainStart(continueToken);
    this.#opens = lineage.watchOpens;
    this.#alone = lineage.openWatches === 0;
  }
  upsert(obj: DeliveredObject): void {
    if (!this.#unreadable) this.#lineage.upsert(obj);
  }
  remove(): void {}
  typeMeta(apiVersion: string, kind: string): void {
    this.#lineage.typeMeta = { apiVersion, kind };
  }
  resourceVersion(rv: string): void {
    this.rv = rv;
  }
  continueToken(token: string): void {
    this.#token = token;
  }
  unreadable(): void {
    this.#unreadable = true;
    this.#lineage.drop();
  }
  /**
   * The response was delivered whole. It completes a snapshot (and sweeps)
   * only if no watch of the lineage was open from its start to now: then it
   * is the relist of the lineage's one cache. Otherwise it may be a one-off
   * LIST whose snapshot is older than what a running watch delivered, and
   * its items are only added.
   */
  finish(): void {
    if (this.#unreadable || this.#start === undefined) return;
    const alone = this.#alone && this.#lineage.openWatches === 0 && this.#lineage.watchOpens === this.#opens;
    if (this.#token !== undefined) {
      if (alone) this.#lineage.chain(this.#start, this.#token);
    } else if (alone) this.#lineage.completeSnapshot(this.#start);
  }
}

/** Only the list's resourceVersion, for ring mode without synthetic deletes (no index). */
export class RvSink implements TapSink {
  rv: string | undefined;
  upsert(): void {}
  remove(): void {}
  typeMeta(): void {}
  resourceVersion(rv: string): void {
    this.rv = rv;
  }
  continueToken(): void {}
  unreadable(): void {}
  finish(): void {}
}

/** Feeds a lineage from one WATCH stream, and remembers the client's resourceVersion. */
export class WatchSink implements TapSink {
  readonly lineage: Lineage;
  /** The newest resourceVersion delivered on this stream, if any. */
  rv: string | undefined;
  #unreadable = false;
  readonly #snapshot: number | undefined;
  readonly #opens: number;
  readonly #alone: boolean;

  /** `snapshot`: a watch-list, whose initial events rebuild the cache. Made before the watch counts as open. */
  constructor(lineage: Lineage, snapshot: boolean) {
    this.lineage = lineage;
    this.#snapshot = snapshot ? lineage.beginSnapshot() : undefined;
    this.#opens = lineage.watchOpens;
    this.#alone = lineage.openWatches === 0;
  }
  get readable(): boolean {
    return !this.#unreadable;
  }
  upsert(obj: DeliveredObject): void {
    if (!this.#unreadable) this.lineage.upsert(obj);
  }
  remove(namespace: string, name: string): void {
    if (!this.#unreadable) this.lineage.remove(namespace, name);
  }
  typeMeta(apiVersion: string, kind: string): void {
    this.lineage.typeMeta = { apiVersion, kind };
  }
  resourceVersion(rv: string): void {
    this.rv = rv;
  }
  continueToken(): void {}
  unreadable(): void {
    this.#unreadable = true;
    this.lineage.drop();
  }
  /** The watch-list's initial events are through; a snapshot only if this watch had the lineage to itself (see ListSink.finish). */
  initialEventsEnded(): void {
    const alone = this.#alone && this.lineage.openWatches === 1 && this.lineage.watchOpens === this.#opens + 1;
    if (this.#snapshot !== undefined && !this.#unreadable && alone) this.lineage.completeSnapshot(this.#snapshot);
  }
}

/**
 * How long a lineage with nothing open may stay quiet and still be a cache
 * about to come back: a lineage that has watched belongs to a reflector,
 * which may wait up to a minute between its LIST and WATCH (client-node:
 * 1 s doubling to 30 s) or before relisting after a 410 (client-go: 0.8 s
 * doubling to 30 s, jittered up to 2×); one that never watched is a one-off.
 */
export function quietBound(l: Lineage, windowMs: number, watcherWindowMs: number): number {
  return l.watchAttempts > 0 ? watcherWindowMs : windowMs;
}

/** Every lineage the proxy has seen, bounded (see {@link MAX_LINEAGES}, {@link IDLE_INDEX_MS}). */
export class Lineages {
  readonly #byKey = new Map<string, Lineage>();
  readonly #now: () => number;
  #lastPrune = 0;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  get(key: string, resource: string): Lineage {
    const now = this.#now();
    if (now - this.#lastPrune > 60_000) this.prune(now);
    let l = this.#byKey.get(key);
    if (l === undefined) {
      // Evict before adding, so the new lineage is never the one evicted.
      if (this.#byKey.size >= MAX_LINEAGES) this.#evict();
      l = new Lineage(key, resource, now);
      this.#byKey.set(key, l);
    }
    l.lastUsed = now;
    return l;
  }

  /** Drops the indexes of lineages idle for {@link IDLE_INDEX_MS}. */
  prune(now: number): void {
    this.#lastPrune = now;
    for (const l of this.#byKey.values()) if (l.openWatches === 0 && l.inflight === 0 && now - l.lastUsed > IDLE_INDEX_MS && (l.complete || l.size > 0)) l.drop();
  }

  #evict(): void {
    let oldest: Lineage | undefined;
    for (const l of this.#byKey.values()) if (l.openWatches === 0 && l.inflight === 0 && (oldest === undefined || l.lastUsed < oldest.lastUsed)) oldest = l;
    if (oldest !== undefined) this.#byKey.delete(oldest.key);
  }

  /** The lineage with this key, if known; never creates one. */
  find(key: string): Lineage | undefined {
    return this.#byKey.get(key);
  }

  /** Stamps `l` as used now (a request of it ended). */
  touch(l: Lineage): void {
    l.lastUsed = this.#now();
  }

  /**
   * Lineages that may be between a LIST and the WATCH that resumes from it
   * when ranges change: no open watch, and a LIST in flight or a request
   * within the last `windowMs` while its cache was of epoch `epoch`. Their
   * controllers are about to resume (and get 410) or are one-off listers;
   * the caller cannot tell which.
   */
  betweenListAndWatch(epoch: number, windowMs: number, watcherWindowMs: number): Lineage[] {
    const now = this.#now();
    return [...this.#byKey.values()].filter((l) => l.openWatches === 0 && (l.inflight > 0 || (l.listEpoch === epoch && now - l.lastUsed < quietBound(l, windowMs, watcherWindowMs))));
  }

  /** Indexed objects over all lineages, for metrics. */
  indexed(): number {
    let n = 0;
    for (const l of this.#byKey.values()) n += l.size;
    return n;
  }
}

/** The lineage key of a sharded request: its path, its selectors and its `as=` transform. */
export function lineageKey(path: string, query: URLSearchParams, accept: string | undefined): string {
  // client-go's metadata client asks for as=PartialObjectMetadataList on
  // LIST and as=PartialObjectMetadata on WATCH: one cache, one lineage.
  const as = (/;\s*as=([^;,\s]+)/i.exec(accept ?? "")?.[1] ?? "").replace(/List$/, "");
  return JSON.stringify([path, query.get("labelSelector") ?? "", query.get("fieldSelector") ?? "", as]);
}
