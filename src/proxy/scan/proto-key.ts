/**
 * The protobuf half of the key abstraction (object-key.ts): reads an
 * object's key from the fields of its ObjectMeta (k8s.io/apimachinery
 * pkg/apis/meta/v1/generated.proto): `namespace` = 3, `uid` = 5,
 * `labels` = 11 (map entries {key = 1, value = 2}), `ownerReferences` = 13
 * (OwnerReference {uid = 4, controller = 6}).
 *
 * Precedence follows the Go unmarshaller the client runs: a repeated scalar
 * keeps its last value, a repeated message field appends (so the object's
 * ownerReferences are those of all its ObjectMeta fields, in order, and the
 * first controller reference wins, as `controllerOwnerUid` says), and a map
 * keeps the last entry for a key. Values are hashed as they are read, so no
 * offset into a buffer has to outlive the field.
 */
import { ScanError } from "../../errors.ts";
import { fnv1a64Into } from "../../shard/hash.ts";
import { isSlotKey, KeyResult, slotOfBytes, SlotStarts, type ObjectKey } from "./object-key.ts";
import { bytesEqual, WIRE_LEN, WIRE_VARINT, WireReader } from "./proto-wire.ts";

export const META_NAME = 1;
export const META_NAMESPACE = 3;
export const META_UID = 5;
export const META_LABELS = 11;
export const META_OWNER_REFERENCES = 13;
const REF_UID = 4;
const REF_CONTROLLER = 6;
const ENTRY_KEY = 1;
const ENTRY_VALUE = 2;

function wrongWire(what: string, r: WireReader, expected: string): ScanError {
  return new ScanError("SHARDCAR_ERR_SCAN_SYNTAX", `${what} has wire type ${r.wire}, expected ${expected}`, { offset: r.base + r.fieldStart, depth: r.depth });
}

const IDENTITY_BYTES = 256;

/**
 * One object at a time: `begin()`, then `field()` for every field of each
 * of its ObjectMeta messages (the caller walks them), then `finish()`.
 * Reusable; allocates nothing per object.
 */
export class ProtoKeyReader {
  readonly result = new KeyResult();
  readonly key: ObjectKey;
  /**
   * Bit `f` is set for each ObjectMeta field number `f` that {@link field}
   * reads: the caller skips the rest without a call (most of ObjectMeta's
   * fields, on the hot path).
   */
  readonly fields: number;
  readonly #slots: SlotStarts | undefined;
  readonly #slotCount: number;
  readonly #label: Buffer;
  readonly #hash = new Uint32Array(2);
  readonly #inner = new WireReader();
  #hasValue = false;
  #hi = 0;
  #lo = 0;
  // Owner key: the first controller reference, and the object's own uid as the fallback.
  #hasOwner = false;
  #ownerHi = 0;
  #ownerLo = 0;
  // Labels mode: the slot label's last entry (-1: not a slot).
  #labelSeen = false;
  #slot = -1;
  readonly #name = Buffer.alloc(IDENTITY_BYTES);
  #nameLen = 0;
  readonly #namespace = Buffer.alloc(IDENTITY_BYTES);
  #namespaceLen = 0;

  constructor(key: ObjectKey) {
    this.key = key;
    this.#slots = isSlotKey(key) ? SlotStarts.of(key.slotCount) : undefined;
    this.#slotCount = isSlotKey(key) ? key.slotCount : 0;
    this.#label = Buffer.from(isSlotKey(key) ? key.label : "", "utf8");
    const bit = (f: number): number => 1 << f;
    this.fields = isSlotKey(key)
      ? bit(META_LABELS) | bit(META_NAME) | bit(META_NAMESPACE)
      : key === "uid"
        ? bit(META_UID)
        : key === "namespace"
          ? bit(META_NAMESPACE)
          : bit(META_UID) | bit(META_OWNER_REFERENCES);
  }

  begin(): void {
    this.result.reset();
    this.#hasValue = this.#hasOwner = this.#labelSeen = false;
    this.#slot = -1;
    this.#nameLen = this.#namespaceLen = 0;
  }

