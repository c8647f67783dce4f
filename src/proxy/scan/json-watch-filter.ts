/**
 * The JSON WATCH filter: a Transform over a stream of `WatchEvent` objects
 * (`{"type":…,"object":{…}}`, newline-delimited by the apiserver) that passes
 * only this replica's events.
 *
 * - Each event is held whole (bounded by `maxEventBytes`), fully validated,
 *   then judged: in-range ADDED/MODIFIED/DELETED and every BOOKMARK and ERROR
 *   pass byte for byte (with the newline that follows them); out-of-range
 *   mutations are dropped and may become a synthetic BOOKMARK.
 * - Fail closed: an unknown event type, an event without a type or without
 *   object metadata, malformed JSON, an oversized event, or a stream cut
 *   inside an event ends the output with one ERROR event (a `Status`, 500
 *   InternalError). Nothing unjudged is ever passed on.
 * - Table watches (kubectl `--watch`): each event is a one-row Table judged by
 *   `rows[0].object.metadata`; the `columnDefinitions` that only the first
 *   event carries are moved into the first event that passes.
 */
import { Transform, type TransformCallback } from "node:stream";
import { ScanError } from "../../errors.ts";
import type { HashMatcher } from "../../shard/range.ts";
import { JsonKeyReader, jsonKeyPaths, KEY_NODE_IDS, pathsPerKey } from "./json-key.ts";
import { bytesEqual, coalesce, compilePaths, decodeJsonString, DEFAULT_MAX_DEPTH, JsonScanner, KIND_ARRAY, KIND_OBJECT, runFilterStep, type PathNode, type ScanSink, type ValueKind } from "./json-scanner.ts";
import { BookmarkPacer, DEFAULT_BOOKMARK_INTERVAL_MS, type DroppedObject } from "./bookmark-pacer.ts";
import { countsUnkeyed, KEY_EMPTY, KEY_PENDING, KEY_UNLABELLED, KeyResult, type ObjectKey } from "./object-key.ts";
import { DEFAULT_MAX_OBJECT_BYTES, INITIAL_EVENTS_END, type NarrowableWatchFilter, type WatchFilterCommonOptions, type WatchFilterStats } from "./filter-contract.ts";
import { jsonWatchErrorLine } from "./status-encoding.ts";
import { ByteRouter, EMIT, HOLD, SKIP } from "./byte-router.ts";

export interface WatchFilterOptions extends WatchFilterCommonOptions {
  /** Largest event accepted; a larger one ends the stream with an ERROR event. Default {@link DEFAULT_MAX_OBJECT_BYTES}. */
  readonly maxEventBytes?: number;
  /** Nesting limit. Default 10000, as Go's encoding/json. */
  readonly maxDepth?: number;
}

// Node ids.
const EVENT = 1;
const TYPE = 2;
const OBJECT = 3;
const KIND = 4;
const API_VERSION = 5;
const META = 6;
const RV = 8;
const INITIAL_END = 9;
const COLUMNS = 10;
const ROW = 11;
const ROW_META = 12;
const ROW_RV = 14;
/** The key readers' ids: one for the object's metadata, one for a Table row's (json-key.ts). */
const KEY_BASE = 32;
const ROW_KEY_BASE = KEY_BASE + KEY_NODE_IDS;

function watchPaths(key: ObjectKey): PathNode {
  return compilePaths({
    id: EVENT,
    keys: {
      type: { id: TYPE },
      object: {
        id: OBJECT,
        keys: {
          kind: { id: KIND },
          apiVersion: { id: API_VERSION },
          metadata: {
            id: META,
            keys: {
              ...jsonKeyPaths(key, KEY_BASE),
              resourceVersion: { id: RV },
              annotations: { keys: { "k8s.io/initial-events-end": { id: INITIAL_END } } },
            },
          },
          columnDefinitions: { id: COLUMNS },
          rows: { element: { id: ROW, keys: { object: { keys: { metadata: { id: ROW_META, keys: { ...jsonKeyPaths(key, ROW_KEY_BASE), resourceVersion: { id: ROW_RV } } } } } } } },
        },
      },
    },
  });
}

