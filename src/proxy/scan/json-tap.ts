/**
 * Taps over the JSON a filter delivers (see tap.ts): which list items and
 * watch events reached the controller. They run a second
 * {@link JsonScanner} over the output, which in ring mode costs one more scan
 * of the kept bytes (1/N of a list on the filter path); static shards never
 * tap.
 */
import { ScanError } from "../../errors.ts";
import { jsonIdentityIds, JsonKeyReader, jsonKeyPaths, pathsPerKey } from "./json-key.ts";
import { compilePaths, decodeJsonString, DEFAULT_MAX_DEPTH, JsonScanner, KIND_NULL, KIND_OBJECT, type PathNode, type ScanSink, type ValueKind } from "./json-scanner.ts";
import { KEY_PENDING, KEY_UNLABELLED, type ObjectKey } from "./object-key.ts";
import { itemKind, type Tap, type TapSink } from "./tap.ts";

const MAX_TOKEN_BYTES = 16 * 1024 * 1024;

// Node ids both taps read: the delivered objects' type.
const KIND = 2;
const API_VERSION = 3;

// List node ids.
const L_ROOT = 1;
const L_CONTINUE = 5;
const L_RV = 6;
const L_ITEM = 7;
const L_META = 8;
const L_ROWS = 12;
/** The key reader's ids (json-key.ts); the identity (name, namespace, uid) is read through them too. */
const KEY_BASE = 32;
const ID = jsonIdentityIds(KEY_BASE);

/** An object's `metadata` members: its key's, and the identity an informer keys it by. */
function metaKeys(key: ObjectKey): ReturnType<typeof jsonKeyPaths> {
  return { ...jsonKeyPaths(key, KEY_BASE), name: { id: ID.name }, namespace: { id: ID.namespace }, uid: { id: ID.uid } };
}

const LIST_PATHS = pathsPerKey((key) =>
  compilePaths({
    id: L_ROOT,
    keys: {
      kind: { id: KIND },
      apiVersion: { id: API_VERSION },
      metadata: { keys: { continue: { id: L_CONTINUE }, resourceVersion: { id: L_RV } } },
      items: { element: { id: L_ITEM, keys: { metadata: { id: L_META, keys: metaKeys(key) } } } },
      // A Table's rows are not cached objects: nothing to index.
      rows: { id: L_ROWS },
    },
  }),
);

// Watch node ids.
const W_EVENT = 1;
const W_TYPE = 4;
const W_META = 6;
const W_RV = 10;

const WATCH_PATHS = pathsPerKey((key) =>
  compilePaths({
    id: W_EVENT,
    keys: {
      type: { id: W_TYPE },
      object: {
        keys: {
          kind: { id: KIND },
          apiVersion: { id: API_VERSION },
          metadata: { id: W_META, keys: { ...metaKeys(key), resourceVersion: { id: W_RV } } },
        },
      },
    },
  }),
);

/** The identity fields of one object, reset per item or event. */
class Identity {
  name: string | undefined;
  namespace = "";
  uid = "";
  reset(): void {
    this.name = undefined;
    this.namespace = "";
    this.uid = "";
  }
}

abstract class JsonTap implements Tap, ScanSink {
  protected readonly sink: TapSink;
  protected readonly id = new Identity();
  protected readonly key: JsonKeyReader;
  /** The delivered objects' `kind` and `apiVersion`, as last read. */
  protected kind: string | undefined;
  protected apiVersion: string | undefined;
  #scanner: JsonScanner;
  #base = 0;
  #dead = false;

  constructor(sink: TapSink, multi: boolean, paths: PathNode, key: ObjectKey) {
    this.sink = sink;
    this.key = new JsonKeyReader(key, KEY_BASE);
    this.#scanner = new JsonScanner(paths, this, { maxDepth: DEFAULT_MAX_DEPTH, maxTokenBytes: MAX_TOKEN_BYTES, multi });
  }

  /** Metadata opened (`begin`) or closed (`finish`): the key reader follows. */
  protected meta(open: boolean, kind: ValueKind): void {
    if (!open) this.key.finish();
    else if (kind === KIND_OBJECT) this.key.begin();
  }

  /** The current object's key, or undefined (and the tap gives up) when it has none the filter could have delivered. */
  protected delivered(name: string): { name: string; namespace: string; uid: string; keyHi: number; keyLo: number } | undefined {
    const k = this.key.result;
    if (k.state === KEY_PENDING || k.state === KEY_UNLABELLED) {
      this.giveUp(`delivered object ${JSON.stringify(name)} without a key this proxy could have kept`);
      return undefined;
    }
    return { name, namespace: this.id.namespace, uid: this.id.uid, keyHi: k.hi, keyLo: k.lo };
  }

