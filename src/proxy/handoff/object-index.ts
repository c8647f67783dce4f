/**
 * What each controller cache holds, as far as the proxy delivered it: the
 * index behind narrowing without a relist (docs/rings.md, "Narrowing without
 * a relist"). Only objects: which caches owe a relist, resume points and
 * epochs are the handoff ledger's (`src/proxy/handoff/ledger/`).
 *
 * A *lineage* is one cache's view of a resource (see `lineageKey`). Lists
 * and watches of a lineage feed its index through taps on their output. The
 * index only has to be a superset of every cache of the lineage: a synthetic
 * DELETED for an object a cache does not hold is a no-op for an informer,
 * while a missing one would leave an object of another shard in a cache. So
 * entries are added freely, removed only by a delivered DELETED or by a
 * sweep after a complete snapshot (an unpaginated LIST, the last page of a
 * paginated one, or a watch-list's initial events), and an index is trusted
 * only once such a snapshot went through this proxy.
 *
 * Each entry carries its key's point in the keyspace as the tap read it
 * (`keyHi`/`keyLo`: the hash of its uid, namespace or owner, or its slot's
 * first hash), so the index never derives a key itself: `leaving()` tests
 * exactly what the filter matched.
 */
import { HashMatcher, type Range } from "../../shard/range.ts";
import type { DeliveredObject, TapSink } from "../scan/tap.ts";
import type { TypeMeta } from "./synthetic-delete.ts";
import { entryOf } from "../../map-entry.ts";

/**
 * How the index learns whether a snapshot had its lineage to itself: the
 * ledger's records of open watches, read, never counted here (the ledger
 * is the one place that knows which watches are open).
 */
export interface WatchPresence {
  /** Watches of the lineage being served now. */
  openWatches(lineage: string): number;
  /** Watches of the lineage ever opened (a sequence). */
  watchesOpened(lineage: string): number;
}

interface Entry extends DeliveredObject {
  uid: string;
  keyHi: number;
  keyLo: number;
  /** The lineage clock when the entry was last delivered. */
  stamp: number;
}

/** Narrowings kept per lineage for resumes (see {@link DeliveredIndex.recordNarrowing}). */
export const KEPT_NARROWINGS = 4;
/** Lineages whose narrowings are kept, the least recently narrowed forgotten first. */
export const KEPT_NARROWED_LINEAGES = 256;

interface KeptNarrowing {
  readonly rv: string;
  readonly type: TypeMeta;
  readonly objects: readonly DeliveredObject[];
}

/** DELETEDs a resuming watch is sent again: the objects, and the kind their events name. */
export interface Resend {
  readonly type: TypeMeta;
  readonly objects: readonly DeliveredObject[];
}

/**
 * Whether a cache at resourceVersion `rv` may predate an event stamped `at`:
 * true when `rv` is at or before `at`. Kubernetes calls resourceVersions
 * opaque, but every apiserver backed by etcd gives decimal integers; for any
 * other form only equality is known.
 */
export function atOrBefore(rv: string, at: string): boolean {
  if (rv === at) return true;
  if (!/^[0-9]+$/.test(rv) || !/^[0-9]+$/.test(at)) return false;
  return rv.length < at.length || (rv.length === at.length && rv < at);
}

/** One lineage's delivered objects. */
export class LineageIndex {
  /** A complete snapshot went through this proxy since the index was last dropped. */
  complete = false;
  typeMeta: TypeMeta | undefined;
  readonly #objects = new Map<string, Entry>();
  #clock = 0;
  /** A paginated LIST in progress: where its snapshot began, and the token of its next page. */
  #chain: { start: number; token: string } | undefined;

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

  /** The snapshot begun at `start` is complete: whatever was not delivered since is gone from every cache rebuilt from it. */
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

  /** Forgets everything: the caches may hold what it never saw. */
  drop(): void {
    this.#objects.clear();
    this.complete = false;
    this.#chain = undefined;
  }

  /** Whether an object of this namespace/name is indexed. */
  holds(namespace: string, name: string): boolean {
    return this.#objects.has(`${namespace}/${name}`);
  }

