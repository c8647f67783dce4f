/**
 * Slot tables: the keyspace cut into `slotCount` equal slots, each owned by at
 * most one member. The ring's leader computes a table with
 * {@link assignSlots}; every member turns its own slots into ranges with
 * {@link slotsToRanges}. Both sides must use exactly this arithmetic, or
 * neighbouring members overlap or leave gaps.
 *
 * Pure: no clock, no randomness, no I/O. The same inputs give the same table
 * on every manager replica, so a new leader recomputes what the old one would.
 */
import { InvalidRangeError } from "../errors.ts";
import { makeRange, shardRange, type Range } from "./range.ts";

/**
 * Slot index → owning member, `undefined` where nobody owns the slot.
 * Always exactly `slotCount` long.
 */
export type SlotOwners = readonly (string | undefined)[];

/** The slot count the design uses unless a ShardRing says otherwise. */
export const DEFAULT_SLOT_COUNT = 256;

// A member's selector is at worst one `shardRange` term per owned run, and an
// owner of every other slot has slotCount/2 runs. Each term is about 95 code
// points, so 1024 slots keep the worst selector near 49k, under CEL's 100k
// limit with room for the `||`s; 2048 would sit right at the limit.
export const MAX_SLOT_COUNT = 1024;

function checkSlotCount(slotCount: number): void {
  if (!Number.isInteger(slotCount) || slotCount < 1 || slotCount > MAX_SLOT_COUNT) {
    throw new InvalidRangeError(`slot count ${slotCount}: need an integer between 1 and ${MAX_SLOT_COUNT}`);
  }
}

/** The hash range of `slot`: the same arithmetic as `shardRange(slot, slotCount)`. */
export function slotRange(slot: number, slotCount: number): Range {
  checkSlotCount(slotCount);
  return shardRange(slot, slotCount);
}

/** Codepoint order, never locale order: every replica must sort identically. */
function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * A balanced, sticky assignment of `slotCount` slots to `members`.
 *
 * - Balanced: every member gets `floor(S/N)` or `ceil(S/N)` slots.
 * - Sticky: each continuing member keeps `min(previous, quota)` of its own
 *   previous slots, so a change of one member moves about `S/N` slots and no
 *   slot moves between two members that both stay within quota.
 * - Few gainers: a member at `floor(S/N)` gets no extra slot while one that
 *   gains anyway can take it (a gainer relists its whole share).
 * - Deterministic: depends only on the set of names (order and duplicates in
 *   `members` do not matter) and on `previous`.
 *
 * `previous` may come from anywhere (a hand-edited status, a different slot
 * count); slots it gives to non-members or that lie beyond `slotCount` are
 * ignored. With no members every slot is unowned.
 */
export function assignSlots(members: readonly string[], previous: SlotOwners | undefined, slotCount: number): (string | undefined)[] {
  checkSlotCount(slotCount);
  const names = [...new Set(members)].sort(byName);
  const owners: (string | undefined)[] = Array.from({ length: slotCount }, () => undefined);
  if (names.length === 0) return owners;

  const prevSlots = new Map<string, number[]>(names.map((n) => [n, []]));
  for (let s = 0; s < slotCount; s++) {
    const o = previous?.[s];
    if (o !== undefined) prevSlots.get(o)?.push(s);
  }

  const base = Math.floor(slotCount / names.length);
  const extra = slotCount % names.length;
  // The `extra` members allowed one slot above `base`: first those that
  // already hold more than `base` (most first), since giving it to anyone
  // else would force one more move; then those that gain anyway (below
  // `base`): one more slot each costs the same move as giving it to a
  // member at `base`, but that member would become a gainer, and a gainer
  // relists its whole share.
  const held = (n: string): number => prevSlots.get(n)?.length ?? 0;
  const rank = (n: string): number => (held(n) > base ? 0 : held(n) < base ? 1 : 2);
  const bySize = [...names].sort((a, b) => rank(a) - rank(b) || held(b) - held(a) || byName(a, b));
  const quota = new Map<string, number>(bySize.map((n, i) => [n, base + (i < extra ? 1 : 0)]));

  for (const n of names) {
    // Keeping the lowest slots and freeing the tail leaves the freed slots in
    // contiguous runs, so the newcomer's selector stays short.
    for (const s of (prevSlots.get(n) ?? []).slice(0, quota.get(n) ?? 0)) owners[s] = n;
  }
  const free: number[] = [];
  for (let s = 0; s < slotCount; s++) if (owners[s] === undefined) free.push(s);
  let next = 0;
  for (const n of names) {
    const held = Math.min(prevSlots.get(n)?.length ?? 0, quota.get(n) ?? 0);
    for (let k = held; k < (quota.get(n) ?? 0); k++) {
      const s = free[next++];
      if (s !== undefined) owners[s] = n;
    }
  }
  return owners;
}

/** The slots `member` owns, ascending. */
export function slotsOf(owners: SlotOwners, member: string): number[] {
  const out: number[] = [];
  owners.forEach((o, s) => {
    if (o === member) out.push(s);
  });
  return out;
}

/**
 * The hash ranges of a set of slots, contiguous slots merged into one range.
 * Order and duplicates in `slots` do not matter. Throws
 * {@link InvalidRangeError} for a slot outside `[0, slotCount)`.
 */
export function slotsToRanges(slots: Iterable<number>, slotCount: number): Range[] {
  checkSlotCount(slotCount);
  const sorted = [...new Set(slots)].sort((a, b) => a - b);
  const out: Range[] = [];
  let runStart: number | undefined;
  let prev = -2;
  const flush = (): void => {
    if (runStart !== undefined) out.push(makeRange(slotRange(runStart, slotCount).start, slotRange(prev, slotCount).end));
  };
  for (const s of sorted) {
    if (!Number.isInteger(s) || s < 0 || s >= slotCount) throw new InvalidRangeError(`slot ${s} is outside [0, ${slotCount})`);
    if (s !== prev + 1) {
      flush();
      runStart = s;
    }
    prev = s;
  }
  flush();
  return out;
}
