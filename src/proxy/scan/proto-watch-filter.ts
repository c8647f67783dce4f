/**
 * Filters a protobuf WATCH stream (`application/vnd.kubernetes.protobuf;stream=watch`)
 * frame by frame: a 4-byte big-endian length, then a WatchEvent {type = 1,
 * object = 2 → RawExtension {raw = 1}} whose raw is a `k8s\0` envelope.
 *
 * - ADDED, MODIFIED and DELETED pass byte for byte when their object is in
 *   range, and are dropped otherwise. A dropped event may become a synthetic
 *   BOOKMARK carrying its apiVersion, kind and resourceVersion, paced by the
 *   {@link BookmarkPacer} the JSON watch filter uses too (at most one per
 *   interval, never before initial-events-end, never an older RV).
 * - BOOKMARK and ERROR pass.
 * - Any other type, an unparsable frame, a frame over `maxFrameBytes` or a
 *   stream that ends inside a frame ends the stream with one ERROR event
 *   (a 500 InternalError Status). Nothing after it is delivered, and nothing
 *   is ever passed unfiltered.
 *
 * Memory: frames that sit inside one input chunk are inspected in place; a
 * frame that straddles chunks is assembled in a buffer of its own size (at
 * most `maxFrameBytes`). Nothing else is held.
 */
import { Transform, type TransformCallback } from "node:stream";
import { ScanError } from "../../errors.ts";
import type { HashMatcher } from "../../shard/range.ts";
import { BookmarkPacer, DEFAULT_BOOKMARK_INTERVAL_MS, type DroppedObject } from "./bookmark-pacer.ts";
import { KEY_UNLABELLED } from "./object-key.ts";
import { ProtoKeyReader } from "./proto-key.ts";
import { EnvelopeScan, ObjectScan } from "./proto-object.ts";
import { protoBookmarkFrame, typeMeta } from "./proto-frames.ts";
import { protoWatchErrorFrame } from "./status-encoding.ts";
import { bytesEqual, WIRE_LEN, WireReader } from "./proto-wire.ts";
import { DEFAULT_MAX_OBJECT_BYTES, INITIAL_EVENTS_END, type NarrowableWatchFilter, type WatchFilterCommonOptions, type WatchFilterStats } from "./filter-contract.ts";

export interface ProtoWatchFilterOptions extends WatchFilterCommonOptions {
  /** Largest frame accepted. Default {@link DEFAULT_MAX_OBJECT_BYTES}. */
  readonly maxFrameBytes?: number;
}

// Event types, as they appear in WatchEvent.type.
const OTHER = 0;
const ADDED = 1;
const MODIFIED = 2;
const DELETED = 3;
const BOOKMARK = 4;
const ERROR = 5;

const TYPE_NAMES: ReadonlyArray<readonly [number, Buffer]> = [
  [ADDED, Buffer.from("ADDED")],
  [MODIFIED, Buffer.from("MODIFIED")],
  [DELETED, Buffer.from("DELETED")],
  [BOOKMARK, Buffer.from("BOOKMARK")],
  [ERROR, Buffer.from("ERROR")],
];

function eventType(buf: Uint8Array, start: number, end: number): number {
  for (const [code, name] of TYPE_NAMES) if (bytesEqual(buf, start, end, name)) return code;
  return OTHER;
}

function syntax(message: string, offset: number, depth: number): ScanError {
  return new ScanError("SHARDCAR_ERR_SCAN_SYNTAX", message, { offset, depth });
}

/** apiVersion and kind read from a TypeMeta, remembered by its bytes: a stream has one type. */
class TypeMetaCache {
  private bytes: Buffer = Buffer.alloc(0);
  apiVersion = "";
  kind = "";
  private readonly r = new WireReader();

  read(buf: Uint8Array, start: number, end: number): void {
    if (bytesEqual(buf, start, end, this.bytes)) return;
    this.bytes = Buffer.from(buf.subarray(start, end));
    this.apiVersion = this.kind = "";
    const r = this.r.reset(this.bytes, 0, this.bytes.length);
    while (r.next()) {
      if (r.wire !== WIRE_LEN) continue;
      if (r.field === 1) this.apiVersion = this.bytes.toString("utf8", r.valueStart, r.valueEnd);
      else if (r.field === 2) this.kind = this.bytes.toString("utf8", r.valueStart, r.valueEnd);
    }
  }
}

