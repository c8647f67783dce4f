/**
 * Filters a protobuf LIST response body (`application/vnd.kubernetes.protobuf`)
 * down to the items in this shard, streaming.
 *
 * The body is `k8s\0` + runtime.Unknown {typeMeta = 1, raw = 2,
 * contentEncoding = 3, contentType = 4}, and `raw` is the list message:
 * ListMeta = 1 {resourceVersion = 2, continue = 3, remainingItemCount = 4,
 * shardInfo = 5 {selector = 1}}, items = 2 (each an object whose ObjectMeta
 * is field 1). PartialObjectMetadataList has the same layout.
 *
 * - Fast path: when the list's first field is a ListMeta whose
 *   `shardInfo.selector` equals the selector sent, the body is passed on byte
 *   for byte. Nothing after the ListMeta is read; the filter only counts down
 *   Unknown.raw's length, to notice a body cut short. `items`, `kept` and
 *   `dropped` stay 0.
 * - Filter path: each item is hashed and kept or dropped. Kept items are
 *   copied into an output buffer; the envelope is written last, when
 *   Unknown.raw's new length is known, so nothing leaves before the whole
 *   body has been read and checked.
 *
 * Memory on the filter path: one copy of the filtered output, plus the last
 * output block's unused tail (< min(output, 1 MiB)), plus at most one item
 * that straddles two input chunks (an item is decided only once all of it is
 * there, because a later `uid` field would override an earlier one in the
 * client's decoder), plus the envelope head (TypeMeta and ListMeta, bounded
 * below), plus the input chunk being processed. Items that sit inside one
 * input chunk are hashed in place and never copied unless kept. The input is
 * never accumulated.
 */
import { Transform, type TransformCallback } from "node:stream";
import { ScanError } from "../../errors.ts";
import type { HashMatcher } from "../../shard/range.ts";
import { KEY_UNLABELLED, type ObjectKey } from "./object-key.ts";
import { ProtoKeyReader } from "./proto-key.ts";
import { ObjectScan, typeMetaKind } from "./proto-object.ts";
import { DEFAULT_MAX_OBJECT_BYTES, type ListFilterStats } from "./filter-contract.ts";
import {
  bytesEqual,
  K8S_MAGIC,
  lenField,
  lenHeader,
  VarintAccumulator,
  WIRE_I32,
  WIRE_I64,
  WIRE_LEN,
  WIRE_VARINT,
  WireReader,
  writeVarint,
} from "./proto-wire.ts";

export interface ProtoListFilterOptions {
  readonly matcher: HashMatcher;
  /** What places an item in the keyspace (object-key.ts). */
  readonly key: ObjectKey;
  /** Labels mode: an item without a readable slot label was dropped; `object` is its `namespace/name`. */
  readonly onUnlabelled?: (object: string) => void;
  /** The canonical selector sent upstream; the fast path needs it. */
  readonly sentSelector?: string;
  /** Largest single item accepted; a larger one fails the body. Default 16 MiB. */
  readonly maxItemBytes?: number;
}

/**
 * TypeMeta (apiVersion + kind: a DNS group of at most 253 bytes, a version
 * and a kind of at most 63 each), contentEncoding and contentType are a few
 * hundred bytes at most; 4 KiB leaves room and bounds what is held.
 */
const MAX_ENVELOPE_FIELD_BYTES = 4 * 1024;

/**
 * ListMeta holds the continue token and the echoed selector; a selector may
 * be up to 100,000 code points (CEL's expression limit), so up to ~400 KB of
 * UTF-8. 1 MiB covers both with room.
 */
const MAX_LIST_META_BYTES = 1024 * 1024;

/** Output blocks grow from 16 KiB to 1 MiB: small lists stay small, big ones make few blocks. */
const FIRST_BLOCK_BYTES = 16 * 1024;
const MAX_BLOCK_BYTES = 1024 * 1024;

// Parser phases.
const MAGIC = 0;
const TAG = 1;
const LEN = 2;
const VARINT = 3;
const FIXED = 4;
const BODY = 5;
/** Fast path: the rest of Unknown.raw passes unread; only its length is counted down. */
const PASS = 6;

