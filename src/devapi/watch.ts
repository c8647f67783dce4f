/**
 * One WATCH response stream: newline-delimited `WatchEvent` JSON written in
 * order through a queue that honours backpressure, with bookmarks, a
 * timeout, and exactly one teardown however the stream ends (timeout,
 * client gone, server closing, consumer too slow).
 */
import type { ServerResponse } from "node:http";
import { goJson } from "./json.ts";
import type { StatusBody } from "./status.ts";
import type { ResolvedDef, StoreEvent, StoredObject } from "./store.ts";
import { columnDefinitionsJson, pomJson, rowJson, type IncludeObject } from "./table.ts";
import type { OutputFormat } from "./negotiate.ts";

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

/**
 * How one store event looks to a watcher whose predicate is `passes`
 * (cache_watcher.convertToWatchEvent): an object entering the selection is
 * ADDED, one leaving it is DELETED (with its previous state), and events that
 * neither start nor end inside the selection are not sent.
 */
export function viewEvent(
  e: StoreEvent,
  passes: (o: StoredObject) => boolean,
  restamp: (o: StoredObject, rv: number) => StoredObject,
): { type: WatchEventType; object: StoredObject } | undefined {
  if (e.type === "DELETED") return e.prev !== null && passes(e.prev) ? { type: "DELETED", object: e.object } : undefined;
  const cur = passes(e.object);
  const old = e.prev !== null && passes(e.prev);
  if (cur && old) return { type: "MODIFIED", object: e.object };
  if (cur) return { type: "ADDED", object: e.object };
  // Leaving the selection: the last state that matched, at this event's resourceVersion.
  if (old && e.prev !== null) return { type: "DELETED", object: restamp(e.prev, e.rv) };
  return undefined;
}

type Entry =
  | { readonly kind: "event"; readonly type: WatchEventType; readonly object: StoredObject }
  | { readonly kind: "initial"; readonly items: readonly StoredObject[]; next: number }
  | { readonly kind: "bookmark"; readonly initialEventsEnd: boolean; readonly rv: number }
  | { readonly kind: "error"; readonly status: StatusBody };

export interface WatchSessionOptions {
  readonly def: ResolvedDef;
  readonly format: OutputFormat;
  readonly includeObject: IncludeObject;
  readonly bookmarks: boolean;
  readonly bookmarkIntervalMs: number;
  /** Absolute end time (ms), or undefined for none. */
  readonly deadline: number | undefined;
  /** The current global resourceVersion, for bookmarks. */
  readonly currentRv: () => number;
  readonly now: () => number;
  /** Called exactly once when the stream is over, whatever ended it. */
  readonly onClose: () => void;
}

/**
 * A watcher that falls this many events behind is cut off, as the real watch
 * cache drops unresponsive watchers: its client reconnects with its last
 * resourceVersion (or relists on 410) instead of making the server buffer an
 * unbounded backlog. 10,000 is the default history window, so a client cut
 * off here can still resume without a 410.
 */
const MAX_QUEUED_EVENTS = 10_000;

/** The longest delay node's timers take. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Write in batches of about this size: fewer syscalls, and bounded memory per pump turn. */
const CHUNK_BYTES = 64 * 1024;

export class WatchSession {
  private readonly res: ServerResponse;
  private readonly opts: WatchSessionOptions;
  private readonly queue: Entry[] = [];
  private queuedEvents = 0;
  private blocked = false;
  private closed = false;
  private sentColumns = false;
  private preTimeoutScheduled = false;
  private bookmarkTimer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;

