import type { Transform } from "node:stream";
import type { HashMatcher } from "../../shard/range.ts";
/**
 * What a list or watch filter saw, shared by the JSON and protobuf scanners so
 * the proxy counts both encodings the same way. The filters update these
 * objects in place while they run; read them once the stream has ended.
 */

export interface ListFilterStats {
  /**
   * "fast": the body passed through byte for byte (the server's
   * `shardInfo.selector` matched the selector sent, or the body is a Status);
   * "filter": items were scanned and only the in-range ones kept. Starts as
   * "filter" and flips to "fast" before the first byte is emitted.
   */
  path: "fast" | "filter";
  /**
   * "confirmed": `shardInfo` matched. "inferred": filtered here, but nothing
   * out of range was found. "no": items had to be dropped.
   */
  serverFiltered: "confirmed" | "inferred" | "no";
  /** Items seen; 0 on the fast path, where nothing after the list metadata is read. */
  items: number;
  kept: number;
  dropped: number;
  bytesIn: number;
  bytesOut: number;
  /** The body's kind (`PodList`, `PartialObjectMetadataList`, `Status`, ...), once known. */
  kind?: string;
}

export interface WatchFilterStats {
  /** Events (frames or lines) read from upstream. */
  events: number;
  /** Upstream events passed on unchanged, BOOKMARK and ERROR included. */
  passed: number;
  dropped: number;
  /** BOOKMARK events the filter made up for dropped events. */
  syntheticBookmarks: number;
  bytesIn: number;
  bytesOut: number;
  /** ERROR events the filter itself wrote (each one ends the stream). */
  errors: number;
}

/** What both watch filters offer the proxy. */
export interface NarrowableWatchFilter extends Transform {
  readonly stats: WatchFilterStats;
  /** Labels mode: events dropped for a missing or malformed slot label (in `stats.dropped` too). */
  readonly unlabelled: number;
  /**
   * From now on judge events with `matcher`, after pushing `events` (whole,
   * encoded events, e.g. synthetic DELETEDs) through the delivery path.
   * Refuses (false, nothing done) unless the stream sits between events past
   * its initial events, so nothing the old matcher passed can follow them.
   */
  narrow(matcher: HashMatcher, events: readonly Buffer[]): boolean;
  /** Whether {@link narrow} would accept right now. */
  readonly narrowable: boolean;
}

/**
 * One synthetic bookmark per second per stream (design.md §4) keeps a quiet
 * shard's resourceVersion within a second of the stream's, far inside the
 * watch cache's history window, at the cost of one small event a second.
 */
export const DEFAULT_BOOKMARK_INTERVAL_MS = 1000;

/**
 * Both watch filters emit this event once, after the upstream
 * `k8s.io/initial-events-end` bookmark has been passed on; the proxy counts a
 * watch-list as a completed relist from then on.
 */
export const INITIAL_EVENTS_END = "initial-events-end";
