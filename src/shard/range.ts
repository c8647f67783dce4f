/**
 * Half-open ranges on the 64-bit hash keyspace `[0, 2^64)`.
 *
 * Ranges are immutable values with bigint bounds: set algebra happens when
 * ownership changes, not per object, so clarity beats speed here. The per-item
 * check goes through {@link HashMatcher}, which compares 32-bit halves.
 */
import { InvalidRangeError } from "../errors.ts";
import { fnv1a64Into } from "./hash.ts";

export const KEYSPACE_END = 1n << 64n;

export interface Range {
  readonly start: bigint;
  /** Exclusive; at most 2^64. */
  readonly end: bigint;
}

/** Builds a range, refusing anything outside `0 <= start < end <= 2^64`. */
export function makeRange(start: bigint, end: bigint): Range {
  if (start < 0n || end > KEYSPACE_END || start >= end) {
    throw new InvalidRangeError(`invalid range [${start}, ${end}): need 0 <= start < end <= 2^64`);
  }
  return Object.freeze({ start, end });
}

export const FULL_RANGE: Range = makeRange(0n, KEYSPACE_END);

/** Sorts and merges overlapping or touching ranges: the canonical form of a union. */
export function normalize(ranges: readonly Range[]): Range[] {
  const sorted = [...ranges].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  const out: Range[] = [];
  for (const r of sorted) {
    const last = out[out.length - 1];
    if (last !== undefined && r.start <= last.end) {
      if (r.end > last.end) out[out.length - 1] = makeRange(last.start, r.end);
    } else {
      out.push(r);
    }
  }
  return out;
}

export function union(a: readonly Range[], b: readonly Range[]): Range[] {
  return normalize([...a, ...b]);
}

export function intersect(a: readonly Range[], b: readonly Range[]): Range[] {
  const x = normalize(a);
  const y = normalize(b);
  const out: Range[] = [];
  let i = 0;
  let j = 0;
  while (i < x.length && j < y.length) {
    const p = x[i] as Range;
    const q = y[j] as Range;
    const start = p.start > q.start ? p.start : q.start;
    const end = p.end < q.end ? p.end : q.end;
    if (start < end) out.push(makeRange(start, end));
    if (p.end < q.end) i++;
    else j++;
  }
  return out;
}

/** `a` minus `b`. */
export function difference(a: readonly Range[], b: readonly Range[]): Range[] {
  return intersect(a, complement(b));
}

export function complement(ranges: readonly Range[]): Range[] {
  const out: Range[] = [];
  let cursor = 0n;
  for (const r of normalize(ranges)) {
    if (r.start > cursor) out.push(makeRange(cursor, r.start));
    cursor = r.end;
  }
  if (cursor < KEYSPACE_END) out.push(makeRange(cursor, KEYSPACE_END));
  return out;
}

export function contains(ranges: readonly Range[], hash: bigint): boolean {
  return ranges.some((r) => r.start <= hash && hash < r.end);
}

/** Total number of hash values covered (overlaps counted once). */
export function size(ranges: readonly Range[]): bigint {
  return normalize(ranges).reduce((n, r) => n + (r.end - r.start), 0n);
}

export function equal(a: readonly Range[], b: readonly Range[]): boolean {
  const x = normalize(a);
  const y = normalize(b);
  return x.length === y.length && x.every((r, i) => r.start === y[i]?.start && r.end === y[i]?.end);
}

/**
 * Shard `i` of `n`: `[floor(i*2^64/n), floor((i+1)*2^64/n))`. Every participant
 * must use exactly this arithmetic, or neighbouring shards overlap or leave gaps.
 */
export function shardRange(i: number, n: number): Range {
  if (!Number.isInteger(n) || n < 1 || !Number.isInteger(i) || i < 0 || i >= n) {
    throw new InvalidRangeError(`shard ${i}/${n}: need integers with 0 <= i < n`);
  }
  const N = BigInt(n);
  return makeRange((BigInt(i) * KEYSPACE_END) / N, (BigInt(i + 1) * KEYSPACE_END) / N);
}

/** All `n` shards, in order. */
export function split(n: number): Range[] {
  return Array.from({ length: n }, (_, i) => shardRange(i, n));
}

/** Share of the keyspace covered, as a float in [0, 1]. */
export function ratio(ranges: readonly Range[]): number {
  return Number((size(ranges) * 1_000_000n) / KEYSPACE_END) / 1_000_000;
}

/**
 * Membership test compiled for the hot path: bounds split into 32-bit halves
 * so a check is a few integer comparisons and no allocation.
 */
export class HashMatcher {
  readonly ranges: readonly Range[];
  private readonly startHi: Float64Array;
  private readonly startLo: Float64Array;
  private readonly endHi: Float64Array;
  private readonly endLo: Float64Array;
  private readonly scratch = new Uint32Array(2);

  constructor(ranges: readonly Range[]) {
    this.ranges = normalize(ranges);
    const n = this.ranges.length;
    this.startHi = new Float64Array(n);
    this.startLo = new Float64Array(n);
    this.endHi = new Float64Array(n);
    this.endLo = new Float64Array(n);
    this.ranges.forEach((r, k) => {
      this.startHi[k] = Number(r.start >> 32n);
      this.startLo[k] = Number(r.start & 0xffffffffn);
      // 2^64 becomes endHi = 2^32, which every 32-bit high half is below.
      this.endHi[k] = Number(r.end >> 32n);
      this.endLo[k] = Number(r.end & 0xffffffffn);
    });
  }

  /** True when the 64-bit value `hi:lo` lies in any range. */
  matchesParts(hi: number, lo: number): boolean {
    const n = this.startHi.length;
    for (let k = 0; k < n; k++) {
      const sHi = this.startHi[k] as number;
      const eHi = this.endHi[k] as number;
      if (hi < sHi || (hi === sHi && lo < (this.startLo[k] as number))) continue;
      if (hi < eHi || (hi === eHi && lo < (this.endLo[k] as number))) return true;
    }
    return false;
  }

  /**
   * Tests the point `hi:lo` of a key read from an object (not a probe):
   * the same answer as {@link matchesParts}, and the one hook a subclass
   * may use to observe the keys of what it lets through.
   */
  matchesKey(hi: number, lo: number): boolean {
    return this.matchesParts(hi, lo);
  }

  /** Hashes `bytes[start, end)` with FNV-1a 64 and tests it. */
  matchesBytes(bytes: Uint8Array, start: number, end: number): boolean {
    fnv1a64Into(bytes, start, end, this.scratch);
    return this.matchesParts(this.scratch[0] as number, this.scratch[1] as number);
  }

  matchesString(value: string): boolean {
    const b = Buffer.from(value, "utf8");
    return this.matchesBytes(b, 0, b.length);
  }

  get empty(): boolean {
    return this.ranges.length === 0;
  }

  get full(): boolean {
    return this.ranges.length === 1 && this.ranges[0]?.start === 0n && this.ranges[0]?.end === KEYSPACE_END;
  }
}
