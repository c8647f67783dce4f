/**
 * A schema-less protobuf wire reader and writer: varints, tags and
 * length-delimited fields, read as zero-copy offsets into the caller's bytes.
 *
 * Enough to find `metadata.uid` inside a Kubernetes object without knowing
 * its type: every field is either skipped by its wire type or descended into
 * by number. Nothing here allocates on the read path, buffers, or keeps state
 * between calls beyond the cursor the caller owns.
 *
 * Wire format: https://protobuf.dev/programming-guides/encoding/
 */
import { ScanError } from "../../errors.ts";

export const WIRE_VARINT = 0;
export const WIRE_I64 = 1;
export const WIRE_LEN = 2;
export const WIRE_SGROUP = 3;
export const WIRE_EGROUP = 4;
export const WIRE_I32 = 5;

/** `k8s\0`: the prefix of every Kubernetes protobuf object (runtime/serializer/protobuf). */
export const K8S_MAGIC: Buffer = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

/** True when `buf[start, end)` begins with {@link K8S_MAGIC}. */
export function hasMagic(buf: Uint8Array, start: number, end: number): boolean {
  return end - start >= 4 && buf[start] === 0x6b && buf[start + 1] === 0x38 && buf[start + 2] === 0x73 && buf[start + 3] === 0x00;
}

/** True when `buf[start, end)` holds exactly the bytes of `literal`. */
export function bytesEqual(buf: Uint8Array, start: number, end: number, literal: Uint8Array): boolean {
  const n = literal.length;
  if (end - start !== n) return false;
  for (let k = 0; k < n; k++) if (buf[start + k] !== literal[k]) return false;
  return true;
}

function syntax(message: string, offset: number, depth: number): ScanError {
  return new ScanError("SHARDCAR_ERR_SCAN_SYNTAX", message, { offset, depth });
}

/**
 * A cursor over one complete message held in memory, `buf[start, end)`.
 * `next()` steps over one field and records where it and its value lie;
 * length-delimited values are left unread so the caller can skip or descend.
 *
 * One instance is reused per nesting level: `reset()` is the only setup cost.
 * Offsets in errors are `base + index`, so a caller that knows where `buf`
 * sits in the stream gets stream offsets.
 */
export class WireReader {
  buf: Uint8Array = K8S_MAGIC;
  pos = 0;
  end = 0;
  base = 0;
  depth = 0;
  /** The current field's number and wire type. */
  field = 0;
  wire = 0;
  /** Where the current field's tag starts, and where the whole field ends. */
  fieldStart = 0;
  /** For WIRE_LEN: the value's bounds. For WIRE_VARINT: `value` (exact below 2^53). */
  valueStart = 0;
  valueEnd = 0;
  value = 0;

  reset(buf: Uint8Array, start: number, end: number, base = 0, depth = 0): this {
    this.buf = buf;
    this.pos = start;
    this.end = end;
    this.base = base;
    this.depth = depth;
    return this;
  }

