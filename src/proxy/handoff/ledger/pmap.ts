/**
 * A map that is never changed once made: a step edits a draft of it and
 * gets a new map that shares its entries with the old one. The ledger's
 * records of requests and lineages may hold thousands of entries (one
 * watch per namespace of a large controller) while a step touches two or
 * three, and copying a Map costs ~65 ns an entry: copying both on every
 * request would add a third of a millisecond to it. Pure.
 *
 * A map is a base (never mutated once shared) and a small delta of
 * changes over it (never mutated once shared either); a draft copies only
 * the delta, and `done()` folds the delta into a new base once it grows
 * past `COMPACT_AT` entries (amortised: a copy of the whole map every few
 * dozen changes). Iteration follows the base's order, then keys new in the
 * delta in the order they were added; a key deleted and set again keeps
 * its place if the base has it.
 */

const GONE: unique symbol = Symbol("gone");
type Slot<V> = V | typeof GONE;

/** Past this many changes, a draft's result gets a fresh base. */
const COMPACT_AT = 64;

/** What the ledger reads of its maps (a subset of `ReadonlyMap`, so plain Maps are one too). */
export interface ReadMap<K, V> {
  readonly size: number;
  get(key: K): V | undefined;
  has(key: K): boolean;
  keys(): IterableIterator<K>;
  values(): IterableIterator<V>;
  entries(): IterableIterator<[K, V]>;
  [Symbol.iterator](): IterableIterator<[K, V]>;
}

function lookup<K, V>(base: ReadonlyMap<K, V>, delta: ReadonlyMap<K, Slot<V>>, key: K): V | undefined {
  if (!delta.has(key)) return base.get(key);
  const v = delta.get(key) as Slot<V>;
  return v === GONE ? undefined : v;
}

function has<K, V>(base: ReadonlyMap<K, V>, delta: ReadonlyMap<K, Slot<V>>, key: K): boolean {
  return delta.has(key) ? delta.get(key) !== GONE : base.has(key);
}

function* entriesOf<K, V>(base: ReadonlyMap<K, V>, delta: ReadonlyMap<K, Slot<V>>): IterableIterator<[K, V]> {
  for (const [k, v] of base) {
    if (!delta.has(k)) yield [k, v];
    else {
      const d = delta.get(k) as Slot<V>;
      if (d !== GONE) yield [k, d];
    }
  }
  for (const [k, d] of delta) if (d !== GONE && !base.has(k)) yield [k, d];
}

abstract class Reading<K, V> implements ReadMap<K, V> {
  protected abstract readonly base: ReadonlyMap<K, V>;
  protected abstract readonly delta: ReadonlyMap<K, Slot<V>>;
  abstract readonly size: number;
  get(key: K): V | undefined {
    return lookup(this.base, this.delta, key);
  }
  has(key: K): boolean {
    return has(this.base, this.delta, key);
  }
  entries(): IterableIterator<[K, V]> {
    return entriesOf(this.base, this.delta);
  }
  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.entries();
  }
  *keys(): IterableIterator<K> {
    for (const [k] of this.entries()) yield k;
  }
  *values(): IterableIterator<V> {
    for (const [, v] of this.entries()) yield v;
  }
}

export class PMap<K, V> extends Reading<K, V> {
  protected readonly base: ReadonlyMap<K, V>;
  protected readonly delta: ReadonlyMap<K, Slot<V>>;
  readonly size: number;

  private constructor(base: ReadonlyMap<K, V>, delta: ReadonlyMap<K, Slot<V>>, size: number) {
    super();
    this.base = base;
    this.delta = delta;
    this.size = size;
  }

  static of<K, V>(entries: Iterable<readonly [K, V]> = []): PMap<K, V> {
    const base = new Map<K, V>(entries);
    return new PMap<K, V>(base, new Map<K, Slot<V>>(), base.size);
  }

  /** A draft to change; this map stays as it is. */
  edit(): PMapDraft<K, V> {
    return new PMapDraft(this.base, this.delta, this.size, (b, d, n) => new PMap<K, V>(b, d, n));
  }
}

export class PMapDraft<K, V> extends Reading<K, V> {
  protected readonly base: ReadonlyMap<K, V>;
  protected readonly delta: Map<K, Slot<V>>;
  #size: number;
  readonly #make: (base: ReadonlyMap<K, V>, delta: ReadonlyMap<K, Slot<V>>, size: number) => PMap<K, V>;

  constructor(base: ReadonlyMap<K, V>, delta: ReadonlyMap<K, Slot<V>>, size: number, make: (base: ReadonlyMap<K, V>, delta: ReadonlyMap<K, Slot<V>>, size: number) => PMap<K, V>) {
    super();
    this.base = base;
    // The one copy a step makes: of the changes, not of the map.
    this.delta = new Map(delta);
    this.#size = size;
    this.#make = make;
  }

  get size(): number {
    return this.#size;
  }

  set(key: K, value: V): this {
    if (!this.has(key)) this.#size++;
    this.delta.set(key, value);
    return this;
  }

  delete(key: K): boolean {
    if (!this.has(key)) return false;
    this.#size--;
    // A key of the base is hidden; one only in the changes is just dropped.
    if (this.base.has(key)) this.delta.set(key, GONE);
    else this.delta.delete(key);
    return true;
  }

  /** The new map; the draft must not be used after. */
  done(): PMap<K, V> {
    if (this.delta.size <= COMPACT_AT) return this.#make(this.base, this.delta, this.#size);
    return this.#make(new Map(entriesOf(this.base, this.delta)), new Map(), this.#size);
  }
}
