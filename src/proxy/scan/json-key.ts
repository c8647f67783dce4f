/**
 * The JSON half of the key abstraction (object-key.ts): which paths of an
 * object's `metadata` a {@link JsonScanner} must report for an
 * {@link ObjectKey}, and a reader that turns those reports into a
 * {@link KeyResult} without decoding the object.
 *
 * Key order differs by origin, so nothing may assume one: typed objects come
 * in Go struct order (ObjectMeta: uid before ownerReferences; an
 * OwnerReference: apiVersion, kind, name, uid, controller, blockOwnerDeletion),
 * custom resources with sorted keys (ownerReferences before uid; a
 * reference's `controller` before its `uid`). So a reference is judged when
 * it closes, and the owner key falls back to the object's uid only when the
 * metadata closes without a controller reference.
 *
 * Only the paths under the object's own `metadata` are reported (the
 * caller roots them there), so a pod template's or any nested object's
 * ownerReferences and labels never count.
 */
import { fnv1a64Into } from "../../shard/hash.ts";
import { decodeJsonString, KIND_OBJECT, KIND_STRING, KIND_TRUE, type PathNode, type PathSpec, type ValueKind } from "./json-scanner.ts";
import { isSlotKey, KEY_PENDING, KeyResult, slotOfBytes, SlotStarts, type ObjectKey } from "./object-key.ts";

// Offsets of a reader's node ids from its base.
const UID = 0;
const NAMESPACE = 1;
const NAME = 2;
const REF = 3;
const REF_UID = 4;
const REF_CONTROLLER = 5;
const LABEL = 6;
/** Node ids a reader uses: `[base, base + KEY_NODE_IDS)`. */
export const KEY_NODE_IDS = 7;

/**
 * The members of `metadata` to track for `key`, with ids from `base`.
 * Labels mode also tracks name and namespace, to name an unlabelled object
 * in the log.
 */
export function jsonKeyPaths(key: ObjectKey, base: number): Record<string, PathSpec> {
  if (isSlotKey(key)) {
    return { labels: { keys: { [key.label]: { id: base + LABEL } } }, name: { id: base + NAME }, namespace: { id: base + NAMESPACE } };
  }
  switch (key) {
    case "uid":
      return { uid: { id: base + UID } };
    case "namespace":
      return { namespace: { id: base + NAMESPACE } };
    case "owner":
      return { uid: { id: base + UID }, ownerReferences: { element: { id: base + REF, keys: { uid: { id: base + REF_UID }, controller: { id: base + REF_CONTROLLER } } } } };
  }
}

/** Ids of the identity members, for a consumer that reads them too (a tap) and routes them through its reader. */
export function jsonIdentityIds(base: number): { readonly uid: number; readonly namespace: number; readonly name: number } {
  return { uid: base + UID, namespace: base + NAMESPACE, name: base + NAME };
}

/**
 * Memoises a consumer's compiled paths per key: compiling costs more than a
 * small list, and the compiled tree is immutable. Slot keys are few (one per
 * ring a proxy serves).
 */
export function pathsPerKey(build: (key: ObjectKey) => PathNode): (key: ObjectKey) => PathNode {
  const cache = new Map<string, PathNode>();
  return (key) => {
    const id = isSlotKey(key) ? `${key.label}\u0000${key.slotCount}` : key;
    let node = cache.get(id);
    if (node === undefined) {
      node = build(key);
      cache.set(id, node);
    }
    return node;
  };
}

const IDENTITY_BYTES = 256;

/**
 * Reads one object's key from scanner reports, one object at a time:
 * `begin()` when its metadata opens, the reports for the reader's ids, then
 * `finish()` when the metadata closes. The report methods return true when
 * they have just decided the key, so a caller can act before the object
 * ends. No allocation per object, except to decode an escaped string.
 */
export class JsonKeyReader {
  readonly result = new KeyResult();
  readonly key: ObjectKey;
  readonly #base: number;
  readonly #slots: SlotStarts | undefined;
  readonly #slotCount: number;
  readonly #hash = new Uint32Array(2);
  // The object's own uid's hash, held until the owner key knows it has no controller reference.
  #hasUid = false;
  readonly #uid = new Uint32Array(2);
  // The ownerReference being read, and its uid's hash.
  #refOpen = false;
  #refUid = false;
  readonly #ref = new Uint32Array(2);
  #refController = false;
  // Name and namespace bytes, in labels mode, to name an unlabelled object.
  readonly #name = Buffer.alloc(IDENTITY_BYTES);
  #nameLen = 0;
  readonly #namespace = Buffer.alloc(IDENTITY_BYTES);
  #namespaceLen = 0;

  constructor(key: ObjectKey, base: number) {
    this.key = key;
    this.#base = base;
    this.#slots = isSlotKey(key) ? SlotStarts.of(key.slotCount) : undefined;
    this.#slotCount = isSlotKey(key) ? key.slotCount : 0;
  }

