/**
 * What the proxy recently delivered, so an operator can ask "did this
 * replica's controller get object X?" (`shardcar audit --canary`, through
 * `/debug/shardcar?key=<uid or namespace>`): the shard keys of the last watch
 * events each resource's filters passed. Bounded; no clock, no I/O.
 */
import { fnv1a64Into } from "../../shard/hash.ts";
import { HashMatcher, type Range } from "../../shard/range.ts";

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
    return this.hasHash(this.#scratch[0] as number, this.#scratch[1] as number);
  }

  /** Whether the point `hi:lo` was added (labels mode records a slot's first hash). */
  hasHash(hi: number, lo: number): boolean {
    return this.#counts.has(fold(hi, lo));
  }

  /** Keys added since creation (including those since forgotten). */
  get added(): number {
    return this.#added;
  }
}

/**
 * A matcher that remembers every key it found in range. Used only for
 * watches: the watch filter tests the key of every ADDED, MODIFIED and
 * DELETED event (never BOOKMARK or ERROR) through `matchesKey`, and an event
 * in range is passed on. Objects without a key are probes (`matchesParts`),
 * not recorded.
 */
export class RecordingMatcher extends HashMatcher {
  readonly #recent: RecentKeys;
  constructor(ranges: readonly Range[], recent: RecentKeys) {
    super(ranges);
    this.#recent = recent;
  }
  override matchesKey(hi: number, lo: number): boolean {
    const hit = this.matchesParts(hi, lo);
    if (hit) this.#recent.addHash(hi, lo);
    return hit;
  }
}
