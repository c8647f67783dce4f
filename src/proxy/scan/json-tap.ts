/**
 * Taps over the JSON a filter delivers (see tap.ts): which list items and
 * watch events reached the controller. They run a second
 * {@link JsonScanner} over the output, which in ring mode costs one more scan
 * of the kept bytes (1/N of a list on the filter path); static shards never
 * tap.
 */
import { ScanError } from "../../errors.ts";
import { compilePaths, decodeJsonString, DEFAULT_MAX_DEPTH, JsonScanner, KIND_NULL, KIND_OBJECT, type ScanSink, type ValueKind } from "./json-scanner.ts";
import { itemKind, type Tap, type TapSink } from "./tap.ts";

const MAX_TOKEN_BYTES = 16 * 1024 * 1024;

// List node ids.
const L_ROOT = 1;
const L_KIND = 2;
const L_API_VERSION = 3;
const L_CONTINUE = 5;
const L_RV = 6;
const L_ITEM = 7;
const L_NAME = 9;
const L_NAMESPACE = 10;
const L_UID = 11;
const L_ROWS = 12;

const LIST_PATHS = compilePaths({
  id: L_ROOT,
  keys: {
    kind: { id: L_KIND },
    apiVersion: { id: L_API_VERSION },
    metadata: { keys: { continue: { id: L_CONTINUE }, resourceVersion: { id: L_RV } } },
    items: { element: { id: L_ITEM, keys: { metadata: { keys: { name: { id: L_NAME }, namespace: { id: L_NAMESPACE }, uid: { id: L_UID } } } } } },
    // A Table's rows are not cached objects: nothing to index.
    rows: { id: L_ROWS },
  },
});

// Watch node ids.
const W_EVENT = 1;
const W_TYPE = 2;
const W_KIND = 4;
const W_API_VERSION = 5;
const W_NAME = 7;
const W_NAMESPACE = 8;
const W_UID = 9;
const W_RV = 10;

const WATCH_PATHS = compilePaths({
  id: W_EVENT,
  keys: {
    type: { id: W_TYPE },
    object: {
      keys: {
        kind: { id: W_KIND },
        apiVersion: { id: W_API_VERSION },
        metadata: { keys: { name: { id: W_NAME }, namespace: { id: W_NAMESPACE }, uid: { id: W_UID }, resourceVersion: { id: W_RV } } },
      },
    },
  },
});

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
  #scanner: JsonScanner;
  #base = 0;
  #dead = false;

  constructor(sink: TapSink, multi: boolean, paths: typeof LIST_PATHS) {
    this.sink = sink;
    this.#scanner = new JsonScanner(paths, this, { maxDepth: DEFAULT_MAX_DEPTH, maxTokenBytes: MAX_TOKEN_BYTES, multi });
  }

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
  abstract string(id: number, buf: Buffer, start: number, end: number, escaped: boolean, after: number): void;
  comma(): void {}
  lineEnd(): void {}
}

class JsonListTap extends JsonTap {
  #kind: string | undefined;
  #apiVersion: string | undefined;

  constructor(sink: TapSink) {
    super(sink, false, LIST_PATHS);
  }

  enter(id: number, _pos: number, kind: ValueKind): void {
    if (id === L_ITEM) this.id.reset();
    else if (id === L_ROWS && kind !== KIND_NULL) this.giveUp("a Table list: its rows are not cached objects");
  }

  leave(id: number): void {
    if (this.dead) return;
    if (id === L_ITEM) {
      const { name, namespace, uid } = this.id;
      if (name !== undefined) this.sink.upsert({ name, namespace, uid });
    } else if (id === L_ROOT && this.#kind !== undefined && this.#apiVersion !== undefined) {
      this.sink.typeMeta(this.#apiVersion, itemKind(this.#kind));
    }
  }

  string(id: number, buf: Buffer, start: number, end: number, escaped: boolean): void {
    if (this.dead) return;
    const v = (): string => decodeJsonString(buf, start, end, escaped);
    switch (id) {
      case L_KIND:
        this.#kind = v();
        return;
      case L_API_VERSION:
        this.#apiVersion = v();
        return;
      case L_RV:
        this.sink.resourceVersion(v());
        return;
      case L_CONTINUE: {
        const token = v();
        if (token !== "") this.sink.continueToken(token);
        return;
      }
      case L_NAME:
        this.id.name = v();
        return;
      case L_NAMESPACE:
        this.id.namespace = v();
        return;
      case L_UID:
        this.id.uid = v();
        return;
      default:
        return;
    }
  }
}

class JsonWatchTap extends JsonTap {
  #type: string | undefined;
  #kind: string | undefined;
  #apiVersion: string | undefined;
  #rv: string | undefined;

  constructor(sink: TapSink) {
    super(sink, true, WATCH_PATHS);
  }

  enter(id: number, _pos: number, kind: ValueKind): void {
    if (id !== W_EVENT) return;
    this.id.reset();
    this.#type = this.#kind = this.#apiVersion = this.#rv = undefined;
    if (kind !== KIND_OBJECT) this.giveUp("a watch event that is not an object");
  }

  leave(id: number): void {
    if (id !== W_EVENT || this.dead) return;
    const type = this.#type;
    if (type === "ERROR") return;
    if (type === "ADDED" || type === "MODIFIED" || type === "DELETED") {
      const { name, namespace, uid } = this.id;
      if (name === undefined) return this.giveUp(`a ${type} event without metadata.name`);
      if (type === "DELETED") this.sink.remove(namespace, name);
      else this.sink.upsert({ name, namespace, uid });
      if (this.#kind !== undefined && this.#apiVersion !== undefined && this.#kind !== "Table") this.sink.typeMeta(this.#apiVersion, this.#kind);
      else if (this.#kind === "Table") return this.giveUp("a Table watch: its rows are not cached objects");
    }
    if (this.#rv !== undefined) this.sink.resourceVersion(this.#rv);
  }

  string(id: number, buf: Buffer, start: number, end: number, escaped: boolean): void {
    if (this.dead) return;
    const v = (): string => decodeJsonString(buf, start, end, escaped);
    switch (id) {
      case W_TYPE:
        this.#type = v();
        return;
      case W_KIND:
        this.#kind = v();
        return;
      case W_API_VERSION:
        this.#apiVersion = v();
        return;
      case W_NAME:
        this.id.name = v();
        return;
      case W_NAMESPACE:
        this.id.namespace = v();
        return;
      case W_UID:
        this.id.uid = v();
        return;
      case W_RV:
        this.#rv = v();
        return;
      default:
        return;
    }
  }
}

/** A tap over one JSON list body as delivered. */
export function createJsonListTap(sink: TapSink): Tap {
  return new JsonListTap(sink);
}

/** A tap over one JSON watch stream as delivered (events in order, synthetic ones included). */
export function createJsonWatchTap(sink: TapSink): Tap {
  return new JsonWatchTap(sink);
}
