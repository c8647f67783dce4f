/**
 * Taps over the Kubernetes protobuf a filter delivers (see tap.ts). The list
 * tap walks the body as a stream, three messages deep (runtime.Unknown → the
 * List in `raw` → each item), copying only the small messages it reads
 * (TypeMeta, ListMeta, each item's ObjectMeta) and skipping the rest, so its
 * memory is bounded by one ObjectMeta. The watch tap reads whole frames.
 */
import { ScanError } from "../../errors.ts";
import { KEY_UNLABELLED, type ObjectKey } from "./object-key.ts";
import { ProtoKeyReader } from "./proto-key.ts";
import { META_NAME, META_NAMESPACE, META_RESOURCE_VERSION, META_UID, OBJECT_META_FIELD } from "./proto-object.ts";
import { K8S_MAGIC, VarintAccumulator, WIRE_I32, WIRE_I64, WIRE_LEN, WIRE_VARINT, WireReader } from "./proto-wire.ts";
import { itemKind, type Tap, type TapSink } from "./tap.ts";

/** ObjectMeta and ListMeta are small; anything bigger is not what a server sends. */
const MAX_META_BYTES = 16 * 1024 * 1024;
const LIST_META_RESOURCE_VERSION = 2;
const LIST_META_CONTINUE = 3;

function str(buf: Uint8Array, start: number, end: number): string {
  return Buffer.from(buf.buffer, buf.byteOffset + start, end - start).toString("utf8");
}

interface Meta {
  name: string | undefined;
  namespace: string;
  uid: string;
  rv: string | undefined;
}

/** Reads name, namespace, uid and resourceVersion from an ObjectMeta message (last value wins, as in Go), and feeds its fields to `key`. */
function readObjectMeta(buf: Uint8Array, start: number, end: number, into: Meta, r: WireReader, key: ProtoKeyReader): void {
  r.reset(buf, start, end);
  while (r.next()) {
    if (r.field < 31 && (key.fields & (1 << r.field)) !== 0) key.field(r, buf);
    if (r.wire !== WIRE_LEN) continue;
    if (r.field === META_NAME) into.name = str(buf, r.valueStart, r.valueEnd);
    else if (r.field === META_NAMESPACE) into.namespace = str(buf, r.valueStart, r.valueEnd);
    else if (r.field === META_UID) into.uid = str(buf, r.valueStart, r.valueEnd);
    else if (r.field === META_RESOURCE_VERSION) into.rv = str(buf, r.valueStart, r.valueEnd);
  }
}

function readTypeMeta(buf: Uint8Array, start: number, end: number, r: WireReader): { apiVersion: string; kind: string } {
  let apiVersion = "";
  let kind = "";
  r.reset(buf, start, end);
  while (r.next()) {
    if (r.wire !== WIRE_LEN) continue;
    if (r.field === 1) apiVersion = str(buf, r.valueStart, r.valueEnd);
    else if (r.field === 2) kind = str(buf, r.valueStart, r.valueEnd);
  }
  return { apiVersion, kind };
}

const TAG = 0;
const LEN = 1;
const VARINT = 2;
const SKIP = 3;
const COLLECT = 4;

// Nesting: 0 = runtime.Unknown, 1 = the List in its `raw`, 2 = one item.
const UNKNOWN = 0;
const LIST = 1;
const ITEM = 2;

/** The delivered object, or a reason the tap cannot vouch for it (no key the filter could have kept). */
function delivered(m: Meta, key: ProtoKeyReader): { name: string; namespace: string; uid: string; keyHi: number; keyLo: number } | string {
  key.finish();
  const k = key.result;
  if (k.state === KEY_UNLABELLED) return `delivered object ${JSON.stringify(m.name)} without a readable slot label`;
  return { name: m.name ?? "", namespace: m.namespace, uid: m.uid, keyHi: k.hi, keyLo: k.lo };
}

class ProtoListTap implements Tap {
  readonly #sink: TapSink;
  readonly #key: ProtoKeyReader;
  readonly #r = new WireReader();
  #dead = false;
  #magic = 0;
  #pos = 0;
  /** Absolute end offset of each open message; the Unknown runs to the end of the body. */
  readonly #ends: number[] = [Number.POSITIVE_INFINITY];
  #state = TAG;
  readonly #acc = new VarintAccumulator();
  #field = 0;
  #skipTo = 0;
  #collect: Buffer = Buffer.alloc(0);
  #have = 0;
  #typeMeta: { apiVersion: string; kind: string } | undefined;
  readonly #meta: Meta = { name: undefined, namespace: "", uid: "", rv: undefined };

  constructor(sink: TapSink, key: ObjectKey) {
    this.#sink = sink;
    this.#key = new ProtoKeyReader(key);
  }

