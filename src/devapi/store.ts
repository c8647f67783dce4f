/**
 * The in-memory object store behind devapi: objects per resource, one global
 * monotonically increasing resourceVersion, a bounded per-resource event
 * history (for watch resumption and for reading the state at an older
 * resourceVersion), and synchronous change listeners.
 *
 * No I/O and no timers. The clock and uid source are injected. Everything
 * here is synchronous, so a caller that reads history and then subscribes
 * cannot miss an event in between.
 */
import { randomInt, randomUUID } from "node:crypto";
import { fnv1a64Into } from "../shard/hash.ts";
import { canonicalTyped, canonicalUnstructured, goJson, orderedMeta } from "./json.ts";
import { isRecord } from "../is-record.ts";
import { applyJsonPatch, applyMergePatch, type PatchType } from "./patch.ts";
import { parseLabelSelector, matchLabels } from "./selectors.ts";
import { alreadyExists, badRequest, conflict, expired, invalid, notFound, pathNotFound, type Qualified } from "./status.ts";
import { CUSTOM_RESOURCE_COLUMNS, DEFAULT_COLUMNS } from "./table.ts";
import { groupVersion, type GroupVersionResource, type KubeObject, type ObjectMeta, type ResourceDef, type ResourceRef, type TableColumn } from "./types.ts";

/** A registered resource with its defaults filled in. */
export interface ResolvedDef extends ResourceDef {
  readonly listKind: string;
  readonly singular: string;
  readonly encoding: "typed" | "unstructured";
  readonly apiVersion: string;
  readonly generation: boolean;
  readonly columns: readonly TableColumn[];
}

export function resolveDef(def: ResourceDef): ResolvedDef {
  const encoding = def.encoding ?? "typed";
  return {
    ...def,
    listKind: def.listKind ?? `${def.kind}List`,
    singular: def.singular ?? def.kind.toLowerCase(),
    encoding,
    apiVersion: groupVersion(def),
    generation: def.generation ?? encoding === "unstructured",
    columns: def.columns ?? (encoding === "unstructured" ? CUSTOM_RESOURCE_COLUMNS : DEFAULT_COLUMNS),
  };
}

const OPEN_BRACE = Buffer.from("{");
function hashParts(value: string): readonly [number, number] {
  const b = Buffer.from(value, "utf8");
  const out = new Uint32Array(2);
  fnv1a64Into(b, 0, b.length, out);
  return [out[0] as number, out[1] as number];
}

/**
 * One version of one object, immutable, with its serialisations computed
 * once: every list page and watch event that carries this version reuses the
 * same bytes (that is what keeps 20,000-pod lists cheap).
 */
export class StoredObject {
  readonly key: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly rv: number;
  /** Canonical form, with kind and apiVersion. Never mutate. */
  readonly object: KubeObject;
  readonly labels: Readonly<Record<string, string>>;
  /** FNV-1a 64 of the uid / namespace as [high 32 bits, low 32 bits]. */
  readonly uidHash: readonly [number, number];
  readonly nsHash: readonly [number, number];
  /** Bytes of the whole object (GET, watch events, etcd-path list items). */
  readonly full: Buffer;
  /**
   * The object as a typed list item (no kind/apiVersion) is `{` followed by
   * `full` from this offset: a view, so each version is held in memory once.
   */
  readonly itemOffset: number;
  private metaBytes: Buffer | undefined;

