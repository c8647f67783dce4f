/**
 * What the proxy counts: per-resource tallies (the demo, `/debug/shardcar`,
 * tests) and the Prometheus metrics, bumped once per response or stream
 * from the filters' own tallies, never per item. No decision reads these.
 */
import { recordedPoint, type ProxyFiltering } from "./filtering.ts";
import type { ProxyMetrics, Verdict } from "./metrics.ts";
import { RecentKeys } from "./recent.ts";
import { entryOf } from "../map-entry.ts";
import type { ListFilterStats, WatchFilterStats } from "./scan/filter-contract.ts";

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

/** A watch being served, as accounting sees it: whose, and its filter's live tallies. */
export interface LiveWatch {
  readonly resource: string;
  readonly live: WatchFilterStats;
}

export class Accounting {
  readonly metrics: ProxyMetrics;
  readonly #stats = new Map<string, ResourceStats>();
  readonly #recent = new Map<string, RecentKeys>();

  /** `live`: the watches being served now (their tallies are folded in until they end). */
  constructor(metrics: ProxyMetrics, live: () => Iterable<LiveWatch>) {
    this.metrics = metrics;
    // Open watches are read off the served watches at scrape time, never
    // counted up and down.
    metrics.openWatchesFrom(() => {
      const n = new Map<string, number>();
      for (const w of live()) n.set(w.resource, (n.get(w.resource) ?? 0) + 1);
      return n;
    });
    this.#live = live;
  }

  readonly #live: () => Iterable<LiveWatch>;

  /** Per-resource tallies since start, including watches still open. A snapshot. */
  snapshot(): ReadonlyMap<string, Readonly<ResourceStats>> {
    const out = new Map<string, ResourceStats>();
    for (const [id, s] of this.#stats) out.set(id, { ...s });
    for (const w of this.#live()) {
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

  /**
   * Whether a watch of each resource recently passed an event whose shard
   * key value (uid, namespace or owner uid, per the resource's key) is
   * `key`; in labels mode, an event of that value's slot.
   */
  delivered(key: string, filtering: ProxyFiltering): Record<string, boolean> {
    const point = recordedPoint(filtering, key);
    return Object.fromEntries([...this.#recent].map(([id, r]) => [id, point === undefined ? r.has(key) : r.hasHash(point.hi, point.lo)]));
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

  fallbackRefused(id: string): void {
    this.metrics.fallbackRefusals.inc({ resource: id });
  }

  /** Labels mode: an object without a readable slot label was dropped. Counted at once, not at the stream's end: it is in no cache. */
  unlabelled(id: string): void {
    this.metrics.unlabelled.inc({ resource: id });
  }

  /** `proxyFilters`: the server was given nothing to filter by (owner key, shardselector mode): the verdict is the proxy's. */
  listDone(id: string, f: ListFilterStats, failed: boolean, proxyFilters: boolean): void {
    const m = this.metrics;
    const s = this.#for(id);
    s.upstreamBytes += f.bytesIn;
    s.clientBytes += f.bytesOut;
    m.upstreamBytes.inc({ resource: id, class: "list" }, f.bytesIn);
    m.clientBytes.inc({ resource: id, class: "list" }, f.bytesOut);
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

  watchDone(id: string, f: WatchFilterStats): void {
    const m = this.metrics;
    const s = this.#for(id);
    s.upstreamBytes += f.bytesIn;
    s.clientBytes += f.bytesOut;
    s.eventsPassed += f.passed;
    s.eventsDropped += f.dropped;
    s.syntheticBookmarks += f.syntheticBookmarks;
    m.upstreamBytes.inc({ resource: id, class: "watch" }, f.bytesIn);
    m.clientBytes.inc({ resource: id, class: "watch" }, f.bytesOut);
    m.watchEvents.inc({ resource: id, outcome: "passed" }, f.passed);
    m.watchEvents.inc({ resource: id, outcome: "dropped" }, f.dropped);
    m.syntheticBookmarks.inc({ resource: id }, f.syntheticBookmarks);
    if (f.errors > 0) {
      s.errors += f.errors;
      m.streamErrors.inc({ resource: id, class: "watch" }, f.errors);
    }
  }

  #for(id: string): ResourceStats {
    let s = this.#stats.get(id);
    if (s === undefined) {
      s = { lists: 0, watches: 0, upstreamBytes: 0, clientBytes: 0, itemsKept: 0, itemsDropped: 0, eventsPassed: 0, eventsDropped: 0, syntheticBookmarks: 0, forcedRelists: 0, narrowedWatches: 0, syntheticDeletes: 0, errors: 0 };
      this.#stats.set(id, s);
    }
    return s;
  }
}
