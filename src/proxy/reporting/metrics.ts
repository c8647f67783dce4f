/**
 * The proxy's Prometheus metrics. Counters are bumped from the filters' own
 * tallies, never per item, so label lookups stay out of the hot loop: once
 * per response, and for what open lists and watches stream (bytes, events),
 * at every scrape (see `beforeScrape`).
 */
import { Counter, Gauge, Registry } from "../../prom.ts";

/**
 * Whether the apiserver filtered a sharded list: `confirmed` (shardInfo
 * matched the selector sent), `inferred` (nothing out of range came back),
 * `no` (the server ignored what it was sent; the proxy filtered), `proxy`
 * (nothing the server could filter by was sent, an owner key in
 * shardselector mode: the proxy filtered by design).
 */
export type Verdict = "confirmed" | "inferred" | "no" | "proxy";

export class ProxyMetrics {
  readonly registry: Registry;
  readonly requests: Counter<"class" | "resource">;
  readonly serverFiltered: Counter<"resource" | "verdict">;
  readonly items: Counter<"resource" | "outcome">;
  readonly watchEvents: Counter<"resource" | "outcome">;
  readonly upstreamBytes: Counter<"resource" | "class">;
  readonly clientBytes: Counter<"resource" | "class">;
  readonly syntheticBookmarks: Counter<"resource">;
  readonly forcedRelists: Counter<"resource">;
  readonly narrowedWatches: Counter<"resource">;
  readonly syntheticDeletes: Counter<"resource">;
  readonly resentDeletes: Counter<"resource">;
  readonly fallbackRefusals: Counter<"resource">;
  readonly unlabelled: Counter<"resource">;
  readonly streamErrors: Counter<"resource" | "class">;
  readonly rejectedRequests: Counter<"reason">;
  readonly handlerFailures: Counter<"listener">;
  readonly activeWatches: Gauge<"resource">;
  readonly ownedRatio: Gauge;
  readonly generation: Gauge;
  #openWatches: (() => ReadonlyMap<string, number>) | undefined;
  #beforeScrape: (() => void) | undefined;

  constructor(registry = new Registry()) {
    this.registry = registry;
    const r = [registry];
    const counter = <L extends string>(name: string, labelNames: readonly L[], help: string): Counter<L> => new Counter({ name, help, labelNames, registers: r });
    // What a stream counts while it is open is added when a scrape reads
    // any of these, whichever prom-client serialises first.
    const streamed = <L extends string>(name: string, labelNames: readonly L[], help: string): Counter<L> => new Counter({ name, help, labelNames, registers: r, collect: () => this.#beforeScrape?.() });
    this.requests = counter("shardcar_proxy_requests_total", ["class", "resource"], "Requests by class (list, watch, passthrough) and sharded resource.");
    this.serverFiltered = counter("shardcar_proxy_server_filtered_total", ["resource", "verdict"], "Sharded lists by whether the apiserver filtered: confirmed (shardInfo matched), inferred (nothing out of range seen), no (the server ignored the selector; the proxy filtered), proxy (owner key in shardselector mode: no selector the server can apply, the proxy filtered by design).");
    this.items = counter("shardcar_proxy_list_items_total", ["resource", "outcome"], "List items seen, by outcome (kept, dropped).");
    this.watchEvents = streamed("shardcar_proxy_watch_events_total", ["resource", "outcome"], "Watch events seen, by outcome (passed, dropped).");
    this.upstreamBytes = streamed("shardcar_proxy_upstream_bytes_total", ["resource", "class"], "Response bytes received from the apiserver.");
    this.clientBytes = streamed("shardcar_proxy_client_bytes_total", ["resource", "class"], "Response bytes delivered to the controller.");
    this.syntheticBookmarks = streamed("shardcar_proxy_synthetic_bookmarks_total", ["resource"], "BOOKMARK events synthesised for dropped watch events.");
    this.forcedRelists = counter("shardcar_proxy_forced_relists_total", ["resource"], "Watches ended with 410 Expired because the owned ranges changed.");
    this.narrowedWatches = counter("shardcar_proxy_narrowed_watches_total", ["resource"], "Watches narrowed in place when the owned ranges shrank (synthetic DELETEDs instead of a forced relist).");
    this.syntheticDeletes = counter("shardcar_proxy_synthetic_deletes_total", ["resource"], "DELETED events synthesised for delivered objects that left the owned ranges.");
    this.resentDeletes = counter("shardcar_proxy_synthetic_deletes_resent_total", ["resource"], "Synthetic DELETED events sent again to a resuming watch, whose client may not have read a narrowing's.");
    this.fallbackRefusals = counter("shardcar_proxy_fallback_refusals_total", ["resource"], "Sharded lists answered 503 because the server did not filter and fallback=fail.");
    this.unlabelled = counter("shardcar_proxy_unlabelled_total", ["resource"], "Labels mode: list items and watch events dropped because the object had no readable slot label (it is in no shard's cache).");
    this.streamErrors = counter("shardcar_proxy_stream_errors_total", ["resource", "class"], "Responses ended with an error (unparsable or truncated upstream body).");
    this.rejectedRequests = counter("shardcar_proxy_rejected_requests_total", ["reason"], "Requests refused at the listener, before routing, by reason: 400 for unparsable, bad-escape, dot-segment, sharded-upgrade and resource-upgrade; 505 for http-version (not HTTP/1.x); 405 for connect (a CONNECT tunnel); pipelined-upgrade, an upgrade or CONNECT behind unfinished requests, closes its connection.");
    this.handlerFailures = counter("shardcar_proxy_handler_failures_total", ["listener"], "Requests whose handler threw (answered 500 or closed, never a crash): a bug; the log line says which request.");
    this.activeWatches = new Gauge({
      name: "shardcar_proxy_active_watches",
      help: "Open sharded watches.",
      labelNames: ["resource"],
      registers: r,
      // Read off the watches being served at scrape time, never counted up
      // and down (a callback that runs twice or not at all cannot skew it).
      collect: () => {
        const source = this.#openWatches;
        if (source === undefined) return;
        this.activeWatches.reset();
        for (const [resource, n] of source()) this.activeWatches.set({ resource }, n);
      },
    });
    this.ownedRatio = new Gauge({ name: "shardcar_proxy_owned_keyspace_ratio", help: "Share of the 64-bit keyspace this replica currently owns.", registers: r });
    this.generation = new Gauge({ name: "shardcar_proxy_generation", help: "Range-table generation currently enforced (0 for static shards).", registers: r });
  }

  /** Runs before a scrape reads the streamed counters: folds in what open lists and watches have counted so far. */
  beforeScrape(fold: () => void): void {
    this.#beforeScrape = fold;
  }

  /** Where `shardcar_proxy_active_watches` reads the open watches per resource from. */
  openWatchesFrom(source: () => ReadonlyMap<string, number>): void {
    this.#openWatches = source;
  }
}
