/**
 * What a filter reads from a protobuf Kubernetes object, found without a
 * schema: every built-in type (and PartialObjectMetadata) has its ObjectMeta
 * at field 1, and ObjectMeta has `namespace` = 3, `uid` = 5,
 * `resourceVersion` = 6 and `annotations` = 12 (k8s.io/apimachinery
 * pkg/apis/meta/v1/generated.proto); the key's own fields are read by
 * proto-key.ts.
 *
 * Field precedence follows the Go unmarshaller the client runs: a repeated
 * scalar field keeps its last value, and a repeated message field is merged.
 * So the key is read from all of the object's ObjectMeta fields, and a
 * missing key is the empty string, which is what the apiserver hashes
 * (`ResolveFieldValue` reads `GetUID()`/`GetNamespace()`).
 */
import { ScanError } from "../../errors.ts";
import type { ProtoKeyReader } from "./proto-key.ts";
import { bytesEqual, hasMagic, WIRE_LEN, WireReader } from "./proto-wire.ts";

export { META_LABELS, META_NAME, META_NAMESPACE, META_OWNER_REFERENCES, META_UID } from "./proto-key.ts";
export const OBJECT_META_FIELD = 1;
export const META_RESOURCE_VERSION = 6;
export const META_ANNOTATIONS = 12;

const INITIAL_EVENTS_END_KEY = Buffer.from("k8s.io/initial-events-end");
const TRUE = Buffer.from("true");

function wrongWire(what: string, r: WireReader): ScanError {
  return new ScanError("SHARDCAR_ERR_SCAN_SYNTAX", `${what} has wire type ${r.wire}, expected length-delimited`, {
    offset: r.base + r.fieldStart,
    depth: r.depth,
  });
}

/**
 * Reads one object's key (into the given {@link ProtoKeyReader}),
 * resourceVersion and (on request) whether it carries
 * `k8s.io/initial-events-end: "true"`. Reusable: one instance per filter, no
 * allocation per object. The resourceVersion is offsets into the scanned
 * buffer; -1 means absent.
 */
export class ObjectScan {
  rvStart = -1;
  rvEnd = -1;
  initialEventsEnd = false;
  private readonly outer = new WireReader();
  private readonly meta = new WireReader();
  private readonly entry = new WireReader();

  /**
   * Scans `buf[start, end)`, an object message without envelope. `base` is
   * the stream offset of `buf[0]`, for error messages. Throws
   * {@link ScanError} when the bytes are not a well-formed message at the
   * levels it reads (the object and its ObjectMeta).
   */
  scan(buf: Uint8Array, start: number, end: number, key: ProtoKeyReader, base: number, depth: number, wantAnnotations: boolean): void {
    this.rvStart = this.rvEnd = -1;
    this.initialEventsEnd = false;
    key.begin();
    const o = this.outer.reset(buf, start, end, base, depth);
    while (o.next()) {
      if (o.field !== OBJECT_META_FIELD) continue;
      if (o.wire !== WIRE_LEN) throw wrongWire("metadata", o);
      const m = this.meta.reset(buf, o.valueStart, o.valueEnd, base, depth + 1);
      while (m.next()) {
        const f = m.field;
        if (f === META_RESOURCE_VERSION) {
          if (m.wire !== WIRE_LEN) throw wrongWire("metadata.resourceVersion", m);
          this.rvStart = m.valueStart;
          this.rvEnd = m.valueEnd;
        } else if (f === META_ANNOTATIONS && wantAnnotations) {
          if (m.wire !== WIRE_LEN) throw wrongWire("metadata.annotations", m);
          this.readAnnotation(buf, m.valueStart, m.valueEnd, base, depth + 2);
        } else if (f < 31 && (key.fields & (1 << f)) !== 0) key.field(m, buf);
      }
    }
    key.finish();
  }

  /** One map entry {key = 1, value = 2}; a later entry for the same key wins. */
  private readAnnotation(buf: Uint8Array, start: number, end: number, base: number, depth: number): void {
    const e = this.entry.reset(buf, start, end, base, depth);
    let isMarker = false;
    let isTrue = false;
    while (e.next()) {
      if (e.wire !== WIRE_LEN) continue;
      if (e.field === 1) isMarker = bytesEqual(buf, e.valueStart, e.valueEnd, INITIAL_EVENTS_END_KEY);
      else if (e.field === 2) isTrue = bytesEqual(buf, e.valueStart, e.valueEnd, TRUE);
    }
    if (isMarker) this.initialEventsEnd = isTrue;
  }
}

/**
 * The parts of a `k8s\0` + runtime.Unknown envelope held in memory:
 * Unknown {typeMeta = 1, raw = 2, contentEncoding = 3, contentType = 4}.
 */
export class EnvelopeScan {
  /** Value bounds of typeMeta (a TypeMeta message), raw, and contentEncoding; -1 when absent. */
  typeMetaStart = -1;
  typeMetaEnd = -1;
  rawStart = -1;
  rawEnd = -1;
  contentEncodingLength = 0;
  private readonly r = new WireReader();

  /** Scans `buf[start, end)`, magic included. Throws {@link ScanError} when it is not an envelope. */
  scan(buf: Uint8Array, start: number, end: number, base: number, depth: number): void {
    this.typeMetaStart = this.typeMetaEnd = this.rawStart = this.rawEnd = -1;
    this.contentEncodingLength = 0;
    if (!hasMagic(buf, start, end)) {
      throw new ScanError("SHARDCAR_ERR_SCAN_SYNTAX", "object is not a Kubernetes protobuf envelope (no k8s\\0 prefix)", { offset: base + start, depth });
    }
    const r = this.r.reset(buf, start + 4, end, base, depth);
    while (r.next()) {
      if (r.field > 4) continue;
      if (r.wire !== WIRE_LEN) throw wrongWire(`runtime.Unknown field ${r.field}`, r);
      if (r.field === 1) {
        this.typeMetaStart = r.valueStart;
        this.typeMetaEnd = r.valueEnd;
      } else if (r.field === 2) {
        this.rawStart = r.valueStart;
        this.rawEnd = r.valueEnd;
      } else if (r.field === 3) {
        this.contentEncodingLength = r.valueEnd - r.valueStart;
      }
    }
  }
}

/**
 * Reads `kind` (field 2) out of a TypeMeta message; "" when absent. Only
 * called once per list body, or per made-up bookmark, so it may allocate.
 */
export function typeMetaKind(buf: Uint8Array, start: number, end: number, base: number, depth: number): string {
  const r = new WireReader().reset(buf, start, end, base, depth);
  let kind = "";
  while (r.next()) {
    if (r.field === 2 && r.wire === WIRE_LEN) kind = Buffer.from(buf.buffer, buf.byteOffset + r.valueStart, r.valueEnd - r.valueStart).toString("utf8");
  }
  return kind;
}
