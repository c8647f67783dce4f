/**
 * Streaming filters for sharded LIST and WATCH response bodies, one per
 * encoding: they keep only this replica's items and events, whatever the
 * apiserver did with the shard selector.
 *
 * Streams only: no sockets, no timers, no clock except one injected for
 * bookmark pacing. Each filter is a `Transform` for one body, never reused.
 * Bodies are never parsed whole: byte scanners read the few fields that
 * decide (the list's `shardInfo.selector`, each item's `metadata.uid` or
 * `metadata.namespace`, a watch event's type), so memory is bounded by the
 * largest item, not the list.
 *
 * Exports: `createJsonListFilter`, `createJsonWatchFilter` (JSON), the
 * bookmark pacing shared by the watch filters (`BookmarkPacer`), and the
 * option and stats types.
 *
 * @packageDocumentation
 */
export { createJsonListFilter, DEFAULT_MAX_ITEM_BYTES, type ListFilterOptions } from "./json-list-filter.ts";
export { createJsonWatchFilter, DEFAULT_BOOKMARK_INTERVAL_MS, DEFAULT_MAX_EVENT_BYTES, INITIAL_EVENTS_END, type WatchFilterOptions } from "./json-watch-filter.ts";
export { BookmarkPacer, compareResourceVersions, type BookmarkPacerOptions, type DroppedObject } from "./json-watch-bookmarks.ts";
export type { ListFilterStats, WatchFilterStats } from "./stats.ts";
