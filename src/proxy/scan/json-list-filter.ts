/**
 * The JSON LIST filter: a Transform that passes a list body through with only
 * the items of this replica's shard, without ever parsing the whole body.
 *
 * How bytes flow. Every input byte is, at any moment, in one of three modes:
 * EMIT (goes out as is), HOLD (kept until a decision) or SKIP (discarded), as
 * byte-router.ts routes them.
 * - The head of the body (up to the list `metadata`, or to `items`) is held
 *   until the path is known, so `stats.path` is final before the first byte
 *   goes out: the proxy's fallback=fail mode relies on that.
 * - Typed lists put `metadata` before `items`. When
 *   `metadata.shardInfo.selector` equals the selector sent, the rest of the
 *   body goes through untouched and unscanned (the fast path).
 * - Otherwise each item is held from its first byte until its key is known
 *   (object-key.ts: its uid or namespace, its controller ownerReference, or
 *   its slot label), then either released and streamed (in range) or
 *   skipped to its end. Memory is bounded by the largest item prefix up to
 *   that point (at worst its whole metadata), never by the list.
 * - Separators: each item is held together with the comma before it, and
 *   that comma goes out only if another item was kept before it, so dropping
 *   the first items still yields valid JSON. Reusing the input's own comma
 *   keeps kept items contiguous views of the input: output is pushed as views,
 *   never copied, so nothing is allocated per chunk.
 * - The top-level closing brace is held back until the input has ended
 *   cleanly, so a body cut anywhere never comes out as a shorter valid list.
 */
import { Transform, type TransformCallback } from "node:stream";
import { ScanError } from "../../errors.ts";
import type { HashMatcher } from "../../shard/range.ts";
import { JsonKeyReader, jsonKeyPaths, pathsPerKey } from "./json-key.ts";
import { coalesce, compilePaths, decodeJsonString, DEFAULT_MAX_DEPTH, JsonScanner, KIND_ARRAY, KIND_OBJECT, runFilterStep, type PathNode, type ScanSink, type ValueKind } from "./json-scanner.ts";
import { countsUnkeyed, KEY_EMPTY, KEY_UNLABELLED, type ObjectKey } from "./object-key.ts";
import { DEFAULT_MAX_OBJECT_BYTES, type ListFilterStats } from "./filter-contract.ts";
import { ByteRouter, EMIT, HOLD, SKIP } from "./byte-router.ts";

export type { ListFilterStats } from "./filter-contract.ts";

export interface ListFilterOptions {
  /** The replica's ranges. */
  readonly matcher: HashMatcher;
  /** What places an item in the keyspace (object-key.ts). */
  readonly key: ObjectKey;
  /** Labels mode: an item without a readable slot label was dropped; `object` is its `namespace/name`. */
  readonly onUnlabelled?: (object: string) => void;
  /** The exact selector the proxy sent upstream; a `shardInfo.selector` equal to it selects the fast path. */
  readonly sentSelector?: string;
  /** Largest item (or list head) accepted; larger fails with `SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE`. Default {@link DEFAULT_MAX_OBJECT_BYTES}. */
  readonly maxItemBytes?: number;
  /** Nesting limit; deeper fails with `SHARDCAR_ERR_SCAN_DEPTH`. Default 10000, as Go's encoding/json. */
  readonly maxDepth?: number;
}

// Node ids for the paths this filter reads.
const ROOT = 1;
const META = 2;
const REMAINING = 3;
const SELECTOR = 4;
const KIND = 5;
const ITEMS = 6;
const ITEM = 7;
const ITEM_META = 8;
/** The key reader's ids start here (json-key.ts). */
const KEY_BASE = 32;

/** Depth of an item's container (the `items` or `rows` array); items open one deeper. */
const ITEMS_DEPTH = 2;

function listPaths(key: ObjectKey): PathNode {
  const itemMeta = { id: ITEM_META, keys: jsonKeyPaths(key, KEY_BASE) };
  return compilePaths({
    id: ROOT,
    keys: {
      kind: { id: KIND },
      metadata: { id: META, keys: { remainingItemCount: { id: REMAINING }, shardInfo: { keys: { selector: { id: SELECTOR } } } } },
      // Typed, custom-resource and PartialObjectMetadata lists: items[].metadata.
      items: { id: ITEMS, commas: true, element: { id: ITEM, keys: { metadata: itemMeta } } },
      // Table: rows[].object.metadata (PartialObjectMetadata or the full object).
      rows: { id: ITEMS, commas: true, element: { id: ITEM, keys: { object: { keys: { metadata: itemMeta } } } } },
    },
  });
}

const LIST_PATHS = pathsPerKey(listPaths);


const UNDECIDED = 0;
const KEEP = 1;
const DROP = 2;

function isWs(b: number | undefined): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

