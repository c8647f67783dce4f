/**
 * FNV-1a 64, the hash KEP-5866 applies to `metadata.uid` or
 * `metadata.namespace` (raw UTF-8 bytes, no prefix, no trimming).
 *
 * The hot path works on four 16-bit limbs in plain numbers: BigInt costs an
 * allocation per multiply, and the proxy hashes one value per list item and
 * per watch event.
 */

const OFFSET_HI = 0xcbf29ce4;
const OFFSET_LO = 0x84222325;

/**
 * Hashes `bytes[start, end)` and writes the 64-bit result into `out` as
 * `out[0]` = high 32 bits, `out[1]` = low 32 bits. Allocates nothing.
 */
export function fnv1a64Into(bytes: Uint8Array, start: number, end: number, out: Uint32Array): void {
  let h0 = OFFSET_LO & 0xffff;
  let h1 = OFFSET_LO >>> 16;
  let h2 = OFFSET_HI & 0xffff;
  let h3 = OFFSET_HI >>> 16;
  for (let i = start; i < end; i++) {
    h0 ^= bytes[i] as number;
    // prime = 2^40 + 0x1b3: multiply each limb by 0x1b3 and add the input
    // shifted left by 40 bits (two limbs and eight bits), then carry. Every
    // intermediate stays below 2^31, so no precision is lost.
    const t0 = h0 * 0x1b3;
    const t1 = h1 * 0x1b3 + (t0 >>> 16);
    const t2 = h2 * 0x1b3 + (h0 << 8) + (t1 >>> 16);
    const t3 = h3 * 0x1b3 + (h1 << 8) + (t2 >>> 16);
    h0 = t0 & 0xffff;
    h1 = t1 & 0xffff;
    h2 = t2 & 0xffff;
    h3 = t3 & 0xffff;
  }
  out[0] = ((h3 << 16) | h2) >>> 0;
  out[1] = ((h1 << 16) | h0) >>> 0;
}

const encoder = new TextEncoder();

function toBytes(input: string | Uint8Array): Uint8Array {
  return typeof input === "string" ? encoder.encode(input) : input;
}

/** FNV-1a 64 of a string's UTF-8 bytes (or of raw bytes), as a bigint. For tools, not hot paths. */
export function fnv1a64(input: string | Uint8Array): bigint {
  const bytes = toBytes(input);
  const out = new Uint32Array(2);
  fnv1a64Into(bytes, 0, bytes.length, out);
  return ((BigInt(out[0] as number) << 32n) | BigInt(out[1] as number));
}

/** The hash the way the server prints it: `0x` and 16 lowercase hex digits. */
export function fnv1a64Hex(input: string | Uint8Array): string {
  return formatBound(fnv1a64(input));
}

/** Formats a bound or hash as the server does: zero-padded to 16 digits; 2^64 has 17. */
export function formatBound(value: bigint): string {
  return "0x" + value.toString(16).padStart(16, "0");
}