const WATCH_PATHS = pathsPerKey(watchPaths);

/** What the scan of one event found; reset for each event. */
class EventInfo {
  start = -1;
  rootKind = 0;
  type: string | undefined;
  objectKind = 0;
  objectStart = -1;
  kind: string | undefined;
  apiVersion: string | undefined;
  meta = false;
  /** The object's key once read; kept so a narrowing can judge the event again. */
  readonly key = new KeyResult();
  rv: string | undefined;
  initialEnd = false;
  columnsKind = 0;
  columnsStart = -1;
  columnsEnd = -1;
  rows = 0;
  rowMeta = false;
  readonly rowKey = new KeyResult();
  rowRv: string | undefined;
  /** Everything the decision needs is known; the rest of the event is scanned untracked. */
  pruned = false;

  reset(start: number, rootKind: number): void {
    this.start = start;
    this.rootKind = rootKind;
    this.type = undefined;
    this.objectKind = 0;
    this.objectStart = -1;
    this.kind = undefined;
    this.apiVersion = undefined;
    this.meta = false;
    this.key.reset();
    this.rv = undefined;
    this.initialEnd = false;
    this.columnsKind = 0;
    this.columnsStart = -1;
    this.columnsEnd = -1;
    this.rows = 0;
    this.rowMeta = false;
    this.rowKey.reset();
    this.rowRv = undefined;
    this.pruned = false;
  }

  /**
   * A plain (not Table) mutation whose type, kind, apiVersion, key and
   * resourceVersion are all known: nothing later in it can change the verdict
   * or the synthetic bookmark, so the scanner may stop looking inside it.
   */
  get decidable(): boolean {
    return (
      this.meta &&
      this.key.state !== KEY_PENDING &&
      this.rv !== undefined &&
      this.kind !== undefined &&
      this.kind !== "Table" &&
      this.apiVersion !== undefined &&
      (this.type === "ADDED" || this.type === "MODIFIED" || this.type === "DELETED")
    );
  }

  get isTable(): boolean {
    return this.kind === "Table";
  }
}

/** Decodes a string, reusing the previous result when the bytes are the same. */
class LastString {
  #bytes: Buffer = Buffer.alloc(0);
  #value = "";