  constructor(res: ServerResponse, opts: WatchSessionOptions) {
    this.res = res;
    this.opts = opts;
    res.on("close", () => this.close());
    res.on("error", () => this.close());
    if (opts.deadline !== undefined) {
      // Node fires a longer timer at once (after 1 ms, with a warning); a
      // deadline beyond its longest, 24.8 days, is never, to a test server.
      const ms = opts.deadline - opts.now();
      if (ms <= MAX_TIMER_MS) this.deadlineTimer = setTimeout(() => this.close(), Math.max(0, ms));
    }
    if (opts.bookmarks) this.scheduleBookmark();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Queues the current state as ADDED events, serialised lazily as the client reads. */
  initial(items: readonly StoredObject[]): void {
    if (items.length > 0) this.push({ kind: "initial", items, next: 0 });
  }

  event(type: WatchEventType, object: StoredObject): void {
    if (this.closed) return;
    if (this.queuedEvents >= MAX_QUEUED_EVENTS) {
      this.close();
      return;
    }
    this.queuedEvents++;
    this.push({ kind: "event", type, object });
  }

  /**
   * Queues a BOOKMARK. Its resourceVersion is taken now, not when it is
   * written: every event up to now is already queued ahead of it, so a
   * client resuming from it cannot miss one that was still in the queue.
   */
  bookmark(initialEventsEnd: boolean): void {
    this.push({ kind: "bookmark", initialEventsEnd, rv: this.opts.currentRv() });
  }

  /** Sends an ERROR event and ends the stream. */
  fail(status: StatusBody): void {
    this.push({ kind: "error", status });
  }

  /** Ends the stream. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.bookmarkTimer);
    clearTimeout(this.deadlineTimer);
    this.queue.length = 0;
    if (!this.res.writableEnded) this.res.end();
    this.opts.onClose();
  }

  private scheduleBookmark(): void {
    // Like cacheWatcher.nextBookmarkTime: every interval, and once shortly
    // before the deadline so the client leaves with a fresh resourceVersion.
    const now = this.opts.now();
    let at = now + this.opts.bookmarkIntervalMs;
    let preTimeout = false;
    if (this.opts.deadline !== undefined && !this.preTimeoutScheduled) {
      const pre = this.opts.deadline - 2000;
      if (pre > now && pre < at) {
        at = pre;
        preTimeout = true;
      }
    }
    this.preTimeoutScheduled ||= preTimeout;
    this.bookmarkTimer = setTimeout(() => {
      if (this.closed) return;
      this.bookmark(false);
      this.scheduleBookmark();
    }, Math.max(1, at - now));
    this.bookmarkTimer.unref();
  }

  private push(e: Entry): void {
    if (this.closed) return;
    this.queue.push(e);
    this.pump();
  }

  private pump(): void {
    if (this.blocked || this.closed) return;
    const parts: Buffer[] = [];
    let size = 0;
    const flush = (): boolean => {
      if (parts.length === 0) return true;
      const ok = this.res.write(parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, size));
      parts.length = 0;
      size = 0;
      return ok;
    };
    while (this.queue.length > 0 && !this.closed) {
      const head = this.queue[0] as Entry;
      let line: Buffer;
      if (head.kind === "initial") {
        line = this.eventLine("ADDED", head.items[head.next] as StoredObject);
        head.next++;
        if (head.next >= head.items.length) this.queue.shift();
      } else {
        this.queue.shift();
        if (head.kind === "event") {
          this.queuedEvents--;
          line = this.eventLine(head.type, head.object);
        } else if (head.kind === "bookmark") {
          line = this.bookmarkLine(head.initialEventsEnd, head.rv);
        } else {
          parts.push(Buffer.from(`{"type":"ERROR","object":${goJson(head.status)}}\n`));
          flush();
          this.close();
          return;
        }
      }
      parts.push(line);
      size += line.length;
      if (size >= CHUNK_BYTES && !flush()) {
        this.blocked = true;
        this.res.once("drain", () => {
          this.blocked = false;
          this.pump();
        });
        return;
      }
    }
    if (!flush()) {
      this.blocked = true;
      this.res.once("drain", () => {
        this.blocked = false;
        this.pump();
      });
    }
  }

  private eventLine(type: WatchEventType, o: StoredObject): Buffer {
    const { format } = this.opts;
    let obj: Buffer;
    if (format.kind === "json") obj = o.full;
    else if (format.kind === "pom") obj = pomJson(o, format.version);
    else obj = this.tableOf([rowJson(o, this.columns, this.opts.includeObject, format.version, this.opts.now())], String(o.rv));
    return Buffer.concat([Buffer.from(`{"type":"${type}","object":`), obj, Buffer.from("}\n")]);
  }

  private get columns() {
    return this.opts.def.columns;
  }

  /**
   * A one-row Table. Only the stream's first table carries
   * `columnDefinitions`; later ones have `null`, as kubectl's recorded watch shows.
   */
  private tableOf(rows: Buffer[], rv: string): Buffer {
    const version = this.opts.format.kind === "table" ? this.opts.format.version : "v1";
    const cols = this.sentColumns ? "null" : columnDefinitionsJson(this.columns);
    this.sentColumns = true;
    return Buffer.concat([
      Buffer.from(`{"kind":"Table","apiVersion":"meta.k8s.io/${version}","metadata":{"resourceVersion":${JSON.stringify(rv)}},"columnDefinitions":${cols},"rows":[`),
      ...rows.flatMap((r, i) => (i === 0 ? [r] : [Buffer.from(","), r])),
      Buffer.from("]}"),
    ]);
  }

  private bookmarkLine(initialEventsEnd: boolean, resourceVersion: number): Buffer {
    const rv = String(resourceVersion);
    const { def, format } = this.opts;
    const metadata: Record<string, unknown> = { resourceVersion: rv };
    if (initialEventsEnd) metadata.annotations = { "k8s.io/initial-events-end": "true" };
    let obj: string;
    if (format.kind === "pom") {
      obj = goJson({ kind: "PartialObjectMetadata", apiVersion: `meta.k8s.io/${format.version}`, metadata });
    } else if (format.kind === "table") {
      obj = this.tableOf([], rv).toString("utf8");
      if (initialEventsEnd) obj = obj.replace(/"metadata":\{"resourceVersion":"(\d+)"\}/, `"metadata":{"resourceVersion":"$1","annotations":{"k8s.io/initial-events-end":"true"}}`);
    } else if (def.encoding === "unstructured") {
      obj = goJson({ apiVersion: def.apiVersion, kind: def.kind, metadata });
    } else {
      obj = goJson({ kind: def.kind, apiVersion: def.apiVersion, metadata, ...(def.bookmarkFields ?? {}) });
    }
    return Buffer.from(`{"type":"BOOKMARK","object":${obj}}\n`);
  }
}