  constructor(def: ResolvedDef, object: KubeObject) {
    const meta = object.metadata ?? {};
    this.namespace = meta.namespace ?? "";
    this.name = meta.name ?? "";
    this.key = keyOf(this.namespace, this.name);
    this.uid = meta.uid ?? "";
    this.rv = Number(meta.resourceVersion ?? "0");
    this.object = object;
    this.labels = meta.labels ?? {};
    this.uidHash = hashParts(this.uid);
    this.nsHash = hashParts(this.namespace);
    if (def.encoding === "unstructured") {
      this.full = Buffer.from(goJson(object));
      this.itemOffset = 1;
    } else {
      // Typed list items carry no kind/apiVersion; the full form is the item
      // with the two fields spliced in front, so it is never re-encoded.
      const rest: Record<string, unknown> = { ...object };
      delete rest.kind;
      delete rest.apiVersion;
      const prefix = `{"kind":${JSON.stringify(def.kind)},"apiVersion":${JSON.stringify(def.apiVersion)},`;
      this.full = Buffer.from(prefix + goJson(rest).slice(1));
      this.itemOffset = Buffer.byteLength(prefix);
    }
  }

  /** The list-item bytes as two parts to write in order (no copy). */
  itemParts(): [Buffer, Buffer] {
    return [OPEN_BRACE, this.full.subarray(this.itemOffset)];
  }

  /** `metadata` as PartialObjectMetadata carries it (ObjectMeta field order), computed on first use. */
  get metaJson(): Buffer {
    this.metaBytes ??= Buffer.from(goJson(orderedMeta(this.object.metadata ?? {})));
    return this.metaBytes;
  }
}

export type StoreEventType = "ADDED" | "MODIFIED" | "DELETED";

export interface StoreEvent {
  readonly type: StoreEventType;
  readonly rv: number;
  /** The new version; for DELETED, the last version stamped with the deletion's resourceVersion. */
  readonly object: StoredObject;
  /** The version before this event; null for ADDED. */
  readonly prev: StoredObject | null;
}

export type StoreListener = (event: StoreEvent) => void;

function keyOf(namespace: string, name: string): string {
  return namespace === "" ? name : `${namespace}/${name}`;
}

