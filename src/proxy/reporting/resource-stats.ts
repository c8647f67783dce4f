/**
 * What the proxy counts: per-resource tallies (the demo, `/debug/shardcar`,
 * tests) and the Prometheus metrics, taken from the filters' own tallies,
 * never per item. No decision reads these.
 *
 * A response's bytes and events count while it streams, not when it ends:
 * a watch (a watch-list's initial events included) may stay open for the
 * pod's whole life, and a 100 MB list takes seconds. Each open stream is
 * folded into the totals at every scrape and snapshot, and its remainder
 * when it ends, so a scrape reads what has crossed the proxy so far.
 */
import { recordedPoint, type ProxyFiltering } from "../request/filtering.ts";
import type { ProxyMetrics, Verdict } from "./metrics.ts";
import { RecentKeys } from "./recent-keys.ts";
import { contains, type Range } from "../../shard/range.ts";
import { entryOf } from "../../map-entry.ts";
import type { ListFilterStats, WatchFilterStats } from "../scan/filter-contract.ts";

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
  /** DELETEDs sent again to resuming watches (see `DeliveredIndex.leftSince`). */
  resentDeletes: number;
  errors: number;
  lastVerdict?: Verdict;
}

/** A watch being served, as accounting sees it: whose, and its filter's live tallies. */
export interface LiveWatch {
  readonly resource: string;
  readonly live: WatchFilterStats;
}

/** The counts a stream adds to the totals while it is open. */
interface Streamed {
  bytesIn: number;
  bytesOut: number;
  passed: number;
  dropped: number;
  syntheticBookmarks: number;
}

/** A list or watch response being served: its filter's live tallies and how much of them the totals already hold. */
export interface OpenStream {
  readonly kind: "list" | "watch";
  readonly resource: string;
  readonly stats: ListFilterStats | WatchFilterStats;
  readonly folded: Streamed;
}

function streamedOf(st: ListFilterStats | WatchFilterStats): Streamed {
  return "passed" in st ? st : { bytesIn: st.bytesIn, bytesOut: st.bytesOut, passed: 0, dropped: 0, syntheticBookmarks: 0 };
}

export class Accounting {
  readonly metrics: ProxyMetrics;
  readonly #stats = new Map<string, ResourceStats>();
  readonly #recent = new Map<string, RecentKeys>();
  readonly #open = new Set<OpenStream>();

  /** `live`: the watches being served now (for the open-watches gauge). */
  constructor(metrics: ProxyMetrics, live: () => Iterable<LiveWatch>) {
    this.metrics = metrics;
    metrics.beforeScrape(() => this.#foldOpen());
    // Open watches are read off the served watches at scrape time, never
    // counted up and down.
    metrics.openWatchesFrom(() => {
      const n = new Map<string, number>();
      for (const w of live()) n.set(w.resource, (n.get(w.resource) ?? 0) + 1);
      return n;
    });
  }

  /** Per-resource tallies since start, including what open lists and watches have streamed so far. A snapshot. */
  snapshot(): ReadonlyMap<string, Readonly<ResourceStats>> {
    this.#foldOpen();
    const out = new Map<string, ResourceStats>();
    for (const [id, s] of this.#stats) out.set(id, { ...s });
    return out;
  }

  /** A list or watch response starts streaming through `stats` (its filter's, updated in place). */
  streamStarted(kind: "list" | "watch", id: string, stats: ListFilterStats | WatchFilterStats): OpenStream {
    this.#for(id);
    const open: OpenStream = { kind, resource: id, stats, folded: { bytesIn: 0, bytesOut: 0, passed: 0, dropped: 0, syntheticBookmarks: 0 } };
    this.#open.add(open);
    return open;
  }

  #foldOpen(): void {
    for (const o of this.#open) this.#fold(o);
  }

  /**
   * Adds what `o` streamed since it was last folded. Only growth is added:
   * the counters are monotonic, and a JSON watch line that turns out
   * unparsable takes its events back from the filter's tallies (the stream
   * then ends with an ERROR), so those few may stay counted.
   */
  #fold(o: OpenStream): void {
    const now = streamedOf(o.stats);
    const f = o.folded;
    const d = (k: keyof Streamed): number => {
      const delta = now[k] - f[k];
      if (delta <= 0) return 0;
      f[k] = now[k];
      return delta;
    };
    const bytesIn = d("bytesIn");
    const bytesOut = d("bytesOut");
    const passed = d("passed");
    const dropped = d("dropped");
    const bookmarks = d("syntheticBookmarks");
    if (bytesIn + bytesOut + passed + dropped + bookmarks === 0) return;
    const s = this.#for(o.resource);
    const m = this.metrics;
    const labels = { resource: o.resource, class: o.kind };
    s.upstreamBytes += bytesIn;
    s.clientBytes += bytesOut;
    if (bytesIn > 0) m.upstreamBytes.inc(labels, bytesIn);
    if (bytesOut > 0) m.clientBytes.inc(labels, bytesOut);
    if (o.kind === "list") return;
    s.eventsPassed += passed;
    s.eventsDropped += dropped;
    s.syntheticBookmarks += bookmarks;
    if (passed > 0) m.watchEvents.inc({ resource: o.resource, outcome: "passed" }, passed);
    if (dropped > 0) m.watchEvents.inc({ resource: o.resource, outcome: "dropped" }, dropped);
    if (bookmarks > 0) m.syntheticBookmarks.inc({ resource: o.resource }, bookmarks);
  }

  /** The stream's last counts are added and it leaves the open set. */
  #close(o: OpenStream): void {
    this.#fold(o);
    this.#open.delete(o);
  }