/**
 * The decision engine, free of streams: `write` takes a chunk and returns the
 * bytes to send for it; `end` returns the tail or throws. Both throw
 * {@link ScanError} on malformed or truncated input.
 */
class ListFilterEngine implements ScanSink {
  readonly stats: ListFilterStats = { path: "filter", serverFiltered: "inferred", items: 0, kept: 0, dropped: 0, bytesIn: 0, bytesOut: 0 };
  /** Items dropped because no key could be read (counted in `dropped` too). */
  unkeyed = 0;
  /** Labels mode: items dropped for a missing or malformed slot label (in `dropped` too). */
  unlabelled = 0;

  private readonly matcher: HashMatcher;
  private readonly key: ObjectKey;
  private readonly reader: JsonKeyReader;
  private readonly onUnlabelled: ((object: string) => void) | undefined;
  private readonly sentSelector: string | undefined;
  private readonly maxItemBytes: number;
  private readonly scanner: JsonScanner;

  /** The head is held until the path is decided. */
  private readonly route: ByteRouter;

  /** The rest of the body streams through unscanned. */
  private raw = false;
  /** The path (fast or filter) is known and the head has been released. */
  private decided = false;
  private selector: string | undefined;
  private remainingKeyStart = -1;
  private remainingEnd = -1;
  private metaOpen = false;

  private inItems = false;
  private keptInArray = 0;
  /** The held bytes of the current item start with the comma that preceded it. */
  private heldComma = false;
  private itemStart = -1;
  private itemDecision = UNDECIDED;
  private itemMetaOpen = false;

  constructor(opts: ListFilterOptions) {
    this.matcher = opts.matcher;
    this.key = opts.key;
    this.reader = new JsonKeyReader(opts.key, KEY_BASE);
    this.onUnlabelled = opts.onUnlabelled;
    this.sentSelector = opts.sentSelector;
    this.maxItemBytes = opts.maxItemBytes ?? DEFAULT_MAX_OBJECT_BYTES;
    this.route = new ByteRouter(HOLD, this.maxItemBytes, (pos) => this.tooLarge(pos));
    this.scanner = new JsonScanner(LIST_PATHS(opts.key), this, {
      maxDepth: opts.maxDepth ?? DEFAULT_MAX_DEPTH,
      maxTokenBytes: this.maxItemBytes,
      multi: false,
    });
  }

  write(chunk: Buffer): Buffer[] {
    this.stats.bytesIn += chunk.length;
    if (this.raw) return [chunk];
    const base = this.stats.bytesIn - chunk.length;
    this.route.begin(chunk, base);
    this.scanner.scan(chunk, base);
    // The rest of the chunk goes to the current mode (EMIT once on the fast path).
    this.route.switchTo(this.route.mode, this.stats.bytesIn);
    if (this.itemStart >= 0 && this.stats.bytesIn - this.itemStart > this.maxItemBytes) {
      throw this.tooLarge(this.stats.bytesIn);
    }
    return this.route.take();
  }

  end(): Buffer[] {
    if (this.raw) return [];
    if (!this.scanner.complete) {
      throw new ScanError("SHARDCAR_ERR_SCAN_TRUNCATED", "the body ended before its top-level value closed", {
        offset: this.stats.bytesIn,
        depth: this.scanner.currentDepth,
      });
    }
    // The top-level close (and trailing whitespace), or a whole body that never
    // reached a decision point (no metadata, no items).
    return this.route.takeHeld();
  }

  private tooLarge(pos: number): ScanError {
    return new ScanError("SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE", `an item (or the list head) exceeds ${this.maxItemBytes} bytes`, {
      offset: pos,
      depth: this.scanner.currentDepth,
    });
  }

  /** Fast path: everything held so far goes out unchanged, the rest unscanned. */
  private goRaw(pos: number): void {
    this.stats.path = "fast";
    this.route.switchTo(EMIT, pos);
    this.route.releaseHeld();
    this.decided = true;
    this.raw = true;
    this.scanner.stop();
  }

  // -- ScanSink --------------------------------------------------------------

  enter(id: number, pos: number, kind: ValueKind): void {
    if (this.reader.owns(id)) {
      if (this.reader.enter(id, kind)) this.decideKey(pos);
      return;
    }
    switch (id) {
      case META:
        if (kind !== KIND_OBJECT) return;
        this.metaOpen = true;
        // After the items (custom-resource lists) the metadata is held on its own.
        if (this.decided) {
          this.route.switchTo(HOLD, pos);
          this.route.dropHeld();
        }
        return;
      case ITEMS:
        if (kind !== KIND_ARRAY) return;
        // Filter path from here on; everything up to and including '[' goes out.
        this.decided = true;
        this.route.switchTo(EMIT, pos + 1);
        this.route.releaseHeld();
        this.route.switchTo(HOLD, pos + 1);
        this.inItems = true;
        this.keptInArray = 0;
        this.heldComma = false;
        return;
      case ITEM:
        if (!this.inItems) return;
        this.stats.items++;
        this.itemStart = pos;
        this.itemDecision = UNDECIDED;
        this.itemMetaOpen = false;
        return;
      case ITEM_META:
        if (this.itemStart < 0 || kind !== KIND_OBJECT) return;
        this.itemMetaOpen = true;
        this.reader.begin();
        return;
      default:
        return;
    }
  }

