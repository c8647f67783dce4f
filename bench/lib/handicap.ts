/**
 * TEST-ONLY: a deliberately slowed candidate, to show that the quick bench
 * fails a real regression (docs/performance.md, "Can the quick bench
 * flap?"). Read by the micro benches only; nothing under src/ knows of it,
 * so no flag, annotation or environment of a running sidecar reaches it.
 *
 *   SHARDCAR_BENCH_SLOW_ITEM=N   the candidate filter's matcher hashes
 *                                every item's shard key N more times, as a
 *                                filter that did extra work per object would
 *
 * The baselines keep the plain matcher: only the candidate gets slower.
 */
import { fnv1a64Into } from "../../src/shard/hash.ts";
import { HashMatcher, type Range } from "../../src/shard/range.ts";

class SlowedMatcher extends HashMatcher {
  readonly #extra: number;
  readonly #out = new Uint32Array(2);
  constructor(ranges: readonly Range[], extra: number) {
    super(ranges);
    this.#extra = extra;
  }
  override matchesBytes(bytes: Uint8Array, start: number, end: number): boolean {
    for (let i = 0; i < this.#extra; i++) fnv1a64Into(bytes, start, end, this.#out);
    return super.matchesBytes(bytes, start, end);
  }
}

/** Extra hashes per item from SHARDCAR_BENCH_SLOW_ITEM; 0 when unset. */
export function slowdown(): number {
  const raw = process.env["SHARDCAR_BENCH_SLOW_ITEM"];
  if (raw === undefined || raw === "") return 0;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`SHARDCAR_BENCH_SLOW_ITEM must be a whole number of extra hashes per item, got ${JSON.stringify(raw)}`);
  return n;
}

/** The matcher a bench hands its candidate filter: plain, or slowed as {@link slowdown} says. */
export function candidateMatcher(ranges: readonly Range[]): HashMatcher {
  const n = slowdown();
  return n === 0 ? new HashMatcher(ranges) : new SlowedMatcher(ranges, n);
}
