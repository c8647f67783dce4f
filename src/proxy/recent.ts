/**
 * What the proxy recently delivered, so an operator can ask "did this
 * replica's controller get object X?" (`shardcar audit --canary`, through
 * `/debug/shardcar?key=<uid or namespace>`): the shard keys of the last watch
 * events each resource's filters passed. Bounded; no clock, no I/O.
 */
import { HashMatcher, type Range } from "../shard/range.ts";

// A canary is checked within seconds of its creation; 4096 events per
// resource covers that even at thousands of events a second, and costs
// about 200 KB per resource at most (a uid is 36 bytes).
export const RECENT_KEYS_PER_RESOURCE = 4096;

/** The last `capacity` keys added, with O(1) membership. */
export class RecentKeys {
  readonly capacity: number;
  readonly #ring: (string | undefined)[];
  readonly #counts = new Map<string, number>();
  #next = 0;
  #added = 0;

  constructor(capacity = RECENT_KEYS_PER_RESOURCE) {
    this.capacity = capacity;
    this.#ring = new Array<string | undefined>(capacity);
  }

  add(key: string): void {
    const old = this.#ring[this.#next];
    if (old !== undefined) {
      const n = (this.#counts.get(old) ?? 1) - 1;
      if (n === 0) this.#counts.delete(old);
      else this.#counts.set(old, n);
    }
    this.#ring[this.#next] = key;
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
    this.#next = (this.#next + 1) % this.capacity;
    this.#added++;
  }

  has(key: string): boolean {
    return this.#counts.has(key);
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
  constructor(ranges: readonly Range[], recent: RecentKeys) {
    super(ranges);
    this.#recent = recent;
  }
  override matchesBytes(bytes: Uint8Array, start: number, end: number): boolean {
    const hit = super.matchesBytes(bytes, start, end);
    // Empty keys are the filters' own probes (cluster-scoped objects under
    // namespace keying), not an object.
    if (hit && end > start) this.#recent.add(Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString("utf8"));
    return hit;
  }
}