  string(id: number, buf: Buffer, start: number, end: number, escaped: boolean, after: number): void {
    if (this.reader.owns(id)) {
      if (this.reader.string(id, buf, start, end, escaped)) this.decideKey(after);
      return;
    }
    switch (id) {
      case SELECTOR:
        this.selector = decodeJsonString(buf, start, end, escaped);
        return;
      case ITEM:
        // A string where an item should be (strings get no leave): it ends here.
        if (this.itemStart >= 0) this.leaveItem(after);
        return;
      case KIND: {
        const kind = decodeJsonString(buf, start, end, escaped);
        this.stats.kind = kind;
        // A Status (an error body) carries no items: pass it through untouched.
        if (kind === "Status" && !this.decided) this.goRaw(after);
        return;
      }
      default:
        return;
    }
  }

  leave(id: number, end: number): void {
    if (this.reader.owns(id)) {
      if (this.reader.leave(id)) this.decideKey(end);
      return;
    }
    switch (id) {
      case REMAINING:
        if (!this.metaOpen) return;
        // The only list-metadata member ever cut. `continue` and `resourceVersion` are kept: dropping `continue` silently truncates a paged relist after its first page (the kube-state-metrics lesson), and the RV is where the reflector's watch resumes.
        this.remainingKeyStart = this.scanner.lastKeyStart;
        this.remainingEnd = end;
        return;
      case META:
        if (this.metaOpen) this.leaveMeta(end);
        return;
      case ITEM_META:
        if (!this.itemMetaOpen) return;
        this.itemMetaOpen = false;
        // No key: hashed as "", as the server does (its GetUID() and
        // GetNamespace() of such an object are ""), and as the protobuf
        // filter does. A cluster-scoped object under namespace keying is
        // the usual case; an object without a uid is counted. In labels
        // mode a missing slot label is in no shard.
        this.reader.finish();
        this.decideKey(end);
        return;
      case ITEM:
        if (this.itemStart >= 0) this.leaveItem(end);
        return;
      case ITEMS:
        if (!this.inItems) return;
        this.inItems = false;
        // Whitespace before ']' goes out (it keeps pretty output pretty), then ']' onwards.
        this.route.switchTo(EMIT, end - 1);
        this.route.releaseHeld();
        return;
      case ROOT:
        // Hold the top-level close until the input has ended cleanly. (Undecided
        // bodies, with neither list metadata nor items, are still wholly held.)
        if (this.decided) this.route.switchTo(HOLD, end - 1);
        return;
      default:
        return;
    }
  }

  comma(id: number, pos: number): void {
    if (id !== ITEMS || !this.inItems) return;
    // Whitespace before the comma is dropped; the comma is held with the next
    // item and goes out only if an item was kept before it (see decide).
    this.route.switchTo(HOLD, pos);
    this.route.dropHeld();
    this.heldComma = true;
  }

  lineEnd(): void {}

  private leaveMeta(end: number): void {
    this.metaOpen = false;
    this.route.switchTo(HOLD, end);
    const matched = this.sentSelector !== undefined && this.selector === this.sentSelector;
    if (matched) this.stats.serverFiltered = "confirmed";
    if (matched && !this.decided) {
      this.goRaw(end);
      return;
    }
    this.decided = true;
    this.cutRemainingItemCount();
    this.route.releaseHeld();
    this.route.switchTo(EMIT, end);
  }

  /**
   * Drops `remainingItemCount` from the held list metadata: on sharded pages
   * it counts the unfiltered remainder (1.36.0–1.36.3), and after filtering
   * it is wrong anyway. Nothing else in the list metadata is touched.
   */
  private cutRemainingItemCount(): void {
    if (this.remainingKeyStart < 0) return;
    const buf = Buffer.concat(this.route.held);
    const base = this.route.heldStart;
    let from = this.remainingKeyStart - base;
    let to = this.remainingEnd - base;
    this.remainingKeyStart = -1;
    if (from < 0 || to > buf.length) return;
    // With a member before it: cut from that member's end (`,"remainingItemCount":N`).
    let k = from - 1;
    while (k >= 0 && isWs(buf[k])) k--;
    if (buf[k] === 0x2c) from = k;
    else {
      // The first member: cut through the comma after it, up to the next key.
      let m = to;
      while (m < buf.length && isWs(buf[m])) m++;
      if (buf[m] === 0x2c) {
        m++;
        while (m < buf.length && isWs(buf[m])) m++;
        to = m;
      }
    }
    this.route.replaceHeld([buf.subarray(0, from), buf.subarray(to)]);
  }