class ProtoWatchFilter extends Transform {
  readonly stats: WatchFilterStats = { events: 0, passed: 0, dropped: 0, syntheticBookmarks: 0, bytesIn: 0, bytesOut: 0, errors: 0 };

  private matcher: HashMatcher;
  private readonly key: ProtoKeyReader;
  private readonly onUnlabelled: ((object: string) => void) | undefined;
  /** Labels mode: events dropped for a missing or malformed slot label (in `stats.dropped` too). */
  unlabelled = 0;
  private readonly onDeliver: ((chunk: Buffer) => void) | undefined;
  private readonly allowBookmarks: boolean;
  private readonly now: () => number;
  private readonly maxFrameBytes: number;
  private readonly pacer: BookmarkPacer;
  private readonly types = new TypeMetaCache();
  /** Set once the stream has been ended with an ERROR; later input is discarded. */
  private dead = false;

  // Framing state. `offset` is the stream offset of the current chunk's byte 0.
  private offset = 0;
  private readonly header = Buffer.alloc(4);
  private headerHave = 0;
  /** A frame being assembled across chunks: the 4-byte header, then the body. */
  private partial: Buffer | undefined;
  private partialHave = 0;
  private partialAt = 0;

  private readonly event = new WireReader();
  private readonly rawExt = new WireReader();
  private readonly env = new EnvelopeScan();
  private readonly object = new ObjectScan();

  constructor(opts: ProtoWatchFilterOptions) {
    super();
    this.matcher = opts.matcher;
    this.onDeliver = opts.onDeliver;
    this.key = new ProtoKeyReader(opts.key);
    this.onUnlabelled = opts.onUnlabelled;
    this.allowBookmarks = opts.allowBookmarks;
    this.now = opts.now ?? (() => performance.now());
    this.maxFrameBytes = opts.maxFrameBytes ?? DEFAULT_MAX_OBJECT_BYTES;
    this.pacer = new BookmarkPacer({
      allowBookmarks: opts.allowBookmarks,
      initialEvents: opts.initialEvents,
      intervalMs: opts.bookmarkIntervalMs ?? DEFAULT_BOOKMARK_INTERVAL_MS,
    });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.stats.bytesIn += chunk.length;
    if (this.dead) {
      callback();
      return;
    }
    try {
      this.parse(chunk);
    } catch (err) {
      this.fail(err);
    }
    this.offset += chunk.length;
    callback();
  }

  override _flush(callback: TransformCallback): void {
    if (this.dead) {
      callback();
      return;
    }
    if (this.headerHave > 0 || this.partial !== undefined) {
      const announced = this.partial === undefined ? "" : ` (${this.partial.length - 4} bytes announced, ${this.partialHave - 4} received)`;
      this.fail(new ScanError("SHARDCAR_ERR_SCAN_TRUNCATED", `protobuf watch stream ended inside a frame${announced}`, { offset: this.offset, depth: 0 }));
      callback();
      return;
    }
    // A clean end: the last dropped event's bookmark, if it was still waiting.
    if (this.allowBookmarks) this.sendBookmark(this.pacer.flush(this.now()));
    callback();
  }

  private sendBookmark(due: DroppedObject | undefined): void {
    if (due === undefined) return;
    this.stats.syntheticBookmarks++;
    this.send(protoBookmarkFrame(typeMeta(due.apiVersion, due.kind), Buffer.from(due.resourceVersion, "utf8")));
  }

  /**
   * Ends the stream: one ERROR event, then end of data. Frames before the
   * bad one were complete and already delivered; nothing after it is.
   */
  private fail(err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    this.dead = true;
    this.partial = undefined;
    this.stats.errors++;
    this.send(protoWatchErrorFrame(500, `shardcar: cannot filter this watch stream: ${message}`, "InternalError"));
    this.push(null);
  }

