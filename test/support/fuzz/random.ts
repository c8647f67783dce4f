/**
 * The fuzzers' randomness: one seed for a run, and from it one independent
 * stream per case, so any case can be replayed alone from (seed, case) no
 * matter how the others interleaved.
 */
import { rng } from "../rng.ts";

/** A seed from `SHARDCAR_FUZZ_SEED`, or `fallback` (a fresh one when undefined). */
export function seedFromEnv(fallback?: number): number {
  const raw = process.env["SHARDCAR_FUZZ_SEED"];
  if (raw !== undefined && raw !== "") {
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`SHARDCAR_FUZZ_SEED=${JSON.stringify(raw)}: expected a non-negative integer`);
    return n;
  }
  return fallback ?? Math.floor(Math.random() * 2 ** 31);
}

export class Random {
  readonly #next: () => number;
  constructor(seed: number) {
    this.#next = rng(seed);
  }

  /** The stream for case `i` of a run seeded with `seed`. */
  static forCase(seed: number, i: number): Random {
    // Two rounds of mixing so neighbouring (seed, i) pairs are unrelated.
    const first = new Random((seed ^ Math.imul(i + 1, 0x9e3779b1)) >>> 0).u32();
    return new Random((first ^ Math.imul(i, 0x85ebca6b)) >>> 0);
  }

  /** [0, 1). */
  float(): number {
    return this.#next();
  }
  u32(): number {
    return Math.floor(this.#next() * 2 ** 32) >>> 0;
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.#next() * n);
  }
  /** An integer in [lo, hi]. */
  between(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }
  chance(p: number): boolean {
    return this.#next() < p;
  }
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[this.int(items.length)] as T;
  }
  /** One of `choices`, by weight. */
  weighted<T>(choices: ReadonlyArray<readonly [number, T]>): T {
    const total = choices.reduce((s, [w]) => s + w, 0);
    let at = this.#next() * total;
    for (const [w, v] of choices) {
      if ((at -= w) < 0) return v;
    }
    return (choices[choices.length - 1] as readonly [number, T])[1];
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
  /** A size skewed towards small, sometimes large: most bugs are at the edges. */
  size(max: number): number {
    return this.weighted<number>([
      [4, this.int(4)],
      [4, this.int(64)],
      [2, this.int(Math.min(max, 4096) + 1)],
      [1, max - this.int(4)],
      [1, this.int(max + 1)],
    ]);
  }
}