  decode(buf: Buffer, start: number, end: number, escaped: boolean): string {
    if (!escaped && bytesEqual(buf, start, end, this.#bytes)) return this.#value;
    this.#value = decodeJsonString(buf, start, end, escaped);
    this.#bytes = Buffer.from(buf.subarray(start, end)); // a copy: buf may be scratch or a chunk
    return this.#value;
  }
}

const TYPES = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"].map((name) => ({ name, bytes: Buffer.from(name) }));

/** An event type without allocating a string for the five known ones. */
function knownType(buf: Buffer, start: number, end: number): string {
  for (const t of TYPES) if (bytesEqual(buf, start, end, t.bytes)) return t.name;
  return buf.toString("utf8", start, end);
}

type Verdict = { readonly action: "pass" } | { readonly action: "drop"; readonly unkeyed: boolean; readonly unlabelled: boolean } | { readonly action: "fail"; readonly reason: string };

const PASS: Verdict = { action: "pass" };
const DROP: Verdict = { action: "drop", unkeyed: false, unlabelled: false };
const DROP_UNKEYED: Verdict = { action: "drop", unkeyed: true, unlabelled: false };
const DROP_UNLABELLED: Verdict = { action: "drop", unkeyed: false, unlabelled: true };

/**
 * The decision for one fully scanned event. Pure but for the matcher, which
 * may record the key of what it lets through. The key is judged with the
 * matcher in force when the event ends, so a narrowing between two chunks
 * of one event applies to it.
 */
function judge(ev: EventInfo, key: ObjectKey, matcher: HashMatcher): Verdict {
  if (ev.rootKind !== KIND_OBJECT) return { action: "fail", reason: "a watch event that is not a JSON object" };
  switch (ev.type) {
    case undefined:
      return { action: "fail", reason: "a watch event without a type" };
    case "BOOKMARK":
    case "ERROR":
      return PASS;
    case "ADDED":
    case "MODIFIED":
    case "DELETED":
      break;
    default:
      // Unknown (future) mutation types must not bypass sharding.
      return { action: "fail", reason: `a watch event of unknown type ${JSON.stringify(ev.type)}` };
  }
  if (ev.objectKind !== KIND_OBJECT) return { action: "fail", reason: `a ${ev.type} event without an object` };
  let found: KeyResult;
  if (ev.isTable) {
    if (ev.rows !== 1) return { action: "fail", reason: `a ${ev.type} Table event with ${ev.rows} rows (one expected)` };
    if (!ev.rowMeta) return { action: "fail", reason: `a ${ev.type} Table event whose row has no object metadata (includeObject=None cannot be sharded)` };
    found = ev.rowKey;
  } else {
    if (!ev.meta) return { action: "fail", reason: `a ${ev.type} event whose object has no metadata` };
    found = ev.key;
  }
  if (found.inRange(matcher)) return PASS;
  // No key hashes as "", as on the server (and in the list filter and both
  // protobuf filters): cluster-scoped objects under namespace keying, and
  // an object without a uid (counted). No slot label: in no shard (counted).
  if (found.state === KEY_UNLABELLED) return DROP_UNLABELLED;
  return found.state === KEY_EMPTY && countsUnkeyed(key) ? DROP_UNKEYED : DROP;
}


/** The ERROR event that ends a stream the filter cannot judge. */
function errorEvent(message: string): Buffer {
  return Buffer.from(jsonWatchErrorLine(500, `shardcar: ${message}`, "InternalError"));
}

function bookmarkEvent(obj: DroppedObject): Buffer {
  return Buffer.from(
    `{"type":"BOOKMARK","object":{"kind":${JSON.stringify(obj.kind)},"apiVersion":${JSON.stringify(obj.apiVersion)},"metadata":{"resourceVersion":${JSON.stringify(obj.resourceVersion)}}}}\n`,
  );
}

/** The stream-free engine: `write` returns the bytes to send for a chunk; `end` for the end of input. */
class WatchFilterEngine implements ScanSink {
  readonly stats: WatchFilterStats = { events: 0, passed: 0, dropped: 0, syntheticBookmarks: 0, bytesIn: 0, bytesOut: 0, errors: 0 };
  /** Set once the output must end (an ERROR event was written). */
  terminated = false;
  /** Set when the upstream initial-events-end bookmark has just been passed on. */
  initialEventsEnded = false;

  private matcher: HashMatcher;
  private readonly key: ObjectKey;
  private readonly keyReader: JsonKeyReader;
  private readonly rowReader: JsonKeyReader;
  private readonly onUnlabelled: ((object: string) => void) | undefined;
  /** Labels mode: events dropped for a missing or malformed slot label (in `stats.dropped` too). */
  unlabelled = 0;
  /** A Table event was seen: its rows carry no object a synthetic DELETED could name. */
  private sawTable = false;
  private readonly maxEventBytes: number;
  private readonly now: () => number;
  private readonly pacer: BookmarkPacer;
  private readonly scanner: JsonScanner;
  private readonly ev = new EventInfo();

  private readonly route: ByteRouter;

  // Judged events wait until their line ends (a newline, or a clean end of
  // input): anything unreadable later on the same line retracts the whole
  // line, so no line that fails to parse is ever passed, even in part.
  private lineOpen = false;
  private linePassed = false;
  private lineOut: Buffer[] = [];
  private lineInitialEnd = false;
  private readonly lineCounts = { passed: 0, dropped: 0, synthetic: 0 };

  // A watch stream repeats one kind and apiVersion: decode each once.
  private readonly kinds = new LastString();
  private readonly apiVersions = new LastString();

  /** The first Table event's column definitions, while no event carrying them has passed. */
  private pendingColumns: Buffer | undefined;
  private columnsDelivered = false;

  constructor(opts: WatchFilterOptions) {
    this.matcher = opts.matcher;
    this.key = opts.key;
    this.keyReader = new JsonKeyReader(opts.key, KEY_BASE);
    this.rowReader = new JsonKeyReader(opts.key, ROW_KEY_BASE);
    this.onUnlabelled = opts.onUnlabelled;
    this.maxEventBytes = opts.maxEventBytes ?? DEFAULT_MAX_OBJECT_BYTES;
    this.route = new ByteRouter(EMIT, this.maxEventBytes, (pos) => this.tooLarge(pos));
    this.now = opts.now ?? (() => performance.now());
    this.pacer = new BookmarkPacer({
      allowBookmarks: opts.allowBookmarks,
      initialEvents: opts.initialEvents,
      intervalMs: opts.bookmarkIntervalMs ?? DEFAULT_BOOKMARK_INTERVAL_MS,
    });
    this.scanner = new JsonScanner(WATCH_PATHS(opts.key), this, {
      maxDepth: opts.maxDepth ?? DEFAULT_MAX_DEPTH,
      maxTokenBytes: this.maxEventBytes,
      multi: true,
    });
  }

  /**
   * Whether the matcher may change right now: between events (no judged
   * event waits for its line's end), past any initial events, not a Table
   * watch, not ended.
   */
  get canNarrow(): boolean {
    return !this.terminated && !this.lineOpen && this.pacer.initialEventsDone && !this.sawTable;
  }

  /**
   * From the next event judged on: an event in progress is judged when it
   * ends, so it meets the new matcher (it is delivered after the synthetic
   * DELETEDs, so the old verdict must not let it through).
   */
  setMatcher(matcher: HashMatcher): void {
    this.matcher = matcher;
  }

  write(chunk: Buffer): Buffer[] {
    this.stats.bytesIn += chunk.length;
    if (this.terminated) return [];
    const base = this.stats.bytesIn - chunk.length;
    this.route.begin(chunk, base);
    try {
      this.scanner.scan(chunk, base);
      if (!this.terminated) {
        this.route.switchTo(this.route.mode, this.stats.bytesIn);
        if (this.ev.start >= 0 && this.stats.bytesIn - this.ev.start > this.maxEventBytes) throw this.tooLarge(this.stats.bytesIn);
      }
    } catch (err) {
      if (!(err instanceof ScanError)) throw err;
      this.terminate(`unreadable watch stream: ${err.message}`);
    }
    return this.route.take();
  }

  end(): Buffer[] {
    if (this.terminated) return [];
    if (!this.scanner.complete) {
      this.terminate(`the upstream watch stream ended inside an event (after ${this.stats.bytesIn} bytes)`);
      return this.route.take();
    }
    if (this.lineOpen) this.release(this.stats.bytesIn);
    const due = this.pacer.flush(this.now());
    if (due !== undefined) this.route.push(this.bookmark(due));
    return this.route.take();
  }

  private tooLarge(pos: number): ScanError {
    return new ScanError("SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE", `a watch event exceeds ${this.maxEventBytes} bytes`, { offset: pos, depth: this.scanner.currentDepth });
  }

  private terminate(reason: string): void {
    if (this.lineOpen) {
      // The open line did not parse after all: retract all of it.
      this.stats.passed -= this.lineCounts.passed;
      this.stats.dropped -= this.lineCounts.dropped;
      this.stats.syntheticBookmarks -= this.lineCounts.synthetic;
      this.lineOut = [];
      this.lineOpen = false;
    }
    this.route.push(errorEvent(reason));
    this.stats.errors++;
    this.terminated = true;
    this.route.dropHeld();
    this.scanner.stop();
  }

  private bookmark(obj: DroppedObject): Buffer {
    this.stats.syntheticBookmarks++;
    return bookmarkEvent(obj);
  }

  /** The open line ended at `pos` (exclusive): its events' output, and the trailing whitespace of a passed last event, go out. */
  private release(pos: number): void {
    this.route.switchTo(this.linePassed ? EMIT : SKIP, pos);
    for (const b of this.lineOut) this.route.push(b);
    this.route.releaseHeld();
    this.lineOut = [];
    this.lineOpen = false;
    if (this.lineInitialEnd) {
      this.lineInitialEnd = false;
      this.initialEventsEnded = true;
    }
  }

  // -- ScanSink --------------------------------------------------------------

  enter(id: number, pos: number, kind: ValueKind): void {
    const ev = this.ev;
    if (this.keyReader.owns(id)) {
      if (this.keyReader.enter(id, kind)) this.keyDecided();
      return;
    }
    if (this.rowReader.owns(id)) {
      if (this.rowReader.enter(id, kind)) ev.rowKey.copy(this.rowReader.result);
      return;
    }
    switch (id) {
      case EVENT:
        // Whitespace before the event goes out or not, per the previous event.
        this.route.switchTo(HOLD, pos);
        // A passed event earlier on this (still open) line, with the
        // whitespace since: committed to the line's output.
        this.route.releaseHeld(this.lineOut);
        ev.reset(pos, kind);
        return;
      case OBJECT:
        ev.objectKind = kind;
        ev.objectStart = pos;
        return;
      case META:
        ev.meta = kind === KIND_OBJECT;
        if (ev.meta) this.keyReader.begin();
        return;
      case COLUMNS:
        ev.columnsKind = kind;
        ev.columnsStart = pos;
        return;
      case ROW:
        ev.rows++;
        // Only the first row decides; a second one fails the event, so stop
        // looking inside the rows array (its depth is the scanner's current one).
        if (ev.rows > 1) this.scanner.untrackBelow(this.scanner.currentDepth - 1);
        return;
      case ROW_META:
        ev.rowMeta = kind === KIND_OBJECT;
        if (ev.rowMeta) this.rowReader.begin();
        return;
      default:
        return;
    }
  }

  string(id: number, buf: Buffer, start: number, end: number, escaped: boolean, after: number): void {
    const ev = this.ev;
    if (this.keyReader.owns(id)) {
      if (this.keyReader.string(id, buf, start, end, escaped)) this.keyDecided();
      return;
    }
    if (this.rowReader.owns(id)) {
      if (this.rowReader.string(id, buf, start, end, escaped)) ev.rowKey.copy(this.rowReader.result);
      return;
    }
    switch (id) {
      // Strings get no leave(): a string where an event or the column
      // definitions should be ends here (and fails the event when judged).
      case EVENT:
        this.finishEvent(after);
        return;
      case COLUMNS:
        ev.columnsEnd = after;
        return;
      case TYPE:
        ev.type = escaped ? decodeJsonString(buf, start, end, true) : knownType(buf, start, end);
        return;
      case KIND:
        ev.kind = this.kinds.decode(buf, start, end, escaped);
        return;
      case API_VERSION:
        ev.apiVersion = this.apiVersions.decode(buf, start, end, escaped);
        return;
      case RV:
        ev.rv = decodeJsonString(buf, start, end, escaped);
        this.pruneIfDecidable();
        return;
      case ROW_RV:
        ev.rowRv = decodeJsonString(buf, start, end, escaped);
        return;
      case INITIAL_END:
        ev.initialEnd = decodeJsonString(buf, start, end, escaped) === "true";
        return;
      default:
        return;
    }
  }

  leave(id: number, end: number): void {
    const ev = this.ev;
    if (this.keyReader.owns(id)) {
      if (this.keyReader.leave(id)) this.keyDecided();
      return;
    }
    if (this.rowReader.owns(id)) {
      if (this.rowReader.leave(id)) ev.rowKey.copy(this.rowReader.result);
      return;
    }
    switch (id) {
      case COLUMNS:
        ev.columnsEnd = end;
        return;
      case EVENT:
        this.finishEvent(end);
        return;
      case META:
        if (!ev.meta || ev.key.state !== KEY_PENDING) return;
        this.keyReader.finish();
        this.keyDecided();
        return;
      case ROW_META:
        if (!ev.rowMeta || ev.rowKey.state !== KEY_PENDING) return;
        this.rowReader.finish();
        ev.rowKey.copy(this.rowReader.result);
        return;
      default:
        return;
    }
  }

  private keyDecided(): void {
    if (this.ev.key.state !== KEY_PENDING) return;
    this.ev.key.copy(this.keyReader.result);
    this.pruneIfDecidable();
  }

  /**
   * After the key or the RV: prune what is left of the event once it is
   * decidable (labels, annotations, managedFields, spec and status are most
   * of its bytes). Depth 1 keeps the event itself tracked, for its end.
   */
  private pruneIfDecidable(): void {
    const ev = this.ev;
    if (!ev.pruned && ev.decidable) {
      ev.pruned = true;
      this.scanner.untrackBelow(1);
    }
  }

  comma(): void {}

  lineEnd(pos: number): void {
    if (this.lineOpen) this.release(pos + 1);
  }

  /** The held bytes so far, flushed up to `end` and taken out of `held`. */
  private takeHeld(end: number): Buffer[] {
    this.route.switchTo(HOLD, end);
    return this.route.takeHeld();
  }

  private finishEvent(end: number): void {
    const ev = this.ev;
    // The limit is on the event, not on what is held: write() checks it at
    // each chunk's end, this at the event's, so a dropped event that began
    // and ended inside one chunk meets it too (the outcome must not depend
    // on how the upstream chunked it).
    if (end - ev.start > this.maxEventBytes) throw this.tooLarge(end);
    this.stats.events++;
    const verdict = judge(ev, this.key, this.matcher);
    if (verdict.action === "fail") {
      this.terminate(verdict.reason);
      return;
    }
    const rv = ev.isTable ? (ev.rv ?? ev.rowRv) : ev.rv;
    if (ev.isTable) this.sawTable = true;
    if (!this.lineOpen) {
      this.lineOpen = true;
      this.lineOut = [];
      this.lineCounts.passed = 0;
      this.lineCounts.dropped = 0;
      this.lineCounts.synthetic = 0;
      this.lineInitialEnd = false;
    }
    if (verdict.action === "pass") {
      const mutation = ev.type !== "BOOKMARK" && ev.type !== "ERROR";
      // Otherwise the held range simply runs on through the line's end, so a
      // passed event goes out as one view of the input.
      if (mutation && ev.isTable) this.passTable(this.takeHeld(end), this.lineOut);
      this.stats.passed++;
      this.lineCounts.passed++;
      const initialEnd = ev.type === "BOOKMARK" && ev.initialEnd;
      if (initialEnd && !this.pacer.initialEventsDone) this.lineInitialEnd = true;
      // An upstream ERROR carries a Status, not the watched object: no RV to learn.
      this.pacer.passed(ev.type === "ERROR" ? undefined : rv, initialEnd);
      // The whitespace after a passed event (its newline) stays held and goes out with it.
      this.linePassed = true;
    } else {
      this.stats.dropped++;
      if (verdict.unlabelled) {
        this.unlabelled++;
        this.onUnlabelled?.((ev.isTable ? this.rowReader : this.keyReader).describe());
      }
      if (ev.isTable && ev.columnsKind === KIND_ARRAY && !this.columnsDelivered && this.pendingColumns === undefined) {
        // Copied: the held chunks must not stay pinned for the life of the watch.
        this.pendingColumns = Buffer.from(Buffer.concat(this.takeHeld(end)).subarray(ev.columnsStart - ev.start, ev.columnsEnd - ev.start));
      }
      // Discard the event (no view needed for bytes that never go out).
      this.route.restart(SKIP, end);
      const dropped = rv !== undefined && ev.kind !== undefined && ev.apiVersion !== undefined ? { resourceVersion: rv, kind: ev.kind, apiVersion: ev.apiVersion } : undefined;
      const due = this.pacer.dropped(dropped, this.now());
      if (due !== undefined) this.lineOut.push(this.bookmark(due));
      this.lineCounts.dropped++;
      if (due !== undefined) this.lineCounts.synthetic++;
      this.linePassed = false;
    }
    ev.start = -1;
  }

  /** Passes a Table event, moving the first event's column definitions into it if they were dropped. */
  private passTable(held: Buffer[], into: Buffer[]): void {
    const ev = this.ev;
    if (ev.columnsKind === KIND_ARRAY) {
      this.columnsDelivered = true;
      this.pendingColumns = undefined;
    }
    const cols = this.pendingColumns;
    if (cols === undefined || this.columnsDelivered) {
      for (const b of held) into.push(b);
      return;
    }
    const buf = Buffer.concat(held);
    let spliced: Buffer;
    if (ev.columnsKind !== 0) {
      // `"columnDefinitions":null` (what later events carry): put the saved array in its place.
      const s = ev.columnsStart - ev.start;
      const e = ev.columnsEnd - ev.start;
      spliced = Buffer.concat([buf.subarray(0, s), cols, buf.subarray(e)]);
    } else {
      // No such member at all: add it as the Table's first member.
      const at = ev.objectStart - ev.start + 1;
      spliced = Buffer.concat([buf.subarray(0, at), Buffer.from('"columnDefinitions":'), cols, Buffer.from(","), buf.subarray(at)]);
    }
    into.push(spliced);
    this.columnsDelivered = true;
    this.pendingColumns = undefined;
  }
}

class JsonWatchFilter extends Transform {
  readonly #engine: WatchFilterEngine;
  readonly #onDeliver: ((chunk: Buffer) => void) | undefined;
  #ended = false;

  constructor(opts: WatchFilterOptions) {
    super();
    this.#engine = new WatchFilterEngine(opts);
    this.#onDeliver = opts.onDeliver;
  }

  get narrowable(): boolean {
    return !this.#ended && !this.readableEnded && !this.destroyed && this.#engine.canNarrow;
  }

  narrow(matcher: HashMatcher, events: readonly Buffer[]): boolean {
    if (!this.narrowable) return false;
    this.#engine.setMatcher(matcher);
    this.#send([...events]);
    return true;
  }

  get stats(): WatchFilterStats {
    return this.#engine.stats;
  }

  get unlabelled(): number {
    return this.#engine.unlabelled;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.#ended) {
      // After our ERROR event the output is over; upstream bytes are discarded
      // until the caller tears the upstream down.
      this.#engine.stats.bytesIn += chunk.length;
      callback();
      return;
    }
    runFilterStep(callback, () => this.#engine.write(chunk), (parts) => this.#send(parts));
  }

  override _flush(callback: TransformCallback): void {
    if (this.#ended) {
      callback();
      return;
    }
    runFilterStep(callback, () => this.#engine.end(), (parts) => this.#send(parts));
  }

  #send(parts: Buffer[]): void {
    // Views of the input, never copies (see the list filter).
    for (const buf of coalesce(parts)) {
      this.#engine.stats.bytesOut += buf.length;
      this.#onDeliver?.(buf);
      this.push(buf);
    }
    if (this.#engine.initialEventsEnded) {
      this.#engine.initialEventsEnded = false;
      this.emit(INITIAL_EVENTS_END);
    }
    if (this.#engine.terminated && !this.#ended) {
      this.#ended = true;
      this.push(null);
    }
  }
}

/**
 * Creates the filter for one WATCH response body (uncompressed JSON stream).
 *
 * - Output: the in-range events, BOOKMARKs and ERRORs byte for byte, in
 *   order, plus synthetic BOOKMARKs for dropped events when `allowBookmarks`.
 * - Fail closed: anything it cannot judge ends the output with one ERROR
 *   event (`stats.errors` = 1) and then `push(null)`: the readable side ends
 *   normally and later upstream bytes are discarded, so the caller must tear
 *   the upstream response down when the client response closes. The stream
 *   never emits `'error'` for bad input; `'error'` only comes from outside
 *   (e.g. `pipeline` destroying it).
 * - Emits `'initial-events-end'` once, when the upstream
 *   `k8s.io/initial-events-end` bookmark has been passed on.
 *
 * One filter per stream; never reused. Never blocks; throws nothing itself.
 */
export function createJsonWatchFilter(opts: WatchFilterOptions): NarrowableWatchFilter {
  return new JsonWatchFilter(opts);
}