/** First index in sorted `keys` whose key is >= `k`. */
function lowerBound(keys: readonly string[], k: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((keys[mid] as string) < k) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The live state and history of one resource. */
export class ResourceState {
  def: ResolvedDef;
  readonly objects = new Map<string, StoredObject>();
  /** Keys in etcd order (byte order of `namespace/name`); read through {@link sortedKeys}. */
  private keys: string[] = [];
  /** New keys are appended and the array sorted on the next read: seeding N objects stays O(N log N), not O(N^2). */
  private unsorted = false;
  readonly listeners = new Set<StoreListener>();
  private history: StoreEvent[] = [];
  private head = 0;
  /** Highest resourceVersion of an evicted event; states and watches older than it are gone (410). */
  compactedRv = 0;

  constructor(def: ResolvedDef) {
    this.def = def;
  }

  get qualified(): Qualified {
    return { group: this.def.group, resource: this.def.resource };
  }

  /** `obj` as it would read at resourceVersion `rv` (for a DELETED sent to a watcher it left). */
  restamp(obj: StoredObject, rv: number): StoredObject {
    const meta = { ...(obj.object.metadata ?? {}), resourceVersion: String(rv) };
    return new StoredObject(this.def, { ...obj.object, metadata: this.def.encoding === "unstructured" ? meta : orderedMeta(meta) });
  }

  /** Every key, in etcd order. */
  sortedKeys(): readonly string[] {
    if (this.unsorted) {
      // Plain code-unit order is byte order here: names and namespaces are ASCII.
      this.keys.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      this.unsorted = false;
    }
    return this.keys;
  }

  put(obj: StoredObject): void {
    if (!this.objects.has(obj.key)) {
      const last = this.keys[this.keys.length - 1];
      if (last !== undefined && obj.key < last) this.unsorted = true;
      this.keys.push(obj.key);
    }
    this.objects.set(obj.key, obj);
  }

  remove(key: string): void {
    if (!this.objects.delete(key)) return;
    const keys = this.sortedKeys() as string[];
    const i = lowerBound(keys, key);
    if (keys[i] === key) keys.splice(i, 1);
  }

  record(event: StoreEvent, limit: number): void {
    this.history.push(event);
    while (this.history.length - this.head > limit) {
      this.compactedRv = (this.history[this.head] as StoreEvent).rv;
      this.head++;
    }
    // Drop the evicted prefix in one splice once it is as long as the window,
    // so eviction stays O(1) amortised.
    if (this.head > 0 && this.head >= limit) {
      this.history = this.history.slice(this.head);
      this.head = 0;
    }
  }

  /** Forgets every event up to `rv`, as an etcd compaction at that revision does. */
  compact(rv: number): void {
    if (rv <= this.compactedRv) return;
    this.compactedRv = rv;
    this.history = this.history.slice(this.head).filter((e) => e.rv > rv);
    this.head = 0;
  }

  /** Events with resourceVersion > `rv`, oldest first. Throws 410 when some were evicted. */
  eventsSince(rv: number): StoreEvent[] {
    if (rv < this.compactedRv) throw expired(`too old resource version: ${rv} (${this.compactedRv})`);
    const out: StoreEvent[] = [];
    for (let i = this.history.length - 1; i >= this.head; i--) {
      const e = this.history[i] as StoreEvent;
      if (e.rv <= rv) break;
      out.push(e);
    }
    return out.reverse();
  }

  /**
   * The objects that existed at resourceVersion `rv` (undefined = now), in key
   * order, restricted to `namespace` when given and to keys after `after`.
   * Throws 410 when the history no longer reaches back to `rv`.
   */
  itemsAt(rv: number | undefined, namespace: string | undefined, after: string | undefined): StoredObject[] {
    const lo = namespace === undefined ? "" : `${namespace}/`;
    // '0' is the character after '/', so this is the end of the namespace's key range.
    const hi = namespace === undefined ? undefined : `${namespace}0`;
    const from = after !== undefined && after >= lo ? after : undefined;
    const inScope = (k: string): boolean => k >= lo && (hi === undefined || k < hi) && (from === undefined || k > from);
    const keys = this.sortedKeys();
    const liveStart = lowerBound(keys, from ?? lo);
    const liveEnd = hi === undefined ? keys.length : lowerBound(keys, hi);

    const changes = new Map<string, StoredObject | null>();
    if (rv !== undefined) {
      // Walk back from the newest event; the last write per key wins, which
      // is the oldest event's `prev`, i.e. the version current at `rv`.
      for (const e of this.eventsSince(rv).reverse()) changes.set(e.object.key, e.prev);
    }
    const out: StoredObject[] = [];
    if (changes.size === 0) {
      for (let i = liveStart; i < liveEnd; i++) {
        const k = keys[i] as string;
        if (from !== undefined && k <= from) continue;
        out.push(this.objects.get(k) as StoredObject);
      }
      return out;
    }
    const extra = [...changes.keys()].filter((k) => !this.objects.has(k) && inScope(k)).sort();
    let i = liveStart;
    let j = 0;
    while (i < liveEnd || j < extra.length) {
      const a = i < liveEnd ? (keys[i] as string) : undefined;
      const b = j < extra.length ? (extra[j] as string) : undefined;
      let k: string;
      if (b === undefined || (a !== undefined && a < b)) {
        k = a as string;
        i++;
      } else {
        k = b;
        j++;
      }
      if (from !== undefined && k <= from) continue;
      const v = changes.has(k) ? changes.get(k) : this.objects.get(k);
      if (v) out.push(v);
    }
    return out;
  }
}

/** A watch event as the programmatic API hands it out. */
export interface DevWatchEvent {
  type: StoreEventType;
  object: KubeObject;
}

/**
 * The programmatic face of the store: seed, churn and inspect objects without
 * HTTP. Every write goes through the same path as an HTTP write, so open
 * watches see it. All methods are synchronous; none may be called with a
 * resource that was never registered (they throw a 404 {@link DevApiStatusError}).
 */
export interface DevStore {
  /** The current global resourceVersion. */
  readonly resourceVersion: string;
  /**
   * Creates an object. Unlike an HTTP POST, keeps `metadata.uid` and
   * `metadata.creationTimestamp` when they are set (for seeding recorded
   * objects); assigns them otherwise. Throws 409 if the name is taken.
   */
  create(resource: ResourceRef, obj: KubeObject): KubeObject;
  /** Replaces an object (PUT semantics: 409 on a stale `metadata.resourceVersion`, 404 if absent). */
  update(resource: ResourceRef, obj: KubeObject, opts?: { subresource?: "status" }): KubeObject;
  /** Patches an object (merge patch by default). Throws 404 if absent. */
  patch(resource: ResourceRef, namespace: string | undefined, name: string, patch: unknown, type?: PatchType): KubeObject;
  /** Deletes an object; returns its last version, or undefined if it did not exist. */
  delete(resource: ResourceRef, namespace: string | undefined, name: string): KubeObject | undefined;
  /** A copy of the object, or undefined. */
  get(resource: ResourceRef, namespace: string | undefined, name: string): KubeObject | undefined;
  /** Copies of the objects in key order, optionally in one namespace and matching a label selector. */
  list(resource: ResourceRef, opts?: { namespace?: string; labelSelector?: string }): KubeObject[];
  /** Number of objects of a resource (cheap; no copies). */
  count(resource: ResourceRef): number;
  /** Who every object of a resource is, and its labels, in key order (cheap: no copies; for samplers that read often). */
  identities(resource: ResourceRef): ObjectIdentity[];
  /**
   * Calls `listener` synchronously for every later write (and first for the
   * history after `resourceVersion`, when given). Returns the unsubscribe
   * function, which may be called more than once.
   */
  watch(resource: ResourceRef, listener: (event: DevWatchEvent) => void, opts?: { resourceVersion?: string }): () => void;
  /**
   * Compacts every resource's history at the current resourceVersion, as
   * `etcdctl compact` does: a watch, a LIST at an exact resourceVersion or a
   * continue token from before it gets 410 Expired, and the client must
   * relist. Returns the resourceVersion compacted at.
   */
  compact(): string;
}

/** An object's identity and labels, as {@link DevStore.identities} reads them. */
export interface ObjectIdentity {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly labels: Readonly<Record<string, string>>;
}

export interface StoreOptions {
  /** Events kept per resource for watch resumption and reads at older versions. */
  historyLimit: number;
  now?: () => number;
  newUid?: () => string;
}

const NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789";
const DNS_SUBDOMAIN_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function copy(obj: StoredObject): KubeObject {
  return JSON.parse(obj.full.toString("utf8")) as KubeObject;
}

/** Everything in an object except metadata and status, for "did the spec change" (generation). */
function specOf(obj: KubeObject): string {
  const rest: Record<string, unknown> = { ...obj };
  delete rest.metadata;
  delete rest.status;
  return JSON.stringify(rest);
}

export class MemoryStore implements DevStore {
  private readonly resources = new Map<string, ResourceState>();
  private rv = 0;
  private readonly historyLimit: number;
  private readonly now: () => number;
  private readonly newUid: () => string;

  constructor(opts: StoreOptions) {
    this.historyLimit = Math.max(1, opts.historyLimit);
    this.now = opts.now ?? Date.now;
    this.newUid = opts.newUid ?? randomUUID;
  }

  get resourceVersion(): string {
    return String(this.rv);
  }

  get currentRv(): number {
    return this.rv;
  }

  /**
   * Registers a resource, or replaces the definition of one already
   * registered: its objects, history and open watches are kept, and the
   * objects are re-encoded for the new definition.
   */
  register(def: ResourceDef): ResourceState {
    const resolved = resolveDef(def);
    const id = `${def.group}/${def.version}/${def.resource}`;
    const old = this.resources.get(id);
    if (old) {
      old.def = resolved;
      for (const [k, o] of old.objects) old.objects.set(k, new StoredObject(resolved, this.canonical(old, o.object)));
      return old;
    }
    const state = new ResourceState(resolved);
    this.resources.set(id, state);
    return state;
  }

  /** Every registered resource, in registration order. */
  all(): ResourceState[] {
    return [...this.resources.values()];
  }

  /** The state for an exact group/version/resource, or undefined. */
  find(gvr: GroupVersionResource): ResourceState | undefined {
    return this.resources.get(`${gvr.group}/${gvr.version}/${gvr.resource}`);
  }

  /**
   * Finds a registered resource: an exact group/version/resource, or a string
   * `resource.group`, or a bare plural (the core group's first, else the only
   * group that has it). Throws a 404 Status naming the reference otherwise.
   */
  resolve(ref: ResourceRef): ResourceState {
    if (typeof ref !== "string") {
      const s = this.find(ref);
      if (s) return s;
      throw pathNotFound(`${ref.resource}.${ref.group}/${ref.version}`);
    }
    const dot = ref.indexOf(".");
    const resource = dot < 0 ? ref : ref.slice(0, dot);
    const group = dot < 0 ? undefined : ref.slice(dot + 1);
    const candidates = [...this.resources.values()].filter((s) => s.def.resource === resource && (group === undefined || s.def.group === group));
    const pick = candidates.find((s) => s.def.group === "") ?? (group !== undefined || new Set(candidates.map((s) => s.def.group)).size === 1 ? candidates[0] : undefined);
    if (pick) return pick;
    throw pathNotFound(ref);
  }

  // -------------------------------------------------------------------------
  // Writes. Each one bumps the global resourceVersion exactly once per event.

  private commit(state: ResourceState, type: StoreEventType, next: KubeObject, prev: StoredObject | null): StoredObject {
    const rv = ++this.rv;
    const meta = { ...(next.metadata ?? {}), resourceVersion: String(rv) };
    const stamped = state.def.encoding === "unstructured" ? canonicalUnstructured({ ...next, metadata: meta }, state.def.apiVersion, state.def.kind) : { ...next, metadata: orderedMeta(meta) };
    const obj = new StoredObject(state.def, stamped);
    if (type === "DELETED") state.remove(obj.key);
    else state.put(obj);
    const event: StoreEvent = { type, rv, object: obj, prev };
    state.record(event, this.historyLimit);
    for (const l of [...state.listeners]) l(event);
    return obj;
  }

  private canonical(state: ResourceState, obj: KubeObject): KubeObject {
    return state.def.encoding === "unstructured"
      ? canonicalUnstructured(obj, state.def.apiVersion, state.def.kind)
      : canonicalTyped(obj, state.def.apiVersion, state.def.kind);
  }

  private checkBody(state: ResourceState, obj: unknown): asserts obj is KubeObject {
    if (!isRecord(obj)) throw badRequest("the body of the request must be a JSON object");
    const meta = obj.metadata;
    if (meta !== undefined && !isRecord(meta)) throw badRequest("metadata must be an object");
    for (const field of ["labels", "annotations"] as const) {
      const m = isRecord(meta) ? meta[field] : undefined;
      if (m === undefined || m === null) continue;
      if (!isRecord(m) || Object.values(m).some((v) => typeof v !== "string")) {
        throw badRequest(`json: cannot unmarshal into Go struct field ObjectMeta.metadata.${field} of type map[string]string`);
      }
    }
    if (typeof obj.kind === "string" && obj.kind !== state.def.kind) {
      throw badRequest(`the object provided is unrecognized (must be of type ${state.def.kind}): ${obj.kind}`);
    }
    if (typeof obj.apiVersion === "string" && obj.apiVersion !== state.def.apiVersion) {
      throw badRequest(`the API version in the data (${obj.apiVersion}) does not match the expected API version (${state.def.apiVersion})`);
    }
  }

  private checkName(state: ResourceState, name: string): void {
    const label = state.def.resource === "namespaces";
    const max = label ? 63 : 253;
    if (name.length > max || !DNS_SUBDOMAIN_RE.test(name) || (label && name.includes("."))) {
      throw invalid(state.def.group, state.def.kind, name, [
        { field: "metadata.name", message: `Invalid value: ${JSON.stringify(name)}: a lowercase RFC 1123 ${label ? "label" : "subdomain"} must consist of lower case alphanumeric characters, '-'${label ? "" : " or '.'"}, and must start and end with an alphanumeric character` },
      ]);
    }
  }

  /**
   * Creates an object. `keepIdentity` keeps a given uid and creationTimestamp
   * (programmatic seeding); HTTP creates always get fresh ones, as on a real server.
   */
  createIn(state: ResourceState, body: unknown, opts: { namespace?: string; keepIdentity: boolean }): StoredObject {
    this.checkBody(state, body);
    const src = body.metadata ?? {};
    const meta: ObjectMeta = { ...src };
    const ns = state.def.namespaced ? (opts.namespace ?? src.namespace ?? "") : "";
    if (state.def.namespaced) {
      if (ns === "") throw badRequest("the namespace of the object must be set for a namespaced resource");
      if (opts.namespace !== undefined && src.namespace !== undefined && src.namespace !== "" && src.namespace !== opts.namespace) {
        throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
      }
      meta.namespace = ns;
    } else {
      delete meta.namespace;
    }
    let name = src.name ?? "";
    if (name === "") {
      const gen = src.generateName ?? "";
      if (gen === "") throw invalid(state.def.group, state.def.kind, "", [{ field: "metadata.name", message: "Required value: name or generateName is required" }]);
      for (let attempt = 0; ; attempt++) {
        name = gen + Array.from({ length: 5 }, () => NAME_CHARS[randomInt(NAME_CHARS.length)]).join("");
        if (!state.objects.has(keyOf(ns, name)) || attempt >= 8) break;
      }
    }
    this.checkName(state, name);
    if (state.objects.has(keyOf(ns, name))) throw alreadyExists(state.qualified, name);
    meta.name = name;
    meta.uid = opts.keepIdentity && typeof src.uid === "string" && src.uid !== "" ? src.uid : this.newUid();
    meta.creationTimestamp = opts.keepIdentity && typeof src.creationTimestamp === "string" ? src.creationTimestamp : rfc3339(this.now());
    delete meta.resourceVersion;
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    if (state.def.generation) meta.generation = 1;
    else delete meta.generation;
    return this.commit(state, "ADDED", this.canonical(state, { ...body, metadata: meta }), null);
  }

  /**
   * Replaces an object (PUT). A set `metadata.resourceVersion` must equal the
   * current one (409 otherwise: optimistic concurrency). With a status
   * subresource, the main resource keeps the old status and `/status` keeps
   * everything but the status.
   */
  replaceIn(state: ResourceState, body: unknown, opts: { namespace?: string; name?: string; subresource?: "status" }): StoredObject {
    this.checkBody(state, body);
    const src = body.metadata ?? {};
    const ns = state.def.namespaced ? (opts.namespace ?? src.namespace ?? "") : "";
    const name = opts.name ?? src.name ?? "";
    if (opts.name !== undefined && src.name !== undefined && src.name !== opts.name) {
      throw badRequest(`the name of the object (${src.name}) does not match the name on the URL (${opts.name})`);
    }
    if (state.def.namespaced && opts.namespace !== undefined && src.namespace !== undefined && src.namespace !== "" && src.namespace !== opts.namespace) {
      throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
    }
    const old = state.objects.get(keyOf(ns, name));
    if (!old) throw notFound(state.qualified, name);
    if (src.resourceVersion !== undefined && src.resourceVersion !== "" && src.resourceVersion !== String(old.rv)) {
      throw conflict(state.qualified, name);
    }
    if (src.uid !== undefined && src.uid !== "" && src.uid !== old.uid) {
      throw conflict(state.qualified, name, `Precondition failed: UID in precondition: ${String(src.uid)}, UID in object meta: ${old.uid}`);
    }
    const oldMeta = old.object.metadata ?? {};
    let next: KubeObject;
    if (opts.subresource === "status") {
      next = { ...old.object };
      if (body.status === undefined) delete next.status;
      else next.status = body.status;
    } else {
      next = { ...body };
      if (state.def.statusSubresource) {
        if (old.object.status === undefined) delete next.status;
        else next.status = old.object.status;
      }
      next.metadata = { ...src };
    }
    const meta: ObjectMeta = { ...(next.metadata ?? {}) };
    // Server-owned fields survive any update.
    meta.name = name;
    if (state.def.namespaced) meta.namespace = ns;
    else delete meta.namespace;
    meta.uid = old.uid;
    meta.creationTimestamp = oldMeta.creationTimestamp;
    meta.deletionTimestamp = oldMeta.deletionTimestamp;
    meta.deletionGracePeriodSeconds = oldMeta.deletionGracePeriodSeconds;
    meta.generation = oldMeta.generation;
    meta.resourceVersion = String(old.rv);
    if (state.def.generation && specOf(next) !== specOf(old.object)) meta.generation = (oldMeta.generation ?? 0) + 1;
    next = this.canonical(state, { ...next, metadata: meta });

    if (oldMeta.deletionTimestamp !== undefined && (meta.finalizers ?? []).length === 0) {
      // The last finalizer is gone from an object being deleted: it goes now.
      return this.commit(state, "DELETED", next, old);
    }
    const unchanged = new StoredObject(state.def, next);
    // A no-op write does not bump the resourceVersion, as on a real server.
    if (unchanged.full.equals(old.full)) return old;
    return this.commit(state, "MODIFIED", next, old);
  }

  patchIn(state: ResourceState, namespace: string | undefined, name: string, patch: unknown, type: PatchType, subresource?: "status"): StoredObject {
    const { patched } = this.previewPatch(state, namespace, name, patch, type);
    return this.replaceIn(state, patched, { namespace: state.def.namespaced ? (namespace ?? "") : "", name, ...(subresource ? { subresource } : {}) });
  }

  /**
   * The current object and what `patch` makes of it, without storing
   * anything (admission runs in between). The patched object keeps the
   * current resourceVersion unless the patch set one, which then acts as a
   * precondition (409 when stale).
   */
  previewPatch(state: ResourceState, namespace: string | undefined, name: string, patch: unknown, type: PatchType): { old: StoredObject; patched: KubeObject } {
    const ns = state.def.namespaced ? (namespace ?? "") : "";
    const old = state.objects.get(keyOf(ns, name));
    if (!old) throw notFound(state.qualified, name);
    const current = copy(old);
    const patched = type === "json" ? applyJsonPatch(current, patch) : applyMergePatch(current, patch);
    if (!isRecord(patched)) throw badRequest("the patch must produce a JSON object");
    return { old, patched };
  }

  /**
   * Deletes an object. With finalizers it only gains a deletionTimestamp
   * (MODIFIED); with `twoPhaseDelete` it gets MODIFIED then DELETED; otherwise
   * DELETED. Returns the last version written.
   */
  deleteIn(state: ResourceState, namespace: string | undefined, name: string, pre: { uid?: string; resourceVersion?: string } = {}): StoredObject {
    const ns = state.def.namespaced ? (namespace ?? "") : "";
    const old = state.objects.get(keyOf(ns, name));
    if (!old) throw notFound(state.qualified, name);
    if (pre.uid !== undefined && pre.uid !== old.uid) {
      throw conflict(state.qualified, name, `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${old.uid}`);
    }
    if (pre.resourceVersion !== undefined && pre.resourceVersion !== String(old.rv)) {
      throw conflict(state.qualified, name, `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${old.rv}`);
    }
    const meta = old.object.metadata ?? {};
    const marking = meta.deletionTimestamp === undefined && ((meta.finalizers ?? []).length > 0 || state.def.twoPhaseDelete === true);
    let current = old;
    if (marking) {
      const m: ObjectMeta = { ...meta, deletionTimestamp: rfc3339(this.now()), deletionGracePeriodSeconds: 0 };
      if (state.def.generation || meta.generation !== undefined) m.generation = (meta.generation ?? 0) + 1;
      current = this.commit(state, "MODIFIED", { ...old.object, metadata: m }, old);
      if ((meta.finalizers ?? []).length > 0) return current;
    } else if ((meta.finalizers ?? []).length > 0) {
      return old; // already being deleted; waits for its finalizers
    }
    return this.commit(state, "DELETED", current.object, current);
  }

  // -------------------------------------------------------------------------
  // DevStore

  create(resource: ResourceRef, obj: KubeObject): KubeObject {
    return copy(this.createIn(this.resolve(resource), obj, { keepIdentity: true }));
  }

  update(resource: ResourceRef, obj: KubeObject, opts: { subresource?: "status" } = {}): KubeObject {
    const state = this.resolve(resource);
    const o: { subresource?: "status"; namespace?: string } = { ...opts };
    if (obj.metadata?.namespace !== undefined) o.namespace = obj.metadata.namespace;
    return copy(this.replaceIn(state, obj, o));
  }

  patch(resource: ResourceRef, namespace: string | undefined, name: string, patch: unknown, type: PatchType = "merge"): KubeObject {
    return copy(this.patchIn(this.resolve(resource), namespace, name, patch, type));
  }

  delete(resource: ResourceRef, namespace: string | undefined, name: string): KubeObject | undefined {
    const state = this.resolve(resource);
    if (!state.objects.has(keyOf(state.def.namespaced ? (namespace ?? "") : "", name))) return undefined;
    return copy(this.deleteIn(state, namespace, name));
  }

  get(resource: ResourceRef, namespace: string | undefined, name: string): KubeObject | undefined {
    const state = this.resolve(resource);
    const o = state.objects.get(keyOf(state.def.namespaced ? (namespace ?? "") : "", name));
    return o ? copy(o) : undefined;
  }

  list(resource: ResourceRef, opts: { namespace?: string; labelSelector?: string } = {}): KubeObject[] {
    const state = this.resolve(resource);
    const sel = opts.labelSelector === undefined ? [] : parseLabelSelector(opts.labelSelector);
    return state
      .itemsAt(undefined, state.def.namespaced ? opts.namespace : undefined, undefined)
      .filter((o) => matchLabels(sel, o.labels))
      .map(copy);
  }

  count(resource: ResourceRef): number {
    return this.resolve(resource).objects.size;
  }

  identities(resource: ResourceRef): ObjectIdentity[] {
    return this.resolve(resource)
      .itemsAt(undefined, undefined, undefined)
      .map((o) => ({ namespace: o.namespace, name: o.name, uid: o.uid, labels: o.labels }));
  }

  compact(): string {
    for (const state of this.resources.values()) state.compact(this.rv);
    return String(this.rv);
  }

  watch(resource: ResourceRef, listener: (event: DevWatchEvent) => void, opts: { resourceVersion?: string } = {}): () => void {
    const state = this.resolve(resource);
    const deliver: StoreListener = (e) => listener({ type: e.type, object: copy(e.object) });
    if (opts.resourceVersion !== undefined && opts.resourceVersion !== "" && opts.resourceVersion !== "0") {
      for (const e of state.eventsSince(Number(opts.resourceVersion))) deliver(e);
    }
    state.listeners.add(deliver);
    return () => {
      state.listeners.delete(deliver);
    };
  }
}

export { keyOf };
