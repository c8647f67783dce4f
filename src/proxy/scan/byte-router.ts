/**
 * Byte routing for the JSON filters (json-list-filter.ts, json-watch-filter.ts).
 *
 * Every input byte is, at any moment, in one of three modes: EMIT (goes out
 * as is), HOLD (kept until the filter decides) or SKIP (discarded). The
 * filter only says where a mode changes (`switchTo(mode, pos)`, positions
 * absolute in the stream); the router cuts the current chunk there into
 * views. Nothing is copied, so a kept item or event goes out as views of the
 * input and nothing is allocated per chunk.
 */

export const EMIT = 0;
export const HOLD = 1;
export const SKIP = 2;

export class ByteRouter {
  /** Absolute stream offset of `held[0]`'s first byte. */
  heldStart = 0;
  #mode: number;
  /** Absolute offset where the current mode began (or the current chunk, if later). */
  #markPos = 0;
  #chunk: Buffer = Buffer.alloc(0);
  #chunkBase = 0;
  #out: Buffer[] = [];
  #held: Buffer[] = [];
  #heldBytes = 0;
  readonly #maxHeldBytes: number;
  readonly #tooLarge: (pos: number) => Error;

  /**
   * @param mode the mode of the stream's first byte.
   * @param maxHeldBytes more held bytes than this throw `tooLarge(pos)` at the switch that holds them.
   */
  constructor(mode: number, maxHeldBytes: number, tooLarge: (pos: number) => Error) {
    this.#mode = mode;
    this.#maxHeldBytes = maxHeldBytes;
    this.#tooLarge = tooLarge;
  }

  get mode(): number {
    return this.#mode;
  }

  /** What is held now, oldest first. The filter reads it; only the router changes it. */
  get held(): readonly Buffer[] {
    return this.#held;
  }

  /** A new chunk, whose byte 0 is at absolute offset `base`; it runs in the current mode until the next switch. */
  begin(chunk: Buffer, base: number): void {
    this.#chunk = chunk;
    this.#chunkBase = base;
    this.#markPos = base;
  }

  /** Routes `[mark, pos)` of the current chunk to the current mode, then starts `mode` at `pos`. */
  switchTo(mode: number, pos: number): void {
    const a = this.#markPos - this.#chunkBase;
    const b = pos - this.#chunkBase;
    if (b > a) {
      const seg = this.#chunk.subarray(a, b);
      if (this.#mode === EMIT) this.#out.push(seg);
      else if (this.#mode === HOLD) {
        if (this.#held.length === 0) this.heldStart = this.#markPos;
        this.#held.push(seg);
        this.#heldBytes += seg.length;
        if (this.#heldBytes > this.#maxHeldBytes) throw this.#tooLarge(pos);
      }
    }
    this.#mode = mode;
    this.#markPos = pos;
  }

  /** Forgets what is held and starts `mode` at `pos`, without routing the bytes before it. */
  restart(mode: number, pos: number): void {
    this.dropHeld();
    this.#mode = mode;
    this.#markPos = pos;
  }

  /** Adds a buffer of the filter's own (an ERROR event, a bookmark) to the output. */
  push(b: Buffer): void {
    this.#out.push(b);
  }

  /** The output so far, taken. */
  take(): Buffer[] {
    const out = this.#out;
    this.#out = [];
    return out;
  }

  /** The held bytes, taken out of the router. */
  takeHeld(): Buffer[] {
    const held = this.#held;
    this.dropHeld();
    return held;
  }

  /** The held bytes go out (or into `into`), in order. */
  releaseHeld(into: Buffer[] = this.#out): void {
    for (const b of this.#held) into.push(b);
    this.dropHeld();
  }

  dropHeld(): void {
    this.#held = [];
    this.#heldBytes = 0;
  }

  /** Replaces what is held with `bufs` (an edited copy of it); `heldStart` is kept. */
  replaceHeld(bufs: Buffer[]): void {
    this.#held = bufs;
    this.#heldBytes = bufs.reduce((n, b) => n + b.length, 0);
  }

  /** Removes the first held byte when it is `byte`; says whether it was. */
  dropLeadingHeld(byte: number): boolean {
    const first = this.#held[0];
    if (first === undefined || first[0] !== byte) return false;
    this.#heldBytes--;
    this.heldStart++;
    if (first.length === 1) this.#held.shift();
    else this.#held[0] = first.subarray(1);
    return true;
  }
}
