/**
 * When a dropped watch event may become a synthetic BOOKMARK. Pure: time is a
 * parameter, nothing here does I/O, and the encoding (JSON or protobuf) is the
 * caller's business: both watch filters use it.
 *
 * Why synthetic bookmarks at all: a controller whose shard is quiet while the
 * rest of the cluster churns would otherwise keep an old resourceVersion, and
 * its next reconnect could hit 410 Gone and force a full relist.
 */

/**
 * One synthetic bookmark per second per stream (design.md §4) keeps a quiet
 * shard's resourceVersion within a second of the stream's, far inside the
 * watch cache's history window, at the cost of one small event a second.
 */
export const DEFAULT_BOOKMARK_INTERVAL_MS = 1000;

/** What a synthetic bookmark needs from the dropped object. */
export interface DroppedObject {
  readonly resourceVersion: string;
  readonly kind: string;
  readonly apiVersion: string;
}

export interface BookmarkPacerOptions {
  /** The client asked for `allowWatchBookmarks=true`; without it no bookmark is ever made up. */
  readonly allowBookmarks: boolean;
  /** The stream starts with initial ADDED events whose RVs are not ordered (see {@link BookmarkPacer}). */
  readonly initialEvents: boolean;
  /** Minimum gap between two synthetic bookmarks of one stream. */
  readonly intervalMs: number;
}

/**
 * Compares two resourceVersions when both are decimal integers (etcd
 * revisions, which is what every apiserver serves today). Returns a negative,
 * zero or positive number, or `undefined` when either is opaque: the API
 * treats RVs as opaque strings, and then only stream order can be trusted.
 */
export function compareResourceVersions(a: string, b: string): number | undefined {
  // Called for every passed event: no regex, no allocation.
  const da = digitsStart(a);
  const db = digitsStart(b);
  if (da < 0 || db < 0) return undefined;
  const la = a.length - da;
  const lb = b.length - db;
  if (la !== lb) return la - lb;
  for (let k = 0; k < la; k++) {
    const d = a.charCodeAt(da + k) - b.charCodeAt(db + k);
    if (d !== 0) return d;
  }
  return 0;
}

/** Index of the first significant digit of a decimal string (leading zeros skipped), or -1 if it is not one. */
function digitsStart(s: string): number {
  if (s.length === 0) return -1;
  let first = -1;
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c < 0x30 || c > 0x39) return -1;
    if (first < 0 && (c !== 0x30 || k === s.length - 1)) first = k;
  }
  return first;
}

/**
 * One per watch stream. Feed it every event in stream order: {@link passed}
 * for events that reach the client, {@link dropped} for those that do not. It
 * answers which synthetic bookmark to emit, if any, right now.
 *
 * Rules:
 * - At most one synthetic bookmark per `intervalMs`. A drop inside the
 *   interval is remembered (the latest one wins) and emitted at the next drop
 *   after the interval, or at {@link flush} on a clean end.
 * - Any passed event supersedes a remembered drop: it is newer, so the
 *   client's RV has moved past the drop already.
 * - Never an RV that is not newer than one already passed (when comparable).
 * - With initial events, nothing until the upstream `k8s.io/initial-events-end`
 *   bookmark has passed (see {@link passed}).
 */
export class BookmarkPacer {
  readonly #opts: BookmarkPacerOptions;
  #pending: DroppedObject | undefined;
  #lastAt = Number.NEGATIVE_INFINITY;
  #newestPassed: string | undefined;
  #initialDone: boolean;

  constructor(opts: BookmarkPacerOptions) {
    this.#opts = opts;
    this.#initialDone = !opts.initialEvents;
  }

  /** Whether the initial-events phase is over (always true without initial events). */
  get initialEventsDone(): boolean {
    return this.#initialDone;
  }

  /**
   * An event reached the client. `initialEventsEnd` is true for a BOOKMARK
   * annotated `k8s.io/initial-events-end: "true"`.
   */
  passed(resourceVersion: string | undefined, initialEventsEnd: boolean): void {
    // client-go 0.36 reflector.go, handleAnyWatch: any BOOKMARK sets
    // eventReceivedBesidesAdded = true (`case watch.Bookmark:`), after which
    // setLastSyncResourceVersion(rv, true) records the RV of every later event,
    // ADDED included ("when eventReceivedBesidesAdded is true, that indicates we
    // are definitely past any initial synthetic Added events"); watchList's
    // callback likewise keeps `resourceVersion = rv` only once that flag is
    // set. A bookmark of ours before the real initial-events-end would flip the
    // flag early and let the unordered RVs of the remaining initial ADDED events
    // become the reflector's resume point. So: nothing until that bookmark.
    if (initialEventsEnd) this.#initialDone = true;
    if (resourceVersion !== undefined) {
      const cmp = this.#newestPassed === undefined ? undefined : compareResourceVersions(resourceVersion, this.#newestPassed);
      if (cmp === undefined || cmp > 0) this.#newestPassed = resourceVersion;
    }
    this.#pending = undefined;
  }

  /** An event was dropped at time `now`. Returns the bookmark to emit now, if any. */
  dropped(obj: DroppedObject | undefined, now: number): DroppedObject | undefined {
    if (!this.#opts.allowBookmarks || !this.#initialDone) return undefined;
    if (obj !== undefined) this.#pending = obj;
    return this.#due(now);
  }

  /** The upstream stream ended cleanly at `now`: the remembered drop, if its time has come. */
  flush(now: number): DroppedObject | undefined {
    if (!this.#opts.allowBookmarks || !this.#initialDone) return undefined;
    return this.#due(now);
  }

  #due(now: number): DroppedObject | undefined {
    const p = this.#pending;
    if (p === undefined || now - this.#lastAt < this.#opts.intervalMs) return undefined;
    this.#pending = undefined;
    if (this.#newestPassed !== undefined) {
      const cmp = compareResourceVersions(p.resourceVersion, this.#newestPassed);
      // Never move the client backwards, nor repeat an RV it has.
      if (cmp !== undefined && cmp <= 0) return undefined;
    }
    this.#lastAt = now;
    this.#newestPassed = p.resourceVersion;
    return p;
  }
}
