/**
 * Serving a sharded WATCH: every event through the watch filter for its
 * encoding (watches never say whether the server filtered), a delivery tap
 * feeding the object index (ring mode with synthetic deletes), and a handle
 * through which the ledger's effects end the watch with 410 or narrow it in
 * place.
 */
import type { ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream";
import { FULL_RANGE, type Range } from "../../shard/range.ts";
import type { Encoding } from "../request/accept.ts";
import type { LiveWatch } from "../reporting/resource-stats.ts";
import type { Resend, WatchSink } from "../handoff/object-index.ts";
import { isResumingWatch, isTrue } from "../handoff/lineage.ts";
import { RecordingMatcher, type RecentKeys } from "../reporting/recent-keys.ts";
import { createJsonWatchFilter } from "../scan/json-watch-filter.ts";
import { createJsonWatchTap } from "../scan/json-tap.ts";
import { createProtoWatchFilter } from "../scan/proto-watch-filter.ts";
import { createProtoWatchTap } from "../scan/proto-tap.ts";
import type { ObjectKey } from "../scan/object-key.ts";
import { INITIAL_EVENTS_END, type NarrowableWatchFilter, type WatchFilterStats } from "../scan/filter-contract.ts";
import type { DeliveredObject } from "../scan/tap.ts";
import { syntheticDelete } from "../handoff/synthetic-delete.ts";
import { watchErrorEvent } from "../scan/status-encoding.ts";

/** A watch being served, as the ledger's effects reach it. */
export interface ServedWatch extends LiveWatch {
  /** Ends the stream with a 410 ERROR event (idempotent). */
  terminate(message: string): void;
  /** Whether {@link narrow} would succeed right now: between events past its initial events, with a readable index and a known client resourceVersion. */
  narrowable(): boolean;
  /**
   * Synthetic DELETEDs for `leaving` at the client's resourceVersion, then
   * filtering with `ranges`. Returns that resourceVersion, or undefined when
   * the stream could not narrow (nothing was done).
   */
  narrow(ranges: readonly Range[], leaving: readonly DeliveredObject[]): string | undefined;
  /** The client's resume point: the newest resourceVersion it was handed, or the one it resumed from. */
  clientRv(): string | undefined;
}

export interface WatchEnd {
  readonly rv: string | undefined;
  /** The proxy ended it with its own 410 (the client relists; no resume point is left). */
  readonly byProxy: boolean;
  readonly stats: WatchFilterStats;
}

export interface WatchServing {
  readonly resource: string;
  readonly encoding: Encoding;
  readonly body: Readable;
  readonly res: ServerResponse;
  readonly headers: Record<string, string | string[]>;
  /** The query sent upstream. */
  readonly query: URLSearchParams;
  readonly ranges: readonly Range[];
  /** What the filter and tap read to place an object (rewrite.ts). */
  readonly key: ObjectKey;
  /** Labels mode: an object without a readable slot label was dropped. */
  readonly onUnlabelled: (object: string) => void;
  readonly recent: RecentKeys;
  readonly bookmarkIntervalMs: number | undefined;
  readonly maxItemBytes: number | undefined;
  /** TEST-ONLY (see ShardProxyOptions.unsafeSkipWatchFilter). */
  readonly unsafeSkipWatchFilter: boolean;
  /** The delivery tap's sink (synthetic deletes on); made before the ledger records the watch open. */
  readonly sink: WatchSink | undefined;
  /**
   * A resuming watch: objects whose DELETEDs an earlier watch of its lineage
   * wrote at or after the resume point, which its client may never have
   * read (`DeliveredIndex.leftSince`; the shell asks only for a resuming
   * watch). They are sent again first.
   */
  readonly resendDeletes: Resend | undefined;
  readonly onInitialEventsEnd: () => void;
  /** DELETEDs of `resendDeletes` were sent. */
  readonly onResent: (deletes: number) => void;
  /** The filter exists: `stats` is what it counts, updated in place while the stream runs. Called before any byte moves. */
  readonly onStart: (stats: WatchFilterStats) => void;
  readonly onEnd: (end: WatchEnd) => void;
}

/** Answers a watch that cannot be served with a 410 ERROR event in its own encoding. */
export function expireWatch(res: ServerResponse, headers: Record<string, string | string[]>, encoding: Encoding, message: string): void {
  res.writeHead(200, headers);
  res.end(watchErrorEvent(encoding, 410, message, "Expired"));
}

export function serveWatch(o: WatchServing): ServedWatch {
  const q = o.query;
  const rv = q.get("resourceVersion");
  const watchList = isTrue(q.get("sendInitialEvents"));
  const initialEvents = watchList || rv === null || rv === "" || rv === "0";
  const matcherFor = (ranges: readonly Range[]): RecordingMatcher => new RecordingMatcher(o.unsafeSkipWatchFilter ? [FULL_RANGE] : ranges, o.recent);
  const sink = o.sink;
  // The delivery tap runs inside the filter's push, so the index already
  // holds every event handed to the client when the ranges change.
  const tap = sink === undefined ? undefined : o.encoding === "json" ? createJsonWatchTap(sink, o.key) : createProtoWatchTap(sink, o.key);
  const filterOpts = {
    matcher: matcherFor(o.ranges),
    key: o.key,
    onUnlabelled: o.onUnlabelled,
    allowBookmarks: isTrue(q.get("allowWatchBookmarks")),
    initialEvents,
    ...(o.bookmarkIntervalMs === undefined ? {} : { bookmarkIntervalMs: o.bookmarkIntervalMs }),
    ...(tap === undefined ? {} : { onDeliver: (b: Buffer) => tap.write(b) }),
  };
  const filter: NarrowableWatchFilter =
    o.encoding === "json"
      ? createJsonWatchFilter({ ...filterOpts, ...(o.maxItemBytes === undefined ? {} : { maxEventBytes: o.maxItemBytes }) })
      : createProtoWatchFilter({ ...filterOpts, ...(o.maxItemBytes === undefined ? {} : { maxFrameBytes: o.maxItemBytes }) });
  o.onStart(filter.stats);
  let finished = false;
  let endedByUs = false;
  const clientRv = (): string | undefined => sink?.rv ?? (isResumingWatch(q) ? (rv ?? undefined) : undefined);
  const watch: ServedWatch = {
    resource: o.resource,
    live: filter.stats,
    clientRv,
    terminate: (message) => {
      if (finished) return;
      endedByUs = true;
      filter.unpipe(o.res);
      o.body.destroy();
      if (!o.res.writableEnded) o.res.end(watchErrorEvent(o.encoding, 410, message, "Expired"));
    },
    narrowable: () => !finished && sink !== undefined && sink.readable && filter.narrowable && clientRv() !== undefined,
    narrow: (ranges, leaving) => {
      const resumeAt = clientRv();
      const type = sink?.typeMetaOf;
      if (finished || sink === undefined || !sink.readable || resumeAt === undefined || type === undefined) return undefined;
      const events = leaving.map((obj) => syntheticDelete(o.encoding, type, obj, resumeAt));
      return filter.narrow(matcherFor(ranges), events) ? resumeAt : undefined;
    },
  };
  // Stamped with the resume point itself: a client cut again right after
  // them must resume from where the upstream stream starts, not later.
  const resend = o.resendDeletes;
  if (resend !== undefined && rv !== null) {
    // A stream that resumes sits between events from its start (no initial events), so this cannot be refused.
    if (filter.narrow(matcherFor(o.ranges), resend.objects.map((obj) => syntheticDelete(o.encoding, resend.type, obj, rv)))) o.onResent(resend.objects.length);
  }
  if (watchList) {
    // A watch-list is a relist: done once its initial events are through.
    filter.once(INITIAL_EVENTS_END, () => {
      sink?.initialEventsEnded();
      o.onInitialEventsEnd();
    });
  }
  o.res.writeHead(200, o.headers);
  // Headers now, not with the first event: a reflector waits for them.
  o.res.flushHeaders();
  pipeline(o.body, filter, o.res, (err) => {
    finished = true;
    if (err && !o.res.writableEnded) o.res.destroy();
    o.onEnd({ rv: clientRv(), byProxy: endedByUs, stats: filter.stats });
  });
  return watch;
}