  /** See {@link NarrowableWatchFilter.narrow}; between chunks every judged frame has been sent. */
  get narrowable(): boolean {
    return !this.dead && !this.readableEnded && !this.destroyed && this.pacer.initialEventsDone;
  }

  narrow(matcher: HashMatcher, events: readonly Buffer[]): boolean {
    if (!this.narrowable) return false;
    this.matcher = matcher;
    for (const e of events) this.send(e);
    return true;
  }

  private send(b: Buffer): void {
    this.stats.bytesOut += b.length;
    this.onDeliver?.(b);
    this.push(b);
  }

  private parse(c: Buffer): void {
    const n = c.length;
    const base = this.offset;
    let i = 0;
    // Consecutive passing frames inside this chunk go out as one slice.
    let runStart = -1;
    let runEnd = -1;
    const flushRun = (): void => {
      if (runStart >= 0) this.send(c.subarray(runStart, runEnd));
      runStart = runEnd = -1;
    };
    try {
      while (i < n) {
        const partial = this.partial;
        if (partial !== undefined) {
          const take = Math.min(partial.length - this.partialHave, n - i);
          c.copy(partial, this.partialHave, i, i + take);
          this.partialHave += take;
          i += take;
          if (this.partialHave < partial.length) break;
          this.partial = undefined;
          flushRun();
          this.onFrame(partial, 4, partial.length, this.partialAt - 4, () => this.send(partial));
          continue;
        }
        let len: number;
        let frameStart: number;
        if (this.headerHave === 0 && n - i >= 4) {
          frameStart = i;
          len = c.readUInt32BE(i);
          i += 4;
        } else {
          // The length itself straddles chunks.
          while (this.headerHave < 4 && i < n) this.header[this.headerHave++] = c[i++] as number;
          if (this.headerHave < 4) break;
          this.headerHave = 0;
          frameStart = -1;
          len = this.header.readUInt32BE(0);
        }
        if (len > this.maxFrameBytes) {
          throw new ScanError("SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE", `protobuf watch frame of ${len} bytes exceeds the ${this.maxFrameBytes}-byte limit`, {
            offset: base + i - 4,
            depth: 0,
          });
        }
        if (frameStart >= 0 && n - i >= len) {
          // The whole frame is in this chunk: inspect it in place.
          const start = i;
          i += len;
          const frameEnd = i;
          this.onFrame(
            c,
            start,
            frameEnd,
            base,
            () => {
              // Only adjacent frames share a slice: a dropped frame between
              // two passing ones must not ride along.
              if (runStart >= 0 && runEnd !== frameStart) flushRun();
              if (runStart < 0) runStart = frameStart;
              runEnd = frameEnd;
            },
            flushRun,
          );
          continue;
        }
        const frame = Buffer.allocUnsafe(4 + len);
        frame.writeUInt32BE(len, 0);
        this.partial = frame;
        this.partialHave = 4;
        this.partialAt = base + i;
      }
    } finally {
      // Whatever passed before a failure was complete and filtered.
      flushRun();
    }
  }