  /** Inspects the ObjectMeta field `m` sits on (of `buf`). Throws {@link ScanError} on a field it reads with the wrong wire type. */
  field(m: WireReader, buf: Uint8Array): void {
    const f = m.field;
    const key = this.key;
    if (f === META_UID) {
      if (key !== "uid" && key !== "owner") return;
      if (m.wire !== WIRE_LEN) throw wrongWire("metadata.uid", m, "length-delimited");
      this.#value(buf, m.valueStart, m.valueEnd);
    } else if (f === META_NAMESPACE) {
      if (key !== "namespace" && this.#slots === undefined) return;
      if (m.wire !== WIRE_LEN) throw wrongWire("metadata.namespace", m, "length-delimited");
      if (key === "namespace") this.#value(buf, m.valueStart, m.valueEnd);
      else if (this.#slots !== undefined) this.#namespaceLen = copyInto(this.#namespace, buf, m.valueStart, m.valueEnd);
    } else if (f === META_NAME) {
      if (this.#slots === undefined) return;
      if (m.wire !== WIRE_LEN) throw wrongWire("metadata.name", m, "length-delimited");
      this.#nameLen = copyInto(this.#name, buf, m.valueStart, m.valueEnd);
    } else if (f === META_OWNER_REFERENCES) {
      if (key !== "owner") return;
      if (m.wire !== WIRE_LEN) throw wrongWire("metadata.ownerReferences", m, "length-delimited");
      if (!this.#hasOwner) this.#ownerReference(buf, m);
    } else if (f === META_LABELS) {
      if (this.#slots === undefined) return;
      if (m.wire !== WIRE_LEN) throw wrongWire("metadata.labels", m, "length-delimited");
      this.#labelEntry(buf, m);
    }
  }

  /** The object's metadata is read: decides its key. */
  finish(): void {
    const starts = this.#slots;
    if (starts !== undefined) {
      if (this.#labelSeen && this.#slot >= 0) this.result.found(starts.hi[this.#slot] as number, starts.lo[this.#slot] as number);
      else this.result.unlabelled();
    } else if (this.#hasOwner) this.result.found(this.#ownerHi, this.#ownerLo);
    else if (this.#hasValue) this.result.found(this.#hi, this.#lo);
    else this.result.empty();
  }

  /** `namespace/name` as read (labels mode), for a log line. */
  describe(): string {
    const name = this.#name.toString("utf8", 0, this.#nameLen);
    return this.#namespaceLen === 0 ? name : `${this.#namespace.toString("utf8", 0, this.#namespaceLen)}/${name}`;
  }

  #value(buf: Uint8Array, start: number, end: number): void {
    fnv1a64Into(buf, start, end, this.#hash);
    this.#hasValue = true;
    this.#hi = this.#hash[0] as number;
    this.#lo = this.#hash[1] as number;
  }

  /** One OwnerReference; within it, the last uid and the last controller count. */
  #ownerReference(buf: Uint8Array, m: WireReader): void {
    const r = this.#inner.reset(buf, m.valueStart, m.valueEnd, m.base, m.depth + 1);
    let uid = false;
    let controller = false;
    while (r.next()) {
      if (r.field === REF_UID) {
        if (r.wire !== WIRE_LEN) throw wrongWire("ownerReferences.uid", r, "length-delimited");
        fnv1a64Into(buf, r.valueStart, r.valueEnd, this.#hash);
        uid = true;
      } else if (r.field === REF_CONTROLLER) {
        if (r.wire !== WIRE_VARINT) throw wrongWire("ownerReferences.controller", r, "varint");
        controller = r.value !== 0;
      }
    }
    if (!uid || !controller) return;
    this.#hasOwner = true;
    this.#ownerHi = this.#hash[0] as number;
    this.#ownerLo = this.#hash[1] as number;
  }

  /** One labels map entry; an entry for the slot label replaces any earlier one. A missing value is "". */
  #labelEntry(buf: Uint8Array, m: WireReader): void {
    const r = this.#inner.reset(buf, m.valueStart, m.valueEnd, m.base, m.depth + 1);
    let keyStart = 0;
    let keyEnd = 0;
    let valueStart = 0;
    let valueEnd = 0;
    while (r.next()) {
      if (r.field !== ENTRY_KEY && r.field !== ENTRY_VALUE) continue;
      if (r.wire !== WIRE_LEN) throw wrongWire("a metadata.labels entry", r, "length-delimited");
      if (r.field === ENTRY_KEY) {
        keyStart = r.valueStart;
        keyEnd = r.valueEnd;
      } else {
        valueStart = r.valueStart;
        valueEnd = r.valueEnd;
      }
    }
    if (!bytesEqual(buf, keyStart, keyEnd, this.#label)) return;
    this.#labelSeen = true;
    this.#slot = slotOfBytes(buf, valueStart, valueEnd, this.#slotCount);
  }
}

function copyInto(to: Buffer, buf: Uint8Array, start: number, end: number): number {
  const n = Math.min(end - start, to.length);
  to.set(buf.subarray(start, start + n), 0);
  return n;
}
