/**
 * What the proxy recently delivered, so an operator can ask "did this
 * replica's controller get object X?" (`shardcar audit --canary`, through
 * `/debug/shardcar?key=<uid or namespace>`): the shard keys of the last watch
 * events each resource's filters passed. Bounded; no clock, no I/O.
 */
import { fnv1a64Into } from "../shard/hash.ts";
import { HashMatcher, type Range } from "../shard/range.ts";

// A canary is checked within seconds of its creation; 4096 events per
// resource covers that even at thousands of events a second, and costs
// 32 KB per resource for the ring plus the map's entries.
export const RECENT_KEYS_PER_RESOURCE = 4096;

const TWO_32 = 4294967296;

/**
 * A key's FNV-1a 64 hash folded into one double. Rounding keeps the top 53
 * bits, so two keys collide with odds of about 2^-53 per pair: a negligible
 * false "delivered" for a canary, and no string allocated per event.
 */
function fold(hi: number, lo: number): number {
  return hi * TWO_32 + lo;
}

/** The last `capacity` keys added (as hashes), with O(1) membership. */
export class RecentKeys {
  readonly capacity: number;
  readonly #ring: Float64Array;
  readonly #counts = new Map<number, number>();
  readonly #scratch = new Uint32Array(2);
  #next = 0;
  #added = 0;

  constructor(capacity = RECENT_KEYS_PER_RESOURCE) {
    this.capacity = capacity;
    this.#ring = new Float64Array(capacity).fill(Number.NaN);
  }

  add(key: string): void {
    const b = Buffer.from(key, "utf8");
    fnv1a64Into(b, 0, b.length, this.#scratch);
    this.addHash(this.#scratch[0] as number, this.#scratch[1] as number);
  }

  /** Adds the key whose FNV-1a 64 hash is `hi:lo` (the hot path: no allocation). */
  addHash(hi: number, lo: number): void {
    const old = this.#ring[this.#next] as number;
    if (!Number.isNaN(old)) {
      const n = (this.#counts.get(old) ?? 1) - 1;
      if (n === 0) this.#counts.delete(old);
      else this.#counts.set(old, n);
    }
    const h = fold(hi, lo);
    this.#ring[this.#next] = h;
    this.#counts.set(h, (this.#counts.get(h) ?? 0) + 1);
    this.#next = (this.#next + 1) % this.capacity;
    this.#added++;
  }

  has(key: string): boolean {
    const b = Buffer.from(key, "utf8");
    fnv1a64Into(b, 0, b.length, this.#scratch);
    return this.#counts.has(fold(this.#scratch[0] as number, this.#scratch[1] as number));
  }

  /** Keys added since creation (including those since forgotten). */
  get added(): number {
    return this.#added;
  }
}

/**
 * A matcher that remembers every non-empty key it found in range. Used only
 * for watches: the watch filter tests every ADDED, MODIFIED and DELETED event
 * (never BOOKMARK or ERROR), and an event in range is passed on.
 */
export class RecordingMatcher extends HashMatcher {
  readonly #recent: RecentKeys;
  readonly #hash = new Uint32Array(2);
  constructor(ranges: readonly Range[], recent: RecentKeys) {
    super(ranges);
    this.#recent = recent;
  }
  override matchesBytes(bytes: Uint8Array, start: number, end: number): boolean {
    fnv1a64Into(bytes, start, end, this.#hash);
    const hi = this.#hash[0] as number;
    const lo = this.#hash[1] as number;
    const hit = this.matchesParts(hi, lo);
    // Empty keys are the filters' own probes (cluster-scoped objects under
    // namespace keying), not an object.
    if (hit && end > start) this.#recent.addHash(hi, lo);
    return hit;
  }
}
