/**
 * What the list and watch filters of both encodings promise the proxy: the
 * stats they keep (so the proxy counts JSON and protobuf the same way; the
 * filters update them in place while they run, read them once the stream
 * has ended), the narrowing a watch filter accepts, and the event it emits
 * when a watch-list's initial events are over. The proxy depends on this
 * file, never on one encoding's filter for these.
 */
import type { Transform } from "node:stream";
import type { HashMatcher } from "../../shard/range.ts";
import type { ObjectKey } from "./object-key.ts";

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

/**
 * The largest list item or watch event any filter accepts by default, in
 * either encoding (a larger one fails the list, or ends the watch with an
 * ERROR event). 16 MiB is client-go's own per-object ceiling (its streaming
 * decoder refuses larger frames: apimachinery runtime/serializer/streaming,
 * `maxBytes`), so nothing larger could reach the controller anyway; and ten
 * times etcd's default request bound (1.5 MiB), leaving room for JSON being
 * a few times the protobuf size and for a Table row that carries its object.
 * One stuck stream holds at most this much.
 */
export const DEFAULT_MAX_OBJECT_BYTES = 16 * 1024 * 1024;

/** What the proxy tells a watch filter of either encoding (each adds its own size bound). */
export interface WatchFilterCommonOptions {
  readonly matcher: HashMatcher;
  /** What places an event's object in the keyspace (object-key.ts). */
  readonly key: ObjectKey;
  /** Labels mode: an event whose object has no readable slot label was dropped; `object` is its `namespace/name`. */
  readonly onUnlabelled?: (object: string) => void;
  /** The client sent `allowWatchBookmarks=true`: dropped events may become bookmarks. */
  readonly allowBookmarks: boolean;
  /**
   * The stream starts with initial events: `sendInitialEvents=true`, or a
   * watch with `resourceVersion` unset or "0", which the server also opens
   * with the current state as ADDED events whose RVs are not ordered. No
   * synthetic bookmark is written until the upstream
   * `k8s.io/initial-events-end` bookmark has passed.
   */
  readonly initialEvents: boolean;
  /** At most one synthetic bookmark per this many ms on this stream. Default 1000. */
  readonly bookmarkIntervalMs?: number;
  /** Clock for the bookmark interval, in ms. Default `performance.now` (monotonic). */
  readonly now?: () => number;
  /** Sees every byte right before it is pushed to the client, in order (the proxy's delivery tap). */
  readonly onDeliver?: (chunk: Buffer) => void;
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
 * Both watch filters emit this event once, after the upstream
 * `k8s.io/initial-events-end` bookmark has been passed on; the proxy counts a
 * watch-list as a completed relist from then on.
 */
export const INITIAL_EVENTS_END = "initial-events-end";