// Where a field's value goes.
const SKIP = 0;
const COLLECT = 1;
const ITEM = 2;

// Nesting levels, also the depth reported in errors.
const ENV = 0;
const LIST = 1;

// Fields by level.
const UNKNOWN_TYPE_META = 1;
const UNKNOWN_RAW = 2;
const UNKNOWN_CONTENT_ENCODING = 3;
const UNKNOWN_CONTENT_TYPE = 4;
const LIST_META = 1;
const LIST_ITEMS = 2;
const LIST_META_REMAINING_ITEM_COUNT = 4;
const LIST_META_SHARD_INFO = 5;
const SHARD_INFO_SELECTOR = 1;

/** Kept items, copied into blocks that are filled completely before the next is made. */
class OutputBlocks {
  private readonly full: Buffer[] = [];
  private cur: Buffer | undefined;
  private used = 0;
  private nextSize = FIRST_BLOCK_BYTES;
  length = 0;
  private readonly header = Buffer.allocUnsafe(16);

  append(src: Uint8Array, start: number, end: number): void {
    this.length += end - start;
    while (start < end) {
      let cur = this.cur;
      if (cur === undefined || this.used === cur.length) {
        if (cur !== undefined) this.full.push(cur);
        cur = this.cur = Buffer.allocUnsafe(this.nextSize);
        this.used = 0;
        this.nextSize = Math.min(this.nextSize * 2, MAX_BLOCK_BYTES);
      }
      const take = Math.min(end - start, cur.length - this.used);
      cur.set(src.subarray(start, start + take), this.used);
      this.used += take;
      start += take;
    }
  }

  appendLenHeader(field: number, len: number): void {
    const h = this.header;
    this.append(h, 0, writeVarint(h, writeVarint(h, 0, field * 8 + WIRE_LEN), len));
  }

  /** The blocks, last one trimmed. The caller gives up its reference to this object. */
  chunks(): Buffer[] {
    const out = this.full.slice();
    if (this.cur !== undefined && this.used > 0) out.push(this.cur.subarray(0, this.used));
    return out;
  }
}

function syntax(message: string, offset: number, depth: number): ScanError {
  return new ScanError("SHARDCAR_ERR_SCAN_SYNTAX", message, { offset, depth });
}

class ProtoListFilter extends Transform {
  readonly stats: ListFilterStats = { path: "filter", serverFiltered: "inferred", items: 0, kept: 0, dropped: 0, bytesIn: 0, bytesOut: 0 };

  private readonly matcher: HashMatcher;
  private readonly key: ProtoKeyReader;
  private readonly onUnlabelled: ((object: string) => void) | undefined;
  /** Labels mode: items dropped for a missing or malformed slot label (in `stats.dropped` too). */
  unlabelled = 0;
  private readonly sentSelector: Buffer | undefined;
  private readonly maxItemBytes: number;

  /** "undecided" until the list's first field is known; bytes are held meanwhile. */
  private mode: "undecided" | "fast" | "filter" = "undecided";
  private held: Buffer[] = [];
  private finished = false;

  // Parser state. `offset` is the stream offset of the current chunk's byte 0.
  private offset = 0;
  private phase = MAGIC;
  private level = ENV;
  private magicHave = 0;
  private readonly acc = new VarintAccumulator();
  private field = 0;
  private fieldAt = 0;
  private left = 0;
  private sink = SKIP;
  private collectBuf: Buffer | undefined;
  private collectPos = 0;
  /** Bytes of Unknown.raw not yet consumed, while `level === LIST`. */
  private rawLeft = 0;

  // What the filter path needs to rebuild the envelope.
  private typeMeta: Buffer | undefined;
  private rawSeen = false;
  private listMetaSeen = false;
  private listMetaOut: Buffer | undefined;
  private readonly tail: Buffer[] = [];
  private readonly out = new OutputBlocks();

  private readonly object = new ObjectScan();
  private readonly reader = new WireReader();
  private readonly inner = new WireReader();