  /**
   * Inspects one frame body `buf[start, end)` and acts on it: `pass` sends
   * the original bytes, `beforeOther` must run before anything else is sent
   * so frames stay in order.
   */
  private onFrame(buf: Uint8Array, start: number, end: number, base: number, pass: () => void, beforeOther: () => void = () => {}): void {
    this.stats.events++;
    const e = this.event.reset(buf, start, end, base, 0);
    let typeStart = -1;
    let typeEnd = -1;
    let rawStart = -1;
    let rawEnd = -1;
    while (e.next()) {
      if (e.wire !== WIRE_LEN) continue;
      if (e.field === 1) {
        typeStart = e.valueStart;
        typeEnd = e.valueEnd;
      } else if (e.field === 2) {
        // RawExtension; repeated occurrences merge, so the last raw wins.
        const r = this.rawExt.reset(buf, e.valueStart, e.valueEnd, base, 1);
        while (r.next()) {
          if (r.field === 1 && r.wire === WIRE_LEN) {
            rawStart = r.valueStart;
            rawEnd = r.valueEnd;
          }
        }
      }
    }
    const type = typeStart < 0 ? OTHER : eventType(buf, typeStart, typeEnd);
    if (type === OTHER) {
      const name = typeStart < 0 ? "" : Buffer.from(buf.subarray(typeStart, Math.min(typeEnd, typeStart + 64))).toString("utf8");
      // Fail closed: a new mutation type must not bypass sharding.
      throw syntax(`unknown watch event type ${JSON.stringify(name)}`, base + start, 0);
    }
    if (type === ERROR) {
      // An ERROR carries a Status, not the watched object: nothing to learn.
      this.stats.passed++;
      pass();
      this.pacer.passed(undefined, false);
      return;
    }
    // ADDED, MODIFIED, DELETED and BOOKMARK: read the object's envelope and metadata.
    if (rawStart < 0) throw syntax("watch event without object.raw", base + start, 1);
    const env = this.env;
    env.scan(buf, rawStart, rawEnd, base, 2);
    if (env.rawStart < 0) throw syntax("watch event object without runtime.Unknown raw", base + rawStart, 2);
    if (env.contentEncodingLength > 0) throw syntax("watch event object has a contentEncoding; cannot read it", base + rawStart, 2);
    if (env.typeMetaStart < 0) throw syntax("watch event object without typeMeta", base + rawStart, 2);
    const o = this.object;
    const bookmark = type === BOOKMARK;
    o.scan(buf, env.rawStart, env.rawEnd, this.key, base, 3, bookmark && !this.pacer.initialEventsDone);
    const rv = o.rvEnd > o.rvStart ? Buffer.from(buf.buffer, buf.byteOffset + o.rvStart, o.rvEnd - o.rvStart).toString("utf8") : undefined;
    // BOOKMARKs are never filtered; they only carry a resourceVersion.
    const inRange = bookmark || this.key.result.inRange(this.matcher);
    if (inRange) {
      this.stats.passed++;
      pass();
      const initialEventsEnd = bookmark && o.initialEventsEnd && !this.pacer.initialEventsDone;
      this.pacer.passed(rv, bookmark && o.initialEventsEnd);
      if (initialEventsEnd) {
        // Out first, then announced: the listener may act on the client's state.
        beforeOther();
        this.emit(INITIAL_EVENTS_END);
      }
      return;
    }
    this.stats.dropped++;
    if (this.key.result.state === KEY_UNLABELLED) {
      this.unlabelled++;
      this.onUnlabelled?.(this.key.describe());
    }
    // No synthetic bookmark during initial events (the pacer holds them back).
    // client-go's reflector (tools/cache/reflector.go) treats any non-ADDED
    // event, a BOOKMARK included, as proof "that the watch has exited the
    // initial list phase" (handleAnyWatch sets eventReceivedBesidesAdded;
    // Reflector.watch then starts recording resourceVersions). Initial ADDED
    // events carry each object's own, older and unordered resourceVersion, so
    // a bookmark made from one would end that phase early with a wrong RV.
    if (!this.allowBookmarks || !this.pacer.initialEventsDone) return;
    let dropped: DroppedObject | undefined;
    if (rv !== undefined) {
      this.types.read(buf, env.typeMetaStart, env.typeMetaEnd);
      dropped = { resourceVersion: rv, apiVersion: this.types.apiVersion, kind: this.types.kind };
    }
    const due = this.pacer.dropped(dropped, this.now());
    if (due !== undefined) {
      beforeOther();
      this.sendBookmark(due);
    }
  }
}

/**
 * Creates a Transform that filters one protobuf watch stream (see the module
 * comment). Pipe the upstream body in and the output to the client.
 *
 * Never errors: a stream it cannot vouch for is ended with an ERROR event
 * (counted in `stats.errors`) and its readable side ends; input after that
 * is read and discarded, so the caller should abort upstream once the
 * client's response has finished.
 *
 * Emits `"initial-events-end"` (no arguments) once, right after the upstream
 * `k8s.io/initial-events-end` bookmark has been pushed, when `initialEvents`
 * is set. `stats` is updated in place. Single use.
 */
export function createProtoWatchFilter(opts: ProtoWatchFilterOptions): NarrowableWatchFilter {
  return new ProtoWatchFilter(opts);
}