  /** The reader has the current item's key: keep or drop the item from `pos`. */
  private decideKey(pos: number): void {
    if (this.itemDecision !== UNDECIDED || this.itemStart < 0) return;
    const r = this.reader.result;
    if (r.state === KEY_UNLABELLED) {
      this.unlabelled++;
      this.onUnlabelled?.(this.reader.describe());
    } else if (r.state === KEY_EMPTY && countsUnkeyed(this.key)) this.unkeyed++;
    this.decide(r.inRange(this.matcher), pos);
  }

  private decide(keep: boolean, pos: number): void {
    this.scanner.untrackBelow(ITEMS_DEPTH);
    if (keep) {
      this.itemDecision = KEEP;
      this.route.switchTo(EMIT, pos);
      // Nothing kept before this item: its comma would follow '[', so it goes.
      if (this.heldComma && this.keptInArray === 0) this.route.dropLeadingHeld(0x2c);
      this.heldComma = false;
      this.route.releaseHeld();
      this.keptInArray++;
      this.stats.kept++;
    } else {
      this.itemDecision = DROP;
      this.route.switchTo(SKIP, pos);
      this.route.dropHeld();
      this.heldComma = false;
      this.stats.dropped++;
      if (this.stats.serverFiltered === "inferred") this.stats.serverFiltered = "no";
    }
  }

  private leaveItem(end: number): void {
    if (end - this.itemStart > this.maxItemBytes) throw this.tooLarge(end);
    // No metadata at all (or not an object): nothing to hash. Fail closed.
    if (this.itemDecision === UNDECIDED) {
      this.unkeyed++;
      this.decide(false, end);
    }
    this.itemStart = -1;
    // Whitespace after the item is held until we see whether a comma or ']' follows.
    this.route.switchTo(HOLD, end);
    this.route.dropHeld();
  }
}

class JsonListFilter extends Transform {
  readonly #engine: ListFilterEngine;

  constructor(opts: ListFilterOptions) {
    super();
    this.#engine = new ListFilterEngine(opts);
  }

  get stats(): ListFilterStats {
    return this.#engine.stats;
  }

  /** Items dropped because they had no key to hash (included in `stats.dropped`). */
  get unkeyed(): number {
    return this.#engine.unkeyed;
  }

  /** Labels mode: items dropped for a missing or malformed slot label (included in `stats.dropped`). */
  get unlabelled(): number {
    return this.#engine.unlabelled;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    runFilterStep(callback, () => this.#engine.write(chunk), (parts) => this.#send(parts));
  }

  override _flush(callback: TransformCallback): void {
    runFilterStep(callback, () => this.#engine.end(), (parts) => this.#send(parts));
  }

  #send(parts: Buffer[]): void {
    // Views of the input, never copies: a copy per chunk would be garbage that
    // V8 collects late (external memory), which showed as RSS growth.
    for (const buf of coalesce(parts)) {
      this.#engine.stats.bytesOut += buf.length;
      this.push(buf);
    }
  }
}

/**
 * Creates the filter for one LIST response body (uncompressed JSON).
 *
 * - Output: the body minus out-of-range items and minus
 *   `metadata.remainingItemCount` (filter path), or the body byte for byte
 *   (fast path: `shardInfo.selector` equals `sentSelector`, or a `Status`).
 *   `stats.path` is final before the first output byte.
 * - Errors: malformed, truncated, too deep or too large input destroys the
 *   stream with a {@link ScanError} (`'error'` event). By then only a strict
 *   prefix of the output has been pushed, never the top-level closing brace,
 *   so the client cannot mistake it for a shorter list; the caller must abort
 *   the client response rather than end it.
 * - Items without the key hash as `""`, as on the server: with `uid` or
 *   `owner` keys such an item (no uid) is counted in `unkeyed`; with
 *   `namespace` it is a cluster-scoped object. An item with no metadata is
 *   dropped and counted in `unkeyed`. In labels mode an item without a
 *   readable slot label is dropped and counted in `unlabelled`.
 * - On the fast path nothing after the list metadata is scanned, so
 *   `items`, `kept` and `dropped` stay 0 there.
 *
 * One filter per body; never reused. Never blocks; throws nothing itself.
 */
export function createJsonListFilter(opts: ListFilterOptions): Transform & { readonly stats: ListFilterStats; readonly unkeyed: number; readonly unlabelled: number } {
  return new JsonListFilter(opts);
}
