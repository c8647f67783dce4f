/**
 * Which items a LIST page holds, whether it gets a continue token, and what
 * `remainingItemCount` says: a pure function of the candidate items, the
 * predicate and the limit, reproducing both serving paths of a 1.36 server.
 */
import type { StoredObject } from "./store.ts";

/**
 * - `cache`: the watch cache (resourceVersion unset, "0", NotOlderThan, and
 *   continuations). `remainingItemCount` is the number of keys after the
 *   continue point minus the limit, whatever the shard selector filtered out.
 * - `etcd`: `resourceVersionMatch=Exact`. etcd is read in batches that double
 *   (limit, 2×limit, ... up to 10,000), and `remainingItemCount` is the key
 *   count of the last batch's range minus the limit.
 */
export type ServingPath = "cache" | "etcd";

export interface PageRequest {
  /** Candidates in key order: in scope, after the continue key, at the served resourceVersion. */
  readonly items: readonly StoredObject[];
  readonly matches: (o: StoredObject) => boolean;
  /** 0 means unlimited. */
  readonly limit: number;
  /**
   * No label and no field selector. The shard selector is deliberately not
   * part of this: 1.36.0–1.36.3 report `remainingItemCount` on sharded pages
   * counting unfiltered keys (storage.PrepareContinueToken checks only
   * `Predicate.Empty()`), and devapi must show clients that bug.
   */
  readonly predicateEmpty: boolean;
  readonly path: ServingPath;
}

export interface Page {
  readonly items: StoredObject[];
  /** Set when there may be more: the key to resume after. */
  readonly continueAfter?: string;
  readonly remainingItemCount?: number;
}

/** etcd3 store's cap on one range request while it fills a filtered page. */
const ETCD_MAX_BATCH = 10_000;

export function selectPage(req: PageRequest): Page {
  return req.path === "etcd" ? etcdPage(req) : cachePage(req);
}

function cachePage(req: PageRequest): Page {
  const { items, matches, limit } = req;
  const selected: StoredObject[] = [];
  let hasMore = false;
  for (let i = 0; i < items.length; i++) {
    const o = items[i] as StoredObject;
    if (matches(o)) selected.push(o);
    if (limit > 0 && selected.length >= limit) {
      // Like cacher.GetList: more remains if any key follows, matching or not.
      hasMore = i < items.length - 1;
      break;
    }
  }
  return finish(selected, hasMore, req.predicateEmpty ? items.length - limit : undefined);
}

function etcdPage(req: PageRequest): Page {
  const { items, matches, limit } = req;
  const selected: StoredObject[] = [];
  let start = 0;
  let batch = limit > 0 ? limit : items.length;
  let count = 0;
  let hasMore = false;
  for (;;) {
    count = items.length - start;
    const end = Math.min(items.length, start + batch);
    hasMore = end < items.length;
    let i = start;
    for (; i < end; i++) {
      if (limit > 0 && selected.length >= limit) {
        hasMore = true;
        break;
      }
      const o = items[i] as StoredObject;
      if (matches(o)) selected.push(o);
    }
    if (!hasMore || limit === 0) break;
    if (selected.length >= limit) break;
    start = end;
    batch = Math.min(batch * 2, ETCD_MAX_BATCH);
  }
  return finish(selected, hasMore, req.predicateEmpty ? count - limit : undefined);
}

function finish(selected: StoredObject[], hasMore: boolean, remaining: number | undefined): Page {
  const last = selected[selected.length - 1];
  if (!hasMore || last === undefined) return { items: selected };
  return remaining === undefined ? { items: selected, continueAfter: last.key } : { items: selected, continueAfter: last.key, remainingItemCount: remaining };
}