  /**
   * Whether a watch of each resource recently passed an event whose shard
   * key value (uid, namespace or owner uid, per the resource's key) is
   * `key`; in labels mode, an event of that value's slot, while the slot is
   * still in `owned`.
   */
  delivered(key: string, filtering: ProxyFiltering, owned: readonly Range[]): Record<string, boolean> {
    const point = recordedPoint(filtering, key);
    // In labels mode the record holds slots, which many objects share: a
    // slot this proxy gave up was delivered, by it, only before the handoff,
    // and must not vouch for an object its new owner is asked about.
    const stillOwned = point === undefined || contains(owned, (BigInt(point.hi) << 32n) | BigInt(point.lo));
    return Object.fromEntries([...this.#recent].map(([id, r]) => [id, point === undefined ? r.has(key) : stillOwned && r.hasHash(point.hi, point.lo)]));
  }

  recentFor(id: string): RecentKeys {
    return entryOf(this.#recent, id, () => new RecentKeys());
  }

  passthrough(): void {
    this.metrics.requests.inc({ class: "passthrough", resource: "" });
  }

  /** A sharded request was answered or sent (not while it is held). */
  request(kind: "list" | "watch", id: string): void {
    this.metrics.requests.inc({ class: kind, resource: id });
    const s = this.#for(id);
    if (kind === "list") s.lists++;
    else s.watches++;
  }

  /** A watch was refused or ended with 410 so its cache relists. */
  forcedRelist(id: string): void {
    this.#for(id).forcedRelists++;
    this.metrics.forcedRelists.inc({ resource: id });
  }

  narrowed(id: string, deletes: number): void {
    const s = this.#for(id);
    s.narrowedWatches++;
    s.syntheticDeletes += deletes;
    this.metrics.narrowedWatches.inc({ resource: id });
    this.metrics.syntheticDeletes.inc({ resource: id }, deletes);
  }

  /** DELETEDs a resuming watch was sent again: its client may never have read a narrowing's. */
  resentDeletes(id: string, deletes: number): void {
    this.#for(id).resentDeletes += deletes;
    this.metrics.resentDeletes.inc({ resource: id }, deletes);
  }

  fallbackRefused(id: string): void {
    this.metrics.fallbackRefusals.inc({ resource: id });
  }

  /** Labels mode: an object without a readable slot label was dropped. Counted at once, not at the stream's end: it is in no cache. */
  unlabelled(id: string): void {
    this.metrics.unlabelled.inc({ resource: id });
  }

  /** `proxyFilters`: the server was given nothing to filter by (owner key, shardselector mode): the verdict is the proxy's. */
  listDone(open: OpenStream, f: ListFilterStats, failed: boolean, proxyFilters: boolean): void {
    this.#close(open);
    const id = open.resource;
    const m = this.metrics;
    const s = this.#for(id);
    if (failed) {
      s.errors++;
      m.streamErrors.inc({ resource: id, class: "list" });
      return;
    }
    s.itemsKept += f.kept;
    s.itemsDropped += f.dropped;
    const verdict: Verdict = proxyFilters ? "proxy" : f.serverFiltered;
    s.lastVerdict = verdict;
    m.items.inc({ resource: id, outcome: "kept" }, f.kept);
    m.items.inc({ resource: id, outcome: "dropped" }, f.dropped);
    m.serverFiltered.inc({ resource: id, verdict });
  }

  watchDone(open: OpenStream, f: WatchFilterStats): void {
    this.#close(open);
    const id = open.resource;
    const m = this.metrics;
    const s = this.#for(id);
    if (f.errors > 0) {
      s.errors += f.errors;
      m.streamErrors.inc({ resource: id, class: "watch" }, f.errors);
    }
  }

  #for(id: string): ResourceStats {
    let s = this.#stats.get(id);
    if (s === undefined) {
      s = { lists: 0, watches: 0, upstreamBytes: 0, clientBytes: 0, itemsKept: 0, itemsDropped: 0, eventsPassed: 0, eventsDropped: 0, syntheticBookmarks: 0, forcedRelists: 0, narrowedWatches: 0, syntheticDeletes: 0, resentDeletes: 0, errors: 0 };
      this.#stats.set(id, s);
    }
    return s;
  }
}