  constructor(opts: ProtoListFilterOptions) {
    super();
    this.matcher = opts.matcher;
    this.key = new ProtoKeyReader(opts.key);
    this.onUnlabelled = opts.onUnlabelled;
    this.sentSelector = opts.sentSelector === undefined ? undefined : Buffer.from(opts.sentSelector, "utf8");
    this.maxItemBytes = opts.maxItemBytes ?? DEFAULT_MAX_OBJECT_BYTES;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.stats.bytesIn += chunk.length;
    if (this.phase === PASS && chunk.length < this.rawLeft) {
      // The fast path's steady state: a chunk wholly inside Unknown.raw.
      this.rawLeft -= chunk.length;
      this.offset += chunk.length;
      this.send(chunk);
      callback();
      return;
    }
    try {
      this.parse(chunk);
    } catch (err) {
      // The callback destroys the stream with this error. On the filter path
      // nothing has been emitted. On the fast path a prefix may have left (at
      // most up to the end of Unknown.raw, never this chunk); the caller aborts
      // the response instead of ending it, so the client sees a cut body.
      this.finished = true;
      this.held = [];
      callback(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    if (this.mode === "fast") {
      for (const h of this.held) this.send(h);
      this.held = [];
      // Parsed first, emitted after: a chunk that fails to parse never leaves.
      this.send(chunk);
    } else if (this.mode === "undecided") {
      // Bounded: only the envelope head (TypeMeta, ListMeta, each capped) is
      // read while undecided, plus the chunk in which it ends.
      this.held.push(chunk);
    } else {
      this.held = [];
    }
    callback();
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.finish();
    } catch (err) {
      this.finished = true;
      callback(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    this.finished = true;
    callback();
  }

  private send(b: Buffer): void {
    if (this.finished) throw new Error("shardcar: protobuf list filter emitted after it finished");
    if (b.length === 0) return;
    this.stats.bytesOut += b.length;
    this.push(b);
  }

  private finish(): void {
    const end = this.offset;
    if (this.magicHave < 4) {
      throw new ScanError("SHARDCAR_ERR_SCAN_TRUNCATED", "protobuf list body ended inside the k8s\\0 prefix", { offset: end, depth: ENV });
    }
    if (this.level !== ENV || this.phase !== TAG || !this.rawSeen) {
      throw new ScanError("SHARDCAR_ERR_SCAN_TRUNCATED", "protobuf list body ended before its last field was complete", { offset: end, depth: this.level });
    }
    if (this.mode === "fast") return;
    this.mode = "filter";
    this.stats.path = "filter";
    this.stats.serverFiltered = this.stats.dropped > 0 ? "no" : "inferred";
    const typeMeta = this.typeMeta ?? Buffer.alloc(0);
    const listMeta = this.listMetaOut ?? Buffer.alloc(0);
    const items = this.out.chunks();
    this.send(Buffer.concat([K8S_MAGIC, lenField(UNKNOWN_TYPE_META, typeMeta), lenHeader(UNKNOWN_RAW, listMeta.length + this.out.length), listMeta]));
    for (const b of items) this.send(b);
    this.send(Buffer.concat(this.tail));
  }

  /** Consumes `n` bytes at the current level; list-level fields may not run past Unknown.raw. */
  private consume(n: number, at: number): void {
    if (this.level !== LIST) return;
    if (n > this.rawLeft) throw syntax("list field runs past the end of Unknown.raw", at, LIST);
    this.rawLeft -= n;
  }

  private fieldDone(): void {
    this.phase = TAG;
    if (this.level !== LIST) return;
    if (this.rawLeft === 0) this.level = ENV;
    else if (this.mode === "fast") this.phase = PASS;
  }

  private parse(c: Buffer): void {
    const n = c.length;
    const base = this.offset;
    let i = 0;
    while (i < n) {
      switch (this.phase) {
        case MAGIC: {
          if (c[i] !== K8S_MAGIC[this.magicHave]) {
            throw syntax("protobuf body does not start with the Kubernetes k8s\\0 prefix; refusing to pass it unfiltered", base + i, ENV);
          }
          i++;
          if (++this.magicHave === 4) this.phase = TAG;
          break;
        }
        case TAG: {
          // Performance twins: TAG, LEN and VARINT each read one varint byte
          // written out here, not through a shared method. Folded into one
          // (4ba1785, reverted), the fast path fell from 0.88x to 0.85x a byte
          // pipe (P2, bench/micro/proto-list-filter.bench.ts, paired runs; the
          // quick bench 0.69x to 0.65x). Change all three.
          if (this.acc.empty) this.fieldAt = base + i;
          const b = c[i] as number;
          this.consume(1, base + i);
          i++;
          if (!this.acc.push(b, base + i, this.level)) break;
          const tag = this.acc.value;
          this.acc.reset();
          this.field = Math.floor(tag / 8);
          const wire = tag % 8;
          if (this.field === 0) throw syntax("protobuf field number 0", this.fieldAt, this.level);
          this.onTag(wire);
          break;
        }
        case LEN: {
          // Performance twin of TAG above (one varint byte). Change all three.
          const b = c[i] as number;
          this.consume(1, base + i);
          i++;
          if (!this.acc.push(b, base + i, this.level)) break;
          const len = this.acc.value;
          this.acc.reset();
          i = this.onLength(len, c, i, base);
          break;
        }
        case VARINT: {
          // Performance twin of TAG above (one varint byte). Change all three.
          const b = c[i] as number;
          this.consume(1, base + i);
          i++;
          if (!this.acc.push(b, base + i, this.level)) break;
          this.acc.reset();
          this.fieldDone();
          break;
        }
        case FIXED:
        case BODY: {
          const take = Math.min(this.left, n - i);
          this.consume(take, base + i);
          if (this.sink !== SKIP) {
            const buf = this.collectBuf;
            if (buf === undefined) throw new Error("shardcar: protobuf list filter lost its collect buffer");
            c.copy(buf, this.collectPos, i, i + take);
            this.collectPos += take;
          }
          i += take;
          this.left -= take;
          if (this.left === 0) this.onValue(base + i);
          break;
        }
        case PASS: {
          // Counting down to the end of Unknown.raw is all the fast path
          // does, so a body cut short still fails instead of ending cleanly.
          const take = Math.min(this.rawLeft, n - i);
          this.rawLeft -= take;
          i += take;
          if (this.rawLeft === 0) {
            this.level = ENV;
            this.phase = TAG;
          }
          break;
        }
        default:
          throw new Error(`shardcar: protobuf list filter in unknown phase ${this.phase}`);
      }
    }
    this.offset += n;
  }

  private onTag(wire: number): void {
    const f = this.field;
    if (this.level === ENV && f >= UNKNOWN_TYPE_META && f <= UNKNOWN_CONTENT_TYPE && wire !== WIRE_LEN) {
      throw syntax(`runtime.Unknown field ${f} has wire type ${wire}, expected length-delimited`, this.fieldAt, ENV);
    }
    if (this.level === LIST && (f === LIST_META || f === LIST_ITEMS) && wire !== WIRE_LEN) {
      throw syntax(`list field ${f} has wire type ${wire}, expected length-delimited`, this.fieldAt, LIST);
    }
    switch (wire) {
      case WIRE_LEN:
        this.phase = LEN;
        return;
      case WIRE_VARINT:
        this.decideUnknownListField();
        this.phase = VARINT;
        return;
      case WIRE_I64:
      case WIRE_I32:
        this.decideUnknownListField();
        this.phase = FIXED;
        this.sink = SKIP;
        this.left = wire === WIRE_I64 ? 8 : 4;
        return;
      default:
        throw syntax(`unsupported protobuf wire type ${wire} (field ${f})`, this.fieldAt, this.level);
    }
  }

  /**
   * A list field other than ListMeta or items is skipped (the Go client
   * ignores unknown fields too), but it means the body is not the shape the
   * fast path vouches for, and it must not keep the head undecided.
   */
  private decideUnknownListField(): void {
    if (this.level === LIST && this.field !== LIST_META && this.field !== LIST_ITEMS && this.mode === "undecided") this.mode = "filter";
  }

  /** A length-delimited field's header is complete; returns the new chunk index. */
  private onLength(len: number, c: Buffer, i: number, base: number): number {
    const f = this.field;
    this.phase = BODY;
    this.left = len;
    this.sink = SKIP;
    if (this.level === ENV) {
      if (f === UNKNOWN_RAW) return this.enterRaw(len, i);
      if (len > MAX_ENVELOPE_FIELD_BYTES) {
        throw syntax(`runtime.Unknown field ${f} of ${len} bytes exceeds ${MAX_ENVELOPE_FIELD_BYTES}`, this.fieldAt, ENV);
      }
      if (f === UNKNOWN_TYPE_META) {
        if (this.typeMeta !== undefined || this.rawSeen) throw syntax("runtime.Unknown typeMeta repeated or after raw", this.fieldAt, ENV);
        this.startCollect(len);
      } else if (f === UNKNOWN_CONTENT_ENCODING || f === UNKNOWN_CONTENT_TYPE) {
        this.startCollect(len);
      }
    } else {
      if (len > this.rawLeft) throw syntax(`list field ${f} of ${len} bytes runs past the end of Unknown.raw`, this.fieldAt, LIST);
      if (f === LIST_META) {
        if (this.listMetaSeen) throw syntax("ListMeta repeated", this.fieldAt, LIST);
        if (len > MAX_LIST_META_BYTES) throw syntax(`ListMeta of ${len} bytes exceeds ${MAX_LIST_META_BYTES}`, this.fieldAt, LIST);
        this.startCollect(len);
      } else if (f === LIST_ITEMS) {
        return this.startItem(len, c, i, base);
      } else {
        this.decideUnknownListField();
      }
    }
    if (len === 0) this.onValue(base + i);
    return i;
  }

  private startCollect(len: number): void {
    this.sink = COLLECT;
    this.collectBuf = Buffer.allocUnsafe(len);
    this.collectPos = 0;
  }

  private enterRaw(len: number, i: number): number {
    if (this.rawSeen) throw syntax("runtime.Unknown raw repeated", this.fieldAt, ENV);
    this.rawSeen = true;
    const kind = this.stats.kind;
    if (kind === undefined) throw syntax("runtime.Unknown raw before typeMeta: cannot tell what the body holds", this.fieldAt, ENV);
    if (kind === "Status") {
      // An error answer carries no objects: pass it on as it is.
      this.mode = "fast";
      this.stats.path = "fast";
      if (len === 0) this.fieldDone();
      return i;
    }
    if (!kind.endsWith("List")) {
      // A Table (rows at field 3) or anything else whose items are not at
      // field 2 with ObjectMeta at field 1 cannot be filtered by this reader.
      throw syntax(`cannot filter a protobuf ${JSON.stringify(kind)}; refusing to pass it unfiltered`, this.fieldAt, ENV);
    }
    this.level = LIST;
    this.rawLeft = len;
    this.phase = TAG;
    if (len === 0) this.level = ENV;
    return i;
  }

  private startItem(len: number, c: Buffer, i: number, base: number): number {
    if (len > this.maxItemBytes) {
      throw new ScanError("SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE", `list item of ${len} bytes exceeds the ${this.maxItemBytes}-byte limit`, {
        offset: this.fieldAt,
        depth: LIST,
      });
    }
    this.stats.items++;
    if (this.mode === "undecided") this.mode = "filter";
    if (c.length - i >= len) {
      // The common case: the whole item is in this chunk. Hash it in place.
      this.consume(len, base + i);
      this.decideItem(c, i, i + len, base);
      this.fieldDone();
      return i + len;
    }
    this.sink = ITEM;
    this.collectBuf = Buffer.allocUnsafe(len);
    this.collectPos = 0;
    return i;
  }

  private decideItem(buf: Uint8Array, start: number, end: number, base: number): void {
    const o = this.object;
    o.scan(buf, start, end, this.key, base, LIST + 1, false);
    const key = this.key.result;
    if (key.state === KEY_UNLABELLED) {
      this.unlabelled++;
      this.onUnlabelled?.(this.key.describe());
    }
    if (key.inRange(this.matcher)) {
      this.stats.kept++;
      this.out.appendLenHeader(LIST_ITEMS, end - start);
      this.out.append(buf, start, end);
    } else {
      this.stats.dropped++;
    }
  }

  /** A fixed-width or length-delimited value is complete. `at` is the stream offset after it. */
  private onValue(at: number): void {
    const buf = this.collectBuf;
    this.collectBuf = undefined;
    if (this.sink !== SKIP && buf !== undefined) {
      const valueBase = at - buf.length;
      if (this.level === ENV) {
        if (this.field === UNKNOWN_TYPE_META) {
          this.typeMeta = buf;
          this.stats.kind = typeMetaKind(buf, 0, buf.length, valueBase, ENV + 1);
        } else {
          if (this.field === UNKNOWN_CONTENT_ENCODING && buf.length > 0) {
            throw syntax("runtime.Unknown contentEncoding is set; cannot read an encoded list", at, ENV);
          }
          this.tail.push(lenField(this.field, buf));
        }
      } else if (this.sink === ITEM) {
        this.decideItem(buf, 0, buf.length, valueBase);
      } else {
        this.onListMeta(buf, valueBase);
      }
    }
    this.sink = SKIP;
    this.fieldDone();
  }

  private onListMeta(buf: Buffer, base: number): void {
    this.listMetaSeen = true;
    const r = this.reader.reset(buf, 0, buf.length, base, LIST + 1);
    const kept: Buffer[] = [];
    let selectorMatches = false;
    while (r.next()) {
      if (r.field === LIST_META_SHARD_INFO && r.wire === WIRE_LEN) {
        const s = this.inner.reset(buf, r.valueStart, r.valueEnd, base, LIST + 2);
        while (s.next()) {
          if (s.field === SHARD_INFO_SELECTOR && s.wire === WIRE_LEN) {
            selectorMatches = this.sentSelector !== undefined && bytesEqual(buf, s.valueStart, s.valueEnd, this.sentSelector);
          }
        }
        // Filter path: shardInfo describes what the server selected, not what
        // this body now holds, so it goes.
        continue;
      }
      // Filter path: the server's remainingItemCount counts unfiltered keys
      // (kep-5866.md §3, a 1.36.0-1.36.3 bug), so it cannot be exact here.
      if (r.field === LIST_META_REMAINING_ITEM_COUNT) continue;
      // Everything else is kept as sent, resourceVersion and continue above
      // all: the reflector pages with the continue token, and a lost token
      // silently ends its relist after one page.
      kept.push(buf.subarray(r.fieldStart, r.pos));
    }
    if (this.mode === "undecided") {
      if (selectorMatches) {
        this.mode = "fast";
        this.stats.path = "fast";
        this.stats.serverFiltered = "confirmed";
        return;
      }
      this.mode = "filter";
    }
    this.listMetaOut = lenField(LIST_META, ...kept);
  }
}

/**
 * Creates a Transform that filters one protobuf LIST body (see the module
 * comment for the two paths). Feed it the raw upstream body; pipe its output
 * to the client.
 *
 * Errors: a body that is not a `k8s\0` envelope, is truncated, is malformed,
 * holds a kind it cannot filter (anything but `*List` and `Status`), or has an
 * item over `maxItemBytes` destroys the stream with a {@link ScanError}
 * (`SHARDCAR_ERR_SCAN_SYNTAX`, `_TRUNCATED` or `_ITEM_TOO_LARGE`). The caller
 * must then abort the client's response rather than end it, so a cut body
 * never looks complete. On the filter path nothing has been emitted by then.
 *
 * `stats` is updated in place; `stats.path` is final before the first byte is
 * emitted, the counts once the stream has ended. Single use.
 */
export function createProtoListFilter(opts: ProtoListFilterOptions): Transform & { readonly stats: ListFilterStats; readonly unlabelled: number } {
  return new ProtoListFilter(opts);
}