  owns(id: number): boolean {
    return id >= this.#base && id < this.#base + KEY_NODE_IDS;
  }

  get pending(): boolean {
    return this.result.state === KEY_PENDING;
  }

  begin(): void {
    this.result.reset();
    this.#hasUid = false;
    this.#refOpen = false;
    this.#nameLen = this.#namespaceLen = 0;
  }

  enter(id: number, kind: ValueKind): boolean {
    switch (id - this.#base) {
      case REF:
        this.#refOpen = kind === KIND_OBJECT;
        this.#refUid = false;
        this.#refController = false;
        return false;
      case REF_CONTROLLER:
        // Only the JSON literal true: a string "true" is not a controller.
        if (this.#refOpen) this.#refController = kind === KIND_TRUE;
        return false;
      case REF_UID:
        // A later non-string uid replaces an earlier string, as in JSON.parse.
        if (this.#refOpen && kind !== KIND_STRING) this.#refUid = false;
        return false;
      case LABEL:
        if (kind === KIND_STRING || !this.pending) return false;
        this.result.unlabelled();
        return true;
      default:
        return false;
    }
  }

  string(id: number, buf: Buffer, start: number, end: number, escaped: boolean): boolean {
    switch (id - this.#base) {
      case UID:
        if (this.key === "uid") return this.#foundValue(buf, start, end, escaped);
        if (this.key === "owner") {
          this.#hashValue(buf, start, end, escaped, this.#uid);
          this.#hasUid = true;
        }
        return false;
      case NAMESPACE:
        if (this.key === "namespace") return this.#foundValue(buf, start, end, escaped);
        this.#namespaceLen = buf.copy(this.#namespace, 0, start, Math.min(end, start + IDENTITY_BYTES));
        return false;
      case NAME:
        this.#nameLen = buf.copy(this.#name, 0, start, Math.min(end, start + IDENTITY_BYTES));
        return false;
      case REF_UID:
        if (!this.#refOpen) return false;
        this.#hashValue(buf, start, end, escaped, this.#ref);
        this.#refUid = true;
        return false;
      case LABEL:
        return this.#slot(buf, start, end, escaped);
      default:
        return false;
    }
  }

  leave(id: number): boolean {
    if (id - this.#base !== REF || !this.#refOpen) return false;
    this.#refOpen = false;
    // The first controller reference wins (slots.ts controllerOwnerUid).
    if (!this.pending || !this.#refController || !this.#refUid) return false;
    this.result.found(this.#ref[0] as number, this.#ref[1] as number);
    return true;
  }

  /** The metadata closed (or the object ended without any): decides what is still pending. */
  finish(): void {
    if (!this.pending) return;
    if (this.#slots !== undefined) this.result.unlabelled();
    else if (this.key === "owner" && this.#hasUid) this.result.found(this.#uid[0] as number, this.#uid[1] as number);
    else this.result.empty();
  }

  /** `namespace/name` of the object, as far as read (labels mode), for a log line. */
  describe(): string {
    const name = this.#name.toString("utf8", 0, this.#nameLen);
    return this.#namespaceLen === 0 ? name : `${this.#namespace.toString("utf8", 0, this.#namespaceLen)}/${name}`;
  }

  // The bytes of the string last read: a view of the input unless it had escapes.
  #vb: Buffer = Buffer.alloc(0);
  #vs = 0;
  #ve = 0;

  #unescape(buf: Buffer, start: number, end: number, escaped: boolean): void {
    if (escaped) {
      buf = Buffer.from(decodeJsonString(buf, start, end, true), "utf8");
      start = 0;
      end = buf.length;
    }
    this.#vb = buf;
    this.#vs = start;
    this.#ve = end;
  }

  /** Hashes the string into `into` (hi, lo). */
  #hashValue(buf: Buffer, start: number, end: number, escaped: boolean, into: Uint32Array = this.#hash): void {
    this.#unescape(buf, start, end, escaped);
    fnv1a64Into(this.#vb, this.#vs, this.#ve, into);
  }

  #foundValue(buf: Buffer, start: number, end: number, escaped: boolean): boolean {
    if (!this.pending) return false;
    this.#hashValue(buf, start, end, escaped);
    this.result.found(this.#hash[0] as number, this.#hash[1] as number);
    return true;
  }

  #slot(buf: Buffer, start: number, end: number, escaped: boolean): boolean {
    const starts = this.#slots;
    if (starts === undefined || !this.pending) return false;
    this.#unescape(buf, start, end, escaped);
    const slot = slotOfBytes(this.#vb, this.#vs, this.#ve, this.#slotCount);
    if (slot < 0) this.result.unlabelled();
    else this.result.found(starts.hi[slot] as number, starts.lo[slot] as number);
    return true;
  }
}
