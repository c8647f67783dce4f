/**
 * What the filters and taps read to place an object in the keyspace: one
 * abstraction for every key, so each encoding has one reader
 * (`json-key.ts`, `proto-key.ts`) instead of a code path per key.
 *
 * - `uid`, `namespace`: the value the server hashes (KEP-5866).
 * - `owner`: the uid of the controller ownerReference, else the object's
 *   own uid (`keyValue` in src/shard/slots.ts).
 * - a slot label (`{ label, slotCount }`, labels mode): the slot written in
 *   `metadata.labels[label]`, placed at its range's first hash, so the
 *   proxy's ranges, matchers, synthetic DELETEs and recent-keys record work
 *   on slots exactly as they work on hashes.
 *
 * A reader ends each object in one of three states: a key found (its 64-bit
 * point `hi:lo`), no key (hashed as `""`, as the server hashes an object
 * without one), or unlabelled (a slot label missing or not a slot): such an
 * object is in no shard, and is dropped and counted, never guessed.
 */
import type { HashMatcher } from "../../shard/range.ts";
import type { ResourceKey } from "../../shard/slots.ts";
import { slotRange } from "../../shard/table.ts";
import { entryOf } from "../../map-entry.ts";

/** Labels mode: the slot label's key and the slot count its values are slots of. */
export interface SlotLabelKey {
  readonly label: string;
  readonly slotCount: number;
}

/** How an object is placed in the keyspace. */
export type ObjectKey = ResourceKey | SlotLabelKey;

export function isSlotKey(key: ObjectKey): key is SlotLabelKey {
  return typeof key === "object";
}

/** Still reading. */
export const KEY_PENDING = 0;
/** A key was found; its point is `hi:lo`. */
export const KEY_FOUND = 1;
/** No key on the object: it hashes as `""` (`hi:lo` holds that hash). */
export const KEY_EMPTY = 2;
/** Labels mode: no slot label, or one that is not a slot. In no shard. */
export const KEY_UNLABELLED = 3;
export type KeyState = 0 | 1 | 2 | 3;

/** FNV-1a 64 of the empty string: the offset basis. */
export const EMPTY_HI = 0xcbf29ce4;
export const EMPTY_LO = 0x84222325;

/** One object's key as a reader found it; reused per object. */
export class KeyResult {
  state: KeyState = KEY_PENDING;
  hi = 0;
  lo = 0;

  reset(): void {
    this.state = KEY_PENDING;
  }

  found(hi: number, lo: number): void {
    this.state = KEY_FOUND;
    this.hi = hi;
    this.lo = lo;
  }

  empty(): void {
    this.state = KEY_EMPTY;
    this.hi = EMPTY_HI;
    this.lo = EMPTY_LO;
  }

  unlabelled(): void {
    this.state = KEY_UNLABELLED;
  }

  /**
   * Whether the object belongs to `matcher`'s ranges. A found key goes
   * through `matchesKey` (a recording matcher remembers it); the empty key
   * is a probe, not an object's key; an unlabelled object is in none.
   */
  inRange(matcher: HashMatcher): boolean {
    switch (this.state) {
      case KEY_FOUND:
        return matcher.matchesKey(this.hi, this.lo);
      case KEY_EMPTY:
        return matcher.matchesParts(EMPTY_HI, EMPTY_LO);
      default:
        return false;
    }
  }

  /** Copies another result (a judgement kept past its reader's next object). */
  copy(from: KeyResult): void {
    this.state = from.state;
    this.hi = from.hi;
    this.lo = from.lo;
  }
}

/**
 * Whether a missing key means a malformed object worth counting (`unkeyed`):
 * every stored object has a uid, while a cluster-scoped object has no
 * namespace by design.
 */
export function countsUnkeyed(key: ObjectKey): boolean {
  return key === "uid" || key === "owner";
}

/** The first hash of every slot, as 32-bit halves; one table per slot count. */
export class SlotStarts {
  readonly hi: Uint32Array;
  readonly lo: Uint32Array;
  private constructor(slotCount: number) {
    this.hi = new Uint32Array(slotCount);
    this.lo = new Uint32Array(slotCount);
    for (let s = 0; s < slotCount; s++) {
      const start = slotRange(s, slotCount).start;
      this.hi[s] = Number(start >> 32n);
      this.lo[s] = Number(start & 0xffffffffn);
    }
  }

  static readonly #bySlotCount = new Map<number, SlotStarts>();

  static of(slotCount: number): SlotStarts {
    return entryOf(SlotStarts.#bySlotCount, slotCount, (n) => new SlotStarts(n));
  }
}

/**
 * A slot label's value read as raw bytes, as `parseSlot` (src/shard/slots.ts)
 * reads text: plain decimal, no sign, no leading zero, below `slotCount`.
 * -1 for anything else. Allocates nothing.
 */
export function slotOfBytes(buf: Uint8Array, start: number, end: number, slotCount: number): number {
  const n = end - start;
  if (n < 1 || n > 4) return -1;
  if (buf[start] === 0x30 && n > 1) return -1;
  let v = 0;
  for (let i = start; i < end; i++) {
    const d = (buf[i] as number) - 0x30;
    if (d < 0 || d > 9) return -1;
    v = v * 10 + d;
  }
  return v < slotCount ? v : -1;
}