  /** Moves to the next field. Returns false at the end; throws {@link ScanError} on malformed input. */
  next(): boolean {
    const buf = this.buf;
    const end = this.end;
    let pos = this.pos;
    if (pos >= end) return false;
    this.fieldStart = pos;
    // Hot path: Kubernetes messages use field numbers below 16, so the tag is
    // one byte, and most lengths fit in one or two. Longer varints take the
    // general (floating-point) route.
    let tag = buf[pos] as number;
    if (tag < 0x80) {
      pos++;
    } else {
      tag = this.varint();
      pos = this.pos;
    }
    const wire = tag % 8;
    const field = (tag - wire) / 8;
    if (field === 0) throw syntax("protobuf field number 0", this.base + this.fieldStart, this.depth);
    this.field = field;
    this.wire = wire;
    if (wire === WIRE_LEN) {
      let len: number;
      const b0 = pos < end ? (buf[pos] as number) : 0x80;
      const b1 = pos + 1 < end ? (buf[pos + 1] as number) : 0x80;
      if (b0 < 0x80) {
        len = b0;
        pos += 1;
      } else if (b1 < 0x80) {
        len = (b0 & 0x7f) | (b1 << 7);
        pos += 2;
      } else {
        this.pos = pos;
        len = this.varint();
        pos = this.pos;
      }
      if (len > end - pos) {
        throw syntax(`length-delimited field ${field} of ${len} bytes overruns its message`, this.base + this.fieldStart, this.depth);
      }
      this.valueStart = pos;
      this.pos = this.valueEnd = pos + len;
      return true;
    }
    this.pos = pos;
    switch (wire) {
      case WIRE_VARINT:
        this.value = this.varint();
        this.valueStart = this.valueEnd = this.pos;
        return true;
      case WIRE_I64:
      case WIRE_I32: {
        const len = wire === WIRE_I64 ? 8 : 4;
        if (len > end - pos) throw syntax(`fixed-width field ${field} overruns its message`, this.base + this.fieldStart, this.depth);
        this.valueStart = pos;
        this.pos = this.valueEnd = pos + len;
        return true;
      }
      default:
        // Groups (3, 4) are proto1 relics no Kubernetes type uses; 6 and 7 do not exist.
        throw syntax(`unsupported protobuf wire type ${wire} (field ${field})`, this.base + this.fieldStart, this.depth);
    }
  }

  private varint(): number {
    const buf = this.buf;
    let value = 0;
    let scale = 1;
    for (let k = 0; k < 10; k++) {
      if (this.pos >= this.end) throw syntax("varint runs past the end of its message", this.base + this.pos, this.depth);
      const b = buf[this.pos++] as number;
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 128;
    }
    throw syntax("varint longer than 10 bytes", this.base + this.pos, this.depth);
  }
}

/**
 * Accumulates one varint a byte at a time, for headers that straddle the
 * chunks of a stream. `push` returns true when the varint is complete.
 */
export class VarintAccumulator {
  value = 0;
  private scale = 1;
  private count = 0;

  push(byte: number, offset: number, depth: number): boolean {
    if (this.count === 10) throw syntax("varint longer than 10 bytes", offset, depth);
    this.value += (byte & 0x7f) * this.scale;
    this.scale *= 128;
    this.count++;
    return byte < 0x80;
  }

  /** True before the first byte of a varint. */
  get empty(): boolean {
    return this.count === 0;
  }

  reset(): void {
    this.value = 0;
    this.scale = 1;
    this.count = 0;
  }
}

// ---------------------------------------------------------------------------
// Writing. Used for the filter path's envelope and for the few messages the
// filters make up (bookmarks, errors), never per passed byte.

export function varintSize(n: number): number {
  let size = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/** Writes `n` (a non-negative integer below 2^53) at `out[pos]`; returns the position after it. */
export function writeVarint(out: Uint8Array, pos: number, n: number): number {
  while (n >= 128) {
    out[pos++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  out[pos++] = n;
  return pos;
}

/** Tag and length of a length-delimited field with `len` bytes of value. */
export function lenHeader(field: number, len: number): Buffer {
  const tag = field * 8 + WIRE_LEN;
  const out = Buffer.allocUnsafe(varintSize(tag) + varintSize(len));
  writeVarint(out, writeVarint(out, 0, tag), len);
  return out;
}

/** A whole length-delimited field whose value is the concatenation of `parts`. */
export function lenField(field: number, ...parts: readonly Uint8Array[]): Buffer {
  let len = 0;
  for (const p of parts) len += p.length;
  return Buffer.concat([lenHeader(field, len), ...parts]);
}

/** A string field, UTF-8 encoded. */
export function stringField(field: number, value: string): Buffer {
  return lenField(field, Buffer.from(value, "utf8"));
}

/** A varint field. */
export function varintField(field: number, value: number): Buffer {
  const tag = field * 8 + WIRE_VARINT;
  const out = Buffer.allocUnsafe(varintSize(tag) + varintSize(value));
  writeVarint(out, writeVarint(out, 0, tag), value);
  return out;
}