  write(chunk: Buffer): void {
    if (this.#dead) return;
    try {
      this.#scan(chunk);
    } catch (err) {
      if (!(err instanceof ScanError)) throw err;
      this.#giveUp(`unreadable output: ${err.message}`);
    }
  }

  #giveUp(reason: string): void {
    if (this.#dead) return;
    this.#dead = true;
    this.#sink.unreadable(reason);
  }

  get #level(): number {
    return this.#ends.length - 1;
  }

  #scan(c: Buffer): void {
    const base = this.#pos;
    let i = 0;
    while (this.#magic < 4 && i < c.length) {
      if (c[i] !== K8S_MAGIC[this.#magic]) return this.#giveUp("not a Kubernetes protobuf body");
      this.#magic++;
      i++;
    }
    while (i < c.length && !this.#dead) {
      switch (this.#state) {
        case TAG:
        case LEN:
        case VARINT: {
          if (!this.#acc.push(c[i] as number, base + i, this.#level)) {
            i++;
            continue;
          }
          i++;
          this.#pos = base + i;
          const v = this.#acc.value;
          this.#acc.reset();
          if (this.#state === TAG) this.#onTag(v);
          else if (this.#state === LEN) this.#onLen(v);
          else this.#done();
          continue;
        }
        case SKIP: {
          const take = Math.min(this.#skipTo - (base + i), c.length - i);
          i += take;
          this.#pos = base + i;
          if (this.#pos === this.#skipTo) this.#done();
          continue;
        }
        case COLLECT: {
          const take = Math.min(this.#collect.length - this.#have, c.length - i);
          c.copy(this.#collect, this.#have, i, i + take);
          this.#have += take;
          i += take;
          this.#pos = base + i;
          if (this.#have === this.#collect.length) this.#onCollected();
          continue;
        }
      }
    }
    this.#pos = base + c.length;
  }

  #onTag(tag: number): void {
    const wire = tag % 8;
    this.#field = (tag - wire) / 8;
    if (wire === WIRE_LEN) this.#state = LEN;
    else if (wire === WIRE_VARINT) this.#state = VARINT;
    else if (wire === WIRE_I64 || wire === WIRE_I32) this.#skip(wire === WIRE_I64 ? 8 : 4);
    else throw new ScanError("SHARDCAR_ERR_SCAN_SYNTAX", `unsupported wire type ${wire}`, { offset: this.#pos, depth: this.#level });
  }

  #onLen(len: number): void {
    const level = this.#level;
    const f = this.#field;
    if (this.#pos + len > (this.#ends[level] as number)) throw new ScanError("SHARDCAR_ERR_SCAN_SYNTAX", `field ${f} overruns its message`, { offset: this.#pos, depth: level });
    if ((level === UNKNOWN && f === 2) || (level === LIST && f === 2)) {
      // Into the List (raw), or into one item.
      if (level === LIST) {
        const m = this.#meta;
        m.name = m.rv = undefined;
        m.namespace = m.uid = "";
        this.#key.begin();
      }
      this.#ends.push(this.#pos + len);
      this.#state = TAG;
      this.#done();
      return;
    }
    if ((level === UNKNOWN && f === 1) || (level === LIST && f === 1) || (level === ITEM && f === OBJECT_META_FIELD)) {
      if (len > MAX_META_BYTES) throw new ScanError("SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE", `metadata of ${len} bytes`, { offset: this.#pos, depth: level });
      this.#collect = Buffer.allocUnsafe(len);
      this.#have = 0;
      this.#state = COLLECT;
      if (len === 0) this.#onCollected();
      return;
    }
    this.#skip(len);
  }

  #skip(n: number): void {
    this.#skipTo = this.#pos + n;
    this.#state = SKIP;
    if (n === 0) this.#done();
  }

  #onCollected(): void {
    const level = this.#level;
    const b = this.#collect;
    if (level === UNKNOWN) this.#typeMeta = readTypeMeta(b, 0, b.length, this.#r);
    else if (level === ITEM) readObjectMeta(b, 0, b.length, this.#meta, this.#r, this.#key);
    else {
      const r = this.#r.reset(b, 0, b.length);
      while (r.next()) {
        if (r.wire !== WIRE_LEN || r.valueEnd === r.valueStart) continue;
        if (r.field === LIST_META_CONTINUE) this.#sink.continueToken(str(b, r.valueStart, r.valueEnd));
        else if (r.field === LIST_META_RESOURCE_VERSION) this.#sink.resourceVersion(str(b, r.valueStart, r.valueEnd));
      }
    }
    this.#collect = Buffer.alloc(0);
    this.#done();
  }

  /** A value ended at #pos: close every message that ends here too. */
  #done(): void {
    this.#state = TAG;
    while (this.#ends.length > 1 && this.#pos === this.#ends[this.#ends.length - 1]) {
      const closed = this.#level;
      this.#ends.pop();
      if (closed === ITEM) {
        if (this.#meta.name === undefined) continue;
        const obj = delivered(this.#meta, this.#key);
        if (typeof obj === "string") return this.#giveUp(obj);
        this.#sink.upsert(obj);
      } else if (closed === LIST && this.#typeMeta !== undefined) {
        this.#sink.typeMeta(this.#typeMeta.apiVersion, itemKind(this.#typeMeta.kind));
      }
    }
  }
}

class ProtoWatchTap implements Tap {
  readonly #sink: TapSink;
  readonly #key: ProtoKeyReader;
  readonly #event = new WireReader();
  readonly #inner = new WireReader();
  // One reader per nesting level, reused for every frame (no allocation per event).
  readonly #typeMetaReader = new WireReader();
  readonly #metaReader = new WireReader();
  readonly #meta: Meta = { name: undefined, namespace: "", uid: "", rv: undefined };
  #dead = false;
  #pending: Buffer = Buffer.alloc(0);

  constructor(sink: TapSink, key: ObjectKey) {
    this.#sink = sink;
    this.#key = new ProtoKeyReader(key);
  }

  write(chunk: Buffer): void {
    if (this.#dead) return;
    // Filters push whole frames, so this rarely copies.
    let buf = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    let i = 0;
    try {
      while (buf.length - i >= 4) {
        const len = buf.readUInt32BE(i);
        if (buf.length - i - 4 < len) break;
        this.#frame(buf, i + 4, i + 4 + len);
        if (this.#dead) return;
        i += 4 + len;
      }
    } catch (err) {
      if (!(err instanceof ScanError)) throw err;
      this.#dead = true;
      this.#sink.unreadable(`unreadable output: ${err.message}`);
      return;
    }
    buf = buf.subarray(i);
    this.#pending = buf.length === 0 ? Buffer.alloc(0) : Buffer.from(buf);
  }

  #frame(buf: Buffer, start: number, end: number): void {
    const e = this.#event.reset(buf, start, end);
    let type = "";
    let rawStart = -1;
    let rawEnd = -1;
    while (e.next()) {
      if (e.wire !== WIRE_LEN) continue;
      if (e.field === 1) type = str(buf, e.valueStart, e.valueEnd);
      else if (e.field === 2) {
        const r = this.#inner.reset(buf, e.valueStart, e.valueEnd);
        while (r.next()) if (r.field === 1 && r.wire === WIRE_LEN) [rawStart, rawEnd] = [r.valueStart, r.valueEnd];
      }
    }
    if (type === "ERROR" || rawStart < 0 || rawEnd - rawStart < 4) return;
    // runtime.Unknown after the magic: typeMeta = 1, raw = 2.
    const u = this.#inner.reset(buf, rawStart + 4, rawEnd);
    let tm: { apiVersion: string; kind: string } | undefined;
    let objStart = -1;
    let objEnd = -1;
    while (u.next()) {
      if (u.wire !== WIRE_LEN) continue;
      if (u.field === 1) tm = readTypeMeta(buf, u.valueStart, u.valueEnd, this.#typeMetaReader);
      else if (u.field === 2) [objStart, objEnd] = [u.valueStart, u.valueEnd];
    }
    if (objStart < 0) return;
    const m = this.#meta;
    m.name = m.rv = undefined;
    m.namespace = m.uid = "";
    this.#key.begin();
    const o = this.#inner.reset(buf, objStart, objEnd);
    while (o.next()) if (o.field === OBJECT_META_FIELD && o.wire === WIRE_LEN) readObjectMeta(buf, o.valueStart, o.valueEnd, m, this.#metaReader, this.#key);
    if (type === "ADDED" || type === "MODIFIED" || type === "DELETED") {
      if (m.name === undefined) {
        this.#dead = true;
        this.#sink.unreadable(`a ${type} event without metadata.name`);
        return;
      }
      if (type === "DELETED") this.#sink.remove(m.namespace, m.name);
      else {
        const obj = delivered(m, this.#key);
        if (typeof obj === "string") {
          this.#dead = true;
          this.#sink.unreadable(obj);
          return;
        }
        this.#sink.upsert(obj);
      }
      if (tm !== undefined) this.#sink.typeMeta(tm.apiVersion, tm.kind);
    }
    if (m.rv !== undefined) this.#sink.resourceVersion(m.rv);
  }
}

/** A tap over one protobuf list body as delivered; `key` is the filter's. */
export function createProtoListTap(sink: TapSink, key: ObjectKey): Tap {
  return new ProtoListTap(sink, key);
}

/** A tap over one protobuf watch stream as delivered; `key` is the filter's. */
export function createProtoWatchTap(sink: TapSink, key: ObjectKey): Tap {
  return new ProtoWatchTap(sink, key);
}