  /**
   * A string member: identity and key members go through the key reader's
   * ids, the type is read here, and the rest is the tap's own ({@link member}).
   */
  string(id: number, buf: Buffer, start: number, end: number, escaped: boolean): void {
    if (this.#dead) return;
    if (this.key.owns(id)) {
      this.key.string(id, buf, start, end, escaped);
      if (id === ID.name) this.id.name = decodeJsonString(buf, start, end, escaped);
      else if (id === ID.namespace) this.id.namespace = decodeJsonString(buf, start, end, escaped);
      else if (id === ID.uid) this.id.uid = decodeJsonString(buf, start, end, escaped);
    } else if (id === KIND) this.kind = decodeJsonString(buf, start, end, escaped);
    else if (id === API_VERSION) this.apiVersion = decodeJsonString(buf, start, end, escaped);
    else this.member(id, buf, start, end, escaped);
  }

  /** A string member of the tap's own paths. */
  protected abstract member(id: number, buf: Buffer, start: number, end: number, escaped: boolean): void;

  write(chunk: Buffer): void {
    if (this.#dead) return;
    try {
      this.#scanner.scan(chunk, this.#base);
      this.#base += chunk.length;
    } catch (err) {
      if (!(err instanceof ScanError)) throw err;
      this.giveUp(`unreadable output: ${err.message}`);
    }
  }

  protected giveUp(reason: string): void {
    if (this.#dead) return;
    this.#dead = true;
    this.#scanner.stop();
    this.sink.unreadable(reason);
  }

  protected get dead(): boolean {
    return this.#dead;
  }

  abstract enter(id: number, pos: number, kind: ValueKind): void;
  abstract leave(id: number, end: number): void;
  comma(): void {}
  lineEnd(): void {}
}

class JsonListTap extends JsonTap {
  constructor(sink: TapSink, key: ObjectKey) {
    super(sink, false, LIST_PATHS(key), key);
  }

  enter(id: number, _pos: number, kind: ValueKind): void {
    if (this.key.owns(id)) this.key.enter(id, kind);
    else if (id === L_ITEM) this.id.reset();
    else if (id === L_META) this.meta(true, kind);
    else if (id === L_ROWS && kind !== KIND_NULL) this.giveUp("a Table list: its rows are not cached objects");
  }

  leave(id: number): void {
    if (this.dead) return;
    if (this.key.owns(id)) this.key.leave(id);
    else if (id === L_META) this.meta(false, KIND_OBJECT);
    else if (id === L_ITEM) {
      const name = this.id.name;
      const obj = name === undefined ? undefined : this.delivered(name);
      if (obj !== undefined) this.sink.upsert(obj);
    } else if (id === L_ROOT && this.kind !== undefined && this.apiVersion !== undefined) {
      this.sink.typeMeta(this.apiVersion, itemKind(this.kind));
    }
  }

  protected member(id: number, buf: Buffer, start: number, end: number, escaped: boolean): void {
    if (id === L_RV) this.sink.resourceVersion(decodeJsonString(buf, start, end, escaped));
    else if (id === L_CONTINUE) {
      const token = decodeJsonString(buf, start, end, escaped);
      if (token !== "") this.sink.continueToken(token);
    }
  }
}

class JsonWatchTap extends JsonTap {
  #type: string | undefined;
  #rv: string | undefined;

  constructor(sink: TapSink, key: ObjectKey) {
    super(sink, true, WATCH_PATHS(key), key);
  }

  enter(id: number, _pos: number, kind: ValueKind): void {
    if (this.key.owns(id)) this.key.enter(id, kind);
    else if (id === W_META) this.meta(true, kind);
    if (id !== W_EVENT) return;
    this.id.reset();
    this.#type = this.kind = this.apiVersion = this.#rv = undefined;
    if (kind !== KIND_OBJECT) this.giveUp("a watch event that is not an object");
  }

  leave(id: number): void {
    if (this.dead) return;
    if (this.key.owns(id)) this.key.leave(id);
    else if (id === W_META) this.meta(false, KIND_OBJECT);
    if (id !== W_EVENT) return;
    const type = this.#type;
    if (type === "ERROR") return;
    if (type === "ADDED" || type === "MODIFIED" || type === "DELETED") {
      const name = this.id.name;
      if (name === undefined) return this.giveUp(`a ${type} event without metadata.name`);
      if (type === "DELETED") this.sink.remove(this.id.namespace, name);
      else {
        const obj = this.delivered(name);
        if (obj === undefined) return;
        this.sink.upsert(obj);
      }
      if (this.kind !== undefined && this.apiVersion !== undefined && this.kind !== "Table") this.sink.typeMeta(this.apiVersion, this.kind);
      else if (this.kind === "Table") return this.giveUp("a Table watch: its rows are not cached objects");
    }
    if (this.#rv !== undefined) this.sink.resourceVersion(this.#rv);
  }

  protected member(id: number, buf: Buffer, start: number, end: number, escaped: boolean): void {
    if (id === W_TYPE) this.#type = decodeJsonString(buf, start, end, escaped);
    else if (id === W_RV) this.#rv = decodeJsonString(buf, start, end, escaped);
  }
}

/** A tap over one JSON list body as delivered; `key` is the filter's. */
export function createJsonListTap(sink: TapSink, key: ObjectKey): Tap {
  return new JsonListTap(sink, key);
}

/** A tap over one JSON watch stream as delivered (events in order, synthetic ones included); `key` is the filter's. */
export function createJsonWatchTap(sink: TapSink, key: ObjectKey): Tap {
  return new JsonWatchTap(sink, key);
}
