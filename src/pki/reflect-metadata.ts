/**
 * The smallest Reflect metadata API that `@peculiar/x509` needs.
 *
 * `@peculiar/x509` 2.x registers its classes with tsyringe, and tsyringe
 * refuses to load unless `Reflect.getMetadata` exists ("tsyringe requires a
 * reflect polyfill"). Nothing here uses decorator metadata; tsyringe only
 * looks up constructor parameter types (none are recorded, so it sees none).
 * This installs `defineMetadata`, `getOwnMetadata` and `getMetadata` (which
 * walks the prototype chain, as the proposal specifies) when they are
 * missing, and nothing when a full polyfill such as `reflect-metadata` is
 * already loaded.
 *
 * It must be imported before `@peculiar/x509` is evaluated: `pki.ts`
 * imports it first, and is the only importer of `@peculiar/x509`.
 */

type Key = string | symbol;
type Target = object;

interface ReflectMetadata {
  defineMetadata(key: unknown, value: unknown, target: Target, property?: Key): void;
  getOwnMetadata(key: unknown, target: Target, property?: Key): unknown;
  getMetadata(key: unknown, target: Target, property?: Key): unknown;
}

const store = new WeakMap<Target, Map<Key | undefined, Map<unknown, unknown>>>();

function own(target: Target, property: Key | undefined, create: boolean): Map<unknown, unknown> | undefined {
  let byProperty = store.get(target);
  if (byProperty === undefined) {
    if (!create) return undefined;
    byProperty = new Map();
    store.set(target, byProperty);
  }
  let entries = byProperty.get(property);
  if (entries === undefined && create) {
    entries = new Map();
    byProperty.set(property, entries);
  }
  return entries;
}

const shim: ReflectMetadata = {
  defineMetadata(key, value, target, property) {
    own(target, property, true)?.set(key, value);
  },
  getOwnMetadata(key, target, property) {
    return own(target, property, false)?.get(key);
  },
  getMetadata(key, target, property) {
    for (let t: Target | null = target; t !== null; t = Object.getPrototypeOf(t) as Target | null) {
      const entries = own(t, property, false);
      if (entries?.has(key)) return entries.get(key);
    }
    return undefined;
  },
};

const reflect = Reflect as unknown as Partial<ReflectMetadata>;
if (typeof reflect.getMetadata !== "function") {
  for (const [name, fn] of Object.entries(shim)) {
    Object.defineProperty(Reflect, name, { value: fn, writable: true, configurable: true });
  }
}

export {};