  /** Indexed objects whose key (as the tap read it) is outside `ranges`, in no particular order. */
  leaving(ranges: readonly Range[]): DeliveredObject[] {
    const m = new HashMatcher(ranges);
    const out: DeliveredObject[] = [];
    for (const e of this.#objects.values()) if (!m.matchesParts(e.keyHi, e.keyLo)) out.push(e);
    return out;
  }
}

/** Every lineage's index; lineages come and go as the ledger says (`drop`). */
export class DeliveredIndex {
  readonly presence: WatchPresence;
  readonly #byKey = new Map<string, LineageIndex>();
  readonly #narrowings = new Map<string, readonly KeptNarrowing[]>();

  constructor(presence: WatchPresence) {
    this.presence = presence;
  }

  of(lineage: string): LineageIndex {
    return entryOf(this.#byKey, lineage, () => new LineageIndex());
  }

  /** Whether narrowing `lineage` in place may rely on its index: complete, and of a known kind. */
  trusted(lineage: string): boolean {
    const l = this.#byKey.get(lineage);
    return l !== undefined && l.complete && l.typeMeta !== undefined;
  }

  /** Every lineage {@link trusted} now. */
  *trustedLineages(): Iterable<string> {
    for (const key of this.#byKey.keys()) if (this.trusted(key)) yield key;
  }

  find(lineage: string): LineageIndex | undefined {
    return this.#byKey.get(lineage);
  }

  /**
   * The lineage's watches were narrowed: DELETEDs for `objects`, stamped
   * `rv` or earlier, were written to their clients. Writing is not reading:
   * a client cut before it read them (its connection reset, its inactivity
   * timer firing in the same turn) resumes from `rv` or an earlier event,
   * its cache still holding them, and nothing would ever delete them. So
   * they are kept, for {@link leftSince}: apart from the lineage's index,
   * which an idle prune or an unreadable stream drops while the ledger still
   * places that client's resume, and past any snapshot, which may be another
   * cache's of the same lineage.
   */
  recordNarrowing(lineage: string, rv: string, type: TypeMeta, objects: readonly DeliveredObject[]): void {
    if (objects.length === 0) return;
    const kept = [...(this.#narrowings.get(lineage) ?? []), { rv, type, objects }].slice(-KEPT_NARROWINGS);
    this.#narrowings.delete(lineage);
    this.#narrowings.set(lineage, kept);
    for (const key of this.#narrowings.keys()) {
      if (this.#narrowings.size <= KEPT_NARROWED_LINEAGES) break;
      this.#narrowings.delete(key);
    }
  }

  /**
   * Objects a narrowing of `lineage` sent DELETEDs for at or after
   * resourceVersion `rv`, still outside `ranges` and not indexed again: what
   * a cache resuming from `rv` may hold although it must not. A DELETED for
   * an object a cache does not hold is a no-op for informers (client-go's
   * DeltaFIFO, client-node's cache), so sending them again is safe.
   */
  leftSince(lineage: string, rv: string, ranges: readonly Range[]): Resend | undefined {
    const m = new HashMatcher(ranges);
    const index = this.#byKey.get(lineage);
    const out = new Map<string, DeliveredObject>();
    let type: TypeMeta | undefined;
    for (const n of this.#narrowings.get(lineage) ?? []) {
      if (!atOrBefore(rv, n.rv)) continue;
      type = n.type;
      for (const o of n.objects) if (!m.matchesParts(o.keyHi, o.keyLo) && index?.holds(o.namespace, o.name) !== true) out.set(`${o.namespace}/${o.name}`, o);
    }
    return type === undefined || out.size === 0 ? undefined : { type, objects: [...out.values()] };
  }

  /** Forgets a lineage's index (idle for long, or evicted by the ledger). */
  drop(lineage: string): void {
    this.#byKey.delete(lineage);
  }

  /** Indexed objects over all lineages, for metrics. */
  indexed(): number {
    let n = 0;
    for (const l of this.#byKey.values()) n += l.size;
    return n;
  }
}

/** Feeds a lineage's index from one LIST response; see {@link DeliveredIndex}. */
export class ListSink implements TapSink {
  readonly #index: LineageIndex;
  readonly #lineage: string;
  readonly #presence: WatchPresence;
  readonly #start: number | undefined;
  readonly #opens: number;
  readonly #alone: boolean;
  #token: string | undefined;
  #unreadable = false;
  /** The list's resourceVersion, once seen. */
  rv: string | undefined;

  /** `continueToken`: the request's `continue` parameter, when it asks for a later page. */
  constructor(index: DeliveredIndex, lineage: string, continueToken: string | undefined) {
    this.#index = index.of(lineage);
    this.#lineage = lineage;
    this.#presence = index.presence;
    this.#start = continueToken === undefined ? this.#index.beginSnapshot() : this.#index.chainStart(continueToken);
    this.#opens = this.#presence.watchesOpened(lineage);
    this.#alone = this.#presence.openWatches(lineage) === 0;
  }
  upsert(obj: DeliveredObject): void {
    if (!this.#unreadable) this.#index.upsert(obj);
  }
  remove(): void {}
  typeMeta(apiVersion: string, kind: string): void {
    this.#index.typeMeta = { apiVersion, kind };
  }
  resourceVersion(rv: string): void {
    this.rv = rv;
  }
  continueToken(token: string): void {
    this.#token = token;
  }
  unreadable(): void {
    this.#unreadable = true;
    this.#index.drop();
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
    const alone = this.#alone && this.#presence.openWatches(this.#lineage) === 0 && this.#presence.watchesOpened(this.#lineage) === this.#opens;
    if (this.#token !== undefined) {
      if (alone) this.#index.chain(this.#start, this.#token);
    } else if (alone) this.#index.completeSnapshot(this.#start);
  }
}

/** Feeds a lineage's index from one WATCH stream, and remembers the client's resourceVersion. */
export class WatchSink implements TapSink {
  readonly #index: LineageIndex;
  readonly #lineage: string;
  readonly #presence: WatchPresence;
  /** The newest resourceVersion delivered on this stream, if any. */
  rv: string | undefined;
  #unreadable = false;
  readonly #snapshot: number | undefined;
  readonly #opens: number;
  readonly #alone: boolean;

  /** `snapshot`: a watch-list, whose initial events rebuild the cache. Made before the ledger records the watch open. */
  constructor(index: DeliveredIndex, lineage: string, snapshot: boolean) {
    this.#index = index.of(lineage);
    this.#lineage = lineage;
    this.#presence = index.presence;
    this.#snapshot = snapshot ? this.#index.beginSnapshot() : undefined;
    this.#opens = this.#presence.watchesOpened(lineage);
    this.#alone = this.#presence.openWatches(lineage) === 0;
  }
  get readable(): boolean {
    return !this.#unreadable;
  }
  get typeMetaOf(): TypeMeta | undefined {
    return this.#index.typeMeta;
  }
  upsert(obj: DeliveredObject): void {
    if (!this.#unreadable) this.#index.upsert(obj);
  }
  remove(namespace: string, name: string): void {
    if (!this.#unreadable) this.#index.remove(namespace, name);
  }
  typeMeta(apiVersion: string, kind: string): void {
    this.#index.typeMeta = { apiVersion, kind };
  }
  resourceVersion(rv: string): void {
    this.rv = rv;
  }
  continueToken(): void {}
  unreadable(): void {
    this.#unreadable = true;
    this.#index.drop();
  }
  /** The watch-list's initial events are through; a snapshot only if this watch had the lineage to itself (see ListSink.finish). */
  initialEventsEnded(): void {
    const alone = this.#alone && this.#presence.openWatches(this.#lineage) === 1 && this.#presence.watchesOpened(this.#lineage) === this.#opens + 1;
    if (this.#snapshot !== undefined && !this.#unreadable && alone) this.#index.completeSnapshot(this.#snapshot);
  }
}
