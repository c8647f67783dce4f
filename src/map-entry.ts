/**
 * The get-or-create of a Map, written once. (Map.prototype.getOrInsertComputed
 * does this, but Node 24 does not have it yet.)
 */

/** The value of `key` in `map`; the first time it is asked for, `make` makes it and it is stored. */
export function entryOf<K, V>(map: Map<K, V>, key: K, make: (key: K) => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make(key);
    map.set(key, value);
  }
  return value;
}
