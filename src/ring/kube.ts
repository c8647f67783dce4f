/**
 * The ring's only door to the API server: typed Lease and ShardRing calls
 * over shardcar's own small client (`src/kube/client.ts`, not client-node:
 * the sidecar's idle memory, P6), error classification, and a list+watch
 * loop that hands its caller a full snapshot after every change.
 *
 * Objects are plain JSON as the API sends them: times stay RFC 3339 text
 * (read with {@link timeOf}, written with {@link microTime}).
 *
 * Only the shells (`coordinator.ts`, `election.ts`, `ring-controller.ts`,
 * `member.ts`, `labeller.ts`) use this file; the decision files never see
 * the API.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { ConfigError, ShardcarError } from "../errors.ts";
import { ApiClient, ApiError, kubeConfigConnection, TimeoutError, type Query, type WatchHandle } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import type { Clock } from "./clock.ts";
import { APPLIED_ANNOTATION, FENCED_PREFIX, LEAVING_ANNOTATION, MEMBER_ANNOTATION, RING_GROUP, RING_KIND, RING_LABEL, RING_PLURAL, RING_VERSION } from "./names.ts";
import type { LeaseView } from "./times.ts";
import { isRecord } from "../is-record.ts";

/**
 * How the coordinator and a member reach the API: the process's own client
 * (src/kube/client.ts; the manager's, or the sidecar's and never the
 * controller's), or a client-node KubeConfig for callers that already hold
 * one (tests, the demo).
 */
export interface RingApiAccess {
  /** Give this or {@link kubeConfig}. */
  readonly client?: ApiClient | undefined;
  /** Used when {@link client} is not given. */
  readonly kubeConfig?: KubeConfig | undefined;
}

/**
 * The client `access` names. One made from a kubeconfig runs its calls'
 * deadlines on `clock`, the clock the renew deadlines run on. Throws a
 * {@link ConfigError} for `setting` when `access` names neither.
 */
export function ringApiClient(access: RingApiAccess, clock: Clock, setting: string, who: string): ApiClient {
  if (access.client !== undefined) return access.client;
  if (access.kubeConfig !== undefined) return new ApiClient(kubeConfigConnection(access.kubeConfig), (ms, fn) => clock.timer(ms, fn));
  throw new ConfigError(setting, `${who} needs an API client or a kubeconfig`);
}

/** The HTTP status of a failed API call or watch, if it has one. */
export function httpStatus(e: unknown): number | undefined {
  return e instanceof ApiError ? e.statusCode : undefined;
}
export const isConflict = (e: unknown): boolean => httpStatus(e) === 409;
export const isNotFound = (e: unknown): boolean => httpStatus(e) === 404;

/** A short description of an API failure for logs and conditions (the server's Status message, never a raw body: it may echo a token). */
export function describe(e: unknown): string {
  const code = httpStatus(e);
  const msg = e instanceof Error ? e.message.split("\n")[0] ?? "" : String(e);
  return code === undefined ? msg : `HTTP ${code}: ${msg.slice(0, 200)}`;
}

export interface ObjectMetaLike {
  name?: string;
  namespace?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  uid?: string;
}

/** The Lease fields the ring reads and writes; other fields pass through untouched. */
export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  /** RFC 3339 with microseconds, from {@link microTime}. */
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

/** A `coordination.k8s.io/v1` Lease as the API returns it. */
export interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMetaLike;
  spec?: LeaseSpec;
}

/** A ShardRing as the API returns it; spec and status are validated by `table.ts`. */
export interface RingObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMetaLike;
  spec?: unknown;
  status?: unknown;
}

function asRing(v: unknown): RingObject {
  return isRecord(v) ? v : {};
}

/** ms since the epoch of a Lease time, whichever shape the client handed us (Date or RFC 3339 text). */
export function timeOf(v: unknown): number | undefined {
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? undefined : v.getTime();
  if (typeof v === "string") {
    const t = Date.parse(v);
    return Number.isNaN(t) ? undefined : t;
  }
  return undefined;
}

/** A Lease time (`metav1.MicroTime`): RFC 3339 with exactly six fractional digits, as the API server writes it. */
export function microTime(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, -1)}000Z`;
}

function asLease(v: unknown): Lease {
  return isRecord(v) ? v : {};
}

/**
 * The parts of a member Lease the leader decides on. `renewedAt` is whatever
 * the caller passes: the leader's own observation time of the last change.
 */
export function leaseView(lease: Lease, renewedAt: number | undefined): LeaseView {
  const d = lease.spec?.leaseDurationSeconds;
  return {
    holder: lease.spec?.holderIdentity,
    renewedAt,
    durationMs: typeof d === "number" ? d * 1000 : undefined,
    leaving: lease.metadata?.annotations?.[LEAVING_ANNOTATION] === "true",
  };
}

/** The member's reported applied generation; 0 for absent or unreadable values. */
export function appliedOf(lease: Lease): number {
  const v = lease.metadata?.annotations?.[APPLIED_ANNOTATION];
  const n = v === undefined ? 0 : Number(v);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/** The ring and member a Lease belongs to, or undefined for a Lease that is not a member Lease. */
export function memberOf(lease: Lease): { ring: string; member: string } | undefined {
  const ring = lease.metadata?.labels?.[RING_LABEL];
  const name = lease.metadata?.name;
  if (ring === undefined || ring === "" || name === undefined) return undefined;
  const prefix = `shardcar-${ring}-`;
  const member = lease.metadata?.annotations?.[MEMBER_ANNOTATION] ?? (name.startsWith(prefix) ? name.slice(prefix.length) : undefined);
  return member === undefined || member === "" ? undefined : { ring, member };
}

/** What changes when a holder renews: compared to tell a renewal from other edits (e.g. annotations). */
export function renewalRecord(lease: Lease): string {
  return `${lease.spec?.holderIdentity ?? ""}|${String(timeOf(lease.spec?.renewTime) ?? "")}|${lease.spec?.leaseTransitions ?? 0}`;
}

export function isFencedHolder(holder: string | undefined): boolean {
  return holder !== undefined && holder.startsWith(FENCED_PREFIX);
}

// Reads and writes of ShardRings and Events: generous, they are not on a
// deadline, but they must not hang a ring's reconcile loop forever.
const RING_CALL_TIMEOUT_MS = 30_000;

const enc = encodeURIComponent;
const LEASES = "/apis/coordination.k8s.io/v1";

/**
 * Lease calls; a 404 on read is `undefined`, every other failure throws (409
 * included, for the caller to retry). Every call is aborted after
 * `timeoutMs`: a Lease call that outlives its renew deadline is useless.
 */
export class LeaseApi {
  readonly #api: ApiClient;
  readonly #timeoutMs: number;
  constructor(api: ApiClient, timeoutMs: number) {
    this.#api = api;
    this.#timeoutMs = timeoutMs;
  }
  #one(namespace: string, name: string): string {
    return `${LeaseApi.path(namespace)}/${enc(name)}`;
  }
  async get(namespace: string, name: string): Promise<Lease | undefined> {
    try {
      return asLease(await this.#api.request("GET", this.#one(namespace, name), { timeoutMs: this.#timeoutMs }));
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }
  async create(namespace: string, body: Lease): Promise<Lease> {
    return asLease(await this.#api.request("POST", LeaseApi.path(namespace), { body, timeoutMs: this.#timeoutMs }));
  }
  /** PUT with the body's `metadata.resourceVersion`: 409 when someone else wrote first. */
  async replace(namespace: string, body: Lease): Promise<Lease> {
    return asLease(await this.#api.request("PUT", this.#one(namespace, body.metadata?.name ?? ""), { body, timeoutMs: this.#timeoutMs }));
  }
  async delete(namespace: string, name: string): Promise<void> {
    try {
      await this.#api.request("DELETE", this.#one(namespace, name), { timeoutMs: this.#timeoutMs });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }
  async list(namespace: string | undefined, labelSelector: string): Promise<{ items: Lease[]; resourceVersion: string }> {
    return listOf(await this.#api.request("GET", LeaseApi.path(namespace), { query: { labelSelector }, timeoutMs: this.#timeoutMs }), asLease);
  }
  static path(namespace: string | undefined): string {
    return namespace === undefined ? `${LEASES}/leases` : `${LEASES}/namespaces/${enc(namespace)}/leases`;
  }
}

function listOf<T>(raw: unknown, as: (v: unknown) => T): { items: T[]; resourceVersion: string } {
  const list = isRecord(raw) ? raw : {};
  const items = Array.isArray(list["items"]) ? (list["items"] as unknown[]).map(as) : [];
  const meta = isRecord(list["metadata"]) ? list["metadata"] : {};
  return { items, resourceVersion: typeof meta["resourceVersion"] === "string" ? meta["resourceVersion"] : "" };
}

/** ShardRing calls. */
export class RingApi {
  readonly #api: ApiClient;
  constructor(api: ApiClient) {
    this.#api = api;
  }
  #one(namespace: string, name: string): string {
    return `${RingApi.path(namespace)}/${enc(name)}`;
  }
  async get(namespace: string, name: string): Promise<RingObject | undefined> {
    try {
      return asRing(await this.#api.request("GET", this.#one(namespace, name), { timeoutMs: RING_CALL_TIMEOUT_MS }));
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }
  async create(namespace: string, name: string, spec: Record<string, unknown>): Promise<RingObject> {
    const body = { apiVersion: `${RING_GROUP}/${RING_VERSION}`, kind: RING_KIND, metadata: { name, namespace }, spec };
    return asRing(await this.#api.request("POST", RingApi.path(namespace), { body, timeoutMs: RING_CALL_TIMEOUT_MS }));
  }
  /** PUT to `/status` with the body's resourceVersion: 409 when the object changed since it was read. */
  async replaceStatus(namespace: string, name: string, body: RingObject): Promise<RingObject> {
    return asRing(await this.#api.request("PUT", `${this.#one(namespace, name)}/status`, { body, timeoutMs: RING_CALL_TIMEOUT_MS }));
  }
  async list(namespace: string | undefined, fieldSelector?: string): Promise<{ items: RingObject[]; resourceVersion: string }> {
    return listOf(await this.#api.request("GET", RingApi.path(namespace), { query: { fieldSelector }, timeoutMs: RING_CALL_TIMEOUT_MS }), asRing);
  }
  static path(namespace: string | undefined): string {
    return namespace === undefined ? `/apis/${RING_GROUP}/${RING_VERSION}/${RING_PLURAL}` : `/apis/${RING_GROUP}/${RING_VERSION}/namespaces/${enc(namespace)}/${RING_PLURAL}`;
  }
}

/** Warning Events about a ShardRing. Best effort: Events are for people, and a cluster may refuse them. */
export class EventSink {
  readonly #api: ApiClient;
  readonly #component: string;
  readonly #log: Logger;
  constructor(api: ApiClient, component: string, log: Logger) {
    this.#api = api;
    this.#component = component;
    this.#log = log;
  }
  async warn(ring: RingObject, reason: string, message: string, now: number): Promise<void> {
    const namespace = ring.metadata?.namespace ?? "default";
    const name = ring.metadata?.name ?? "";
    const at = new Date(now).toISOString();
    try {
      await this.#api.request("POST", `/api/v1/namespaces/${enc(namespace)}/events`, {
        body: {
          apiVersion: "v1",
          kind: "Event",
          metadata: { generateName: `${name}.`, namespace },
          involvedObject: { apiVersion: `${RING_GROUP}/${RING_VERSION}`, kind: RING_KIND, name, namespace, ...(ring.metadata?.uid === undefined ? {} : { uid: ring.metadata.uid }) },
          reason,
          message,
          type: "Warning",
          source: { component: this.#component },
          firstTimestamp: at,
          lastTimestamp: at,
          count: 1,
        },
        timeoutMs: RING_CALL_TIMEOUT_MS,
      });
    } catch (e) {
      this.#log.debug({ ring: `${namespace}/${name}`, reason, err: describe(e) }, "could not record event");
    }
  }
}

function keyOf(o: { metadata?: ObjectMetaLike }): string {
  return `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;
}

export interface WatchOptions<T extends { metadata?: ObjectMetaLike }> {
  readonly api: ApiClient;
  /** The collection path, e.g. from {@link LeaseApi.path}. */
  readonly path: string;
  readonly labelSelector?: string | undefined;
  readonly fieldSelector?: string | undefined;
  readonly list: () => Promise<{ items: T[]; resourceVersion: string }>;
  /** Called with every object (keyed `namespace/name`) after the first list and after every change. Must not throw. */
  readonly onChange?: ((objects: ReadonlyMap<string, T>) => void) | undefined;
  /** Called after every complete list (the first and each relist), before `onChange`. Must not throw. */
  readonly onList?: ((objects: ReadonlyMap<string, T>) => void) | undefined;
  /** Called for each change a watch delivers, before `onChange`. Must not throw. */
  readonly onEvent?: ((type: "ADDED" | "MODIFIED" | "DELETED", object: T) => void) | undefined;
  /** Called when a list or watch fails (it is retried). Must not throw. */
  readonly onError?: ((message: string) => void) | undefined;
  /** The Accept header of the list's watch, e.g. metadata only. */
  readonly accept?: string | undefined;
  readonly clock: Clock;
  readonly log: Logger;
  /** Decodes one watch event object; return undefined to drop it. */
  readonly decode: (raw: unknown) => T | undefined;
}

// Server-side watch timeout: the same order as kube-apiserver's default
// (5-10 min). Reconnecting is cheap; it resumes from the last resourceVersion.
const WATCH_TIMEOUT_SECONDS = 300;
// Retry after a failed list or watch: from 200 ms, doubling, capped at 5 s so
// a member notices a pending table within seconds of the API coming back.
const RETRY_MIN_MS = 200;
const RETRY_MAX_MS = 5_000;

/**
 * List, then watch from the list's resourceVersion, forever: reconnects from
 * the last seen version when a watch ends, relists on 410 Expired and after
 * errors (with capped backoff). Returns a stop function; `synced` resolves
 * after the first successful list.
 */
export function watchObjects<T extends { metadata?: ObjectMetaLike }>(opts: WatchOptions<T>): { stop: () => void; synced: Promise<void> } {
  const stopper = new AbortController();
  let objects = new Map<string, T>();
  let rv = "";
  let request: WatchHandle | undefined;
  let markSynced: () => void = () => {};
  const synced = new Promise<void>((resolve) => (markSynced = resolve));

  const watchOnce = async (): Promise<{ err: unknown; expired: boolean }> => {
    let expired = false;
    const params: Query = { resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds: WATCH_TIMEOUT_SECONDS, labelSelector: opts.labelSelector, fieldSelector: opts.fieldSelector };
    const onEvent = (type: string, raw: unknown): void => {
      if (type === "ERROR") {
        // 410 Expired (or any other error event): the stream is over; relist.
        expired = true;
        request?.abort();
        return;
      }
      const meta = isRecord(raw) && isRecord(raw["metadata"]) ? raw["metadata"] : {};
      if (typeof meta["resourceVersion"] === "string") rv = meta["resourceVersion"];
      if (type === "BOOKMARK") return;
      const obj = opts.decode(raw);
      if (obj === undefined) return;
      if (type === "DELETED") objects.delete(keyOf(obj));
      else if (type === "ADDED" || type === "MODIFIED") objects.set(keyOf(obj), obj);
      else return;
      opts.onEvent?.(type, obj);
      opts.onChange?.(objects);
    };
    const w = opts.api.watch(opts.path, params, onEvent, undefined, opts.accept);
    request = w;
    if (stopper.signal.aborted) w.abort();
    const err = await w.done;
    return { err, expired };
  };

  const loop = async (): Promise<void> => {
    let delay = 0;
    while (!stopper.signal.aborted) {
      try {
        if (rv === "") {
          const l = await opts.list();
          objects = new Map(l.items.map((o) => [keyOf(o), o]));
          rv = l.resourceVersion;
          opts.onList?.(objects);
          opts.onChange?.(objects);
          markSynced();
        }
        const { err, expired } = await watchOnce();
        if (stopper.signal.aborted) return;
        if (expired || httpStatus(err) === 410) {
          rv = "";
          continue;
        }
        // A watch that ended cleanly (server timeout) or by inactivity resumes at once.
        if (err !== null && err !== undefined && !(err instanceof TimeoutError)) {
          throw new ShardcarError("SHARDCAR_ERR_UPSTREAM", `watch ${opts.path}: ${describe(err)}`, { cause: err });
        }
        delay = 0;
      } catch (e) {
        if (stopper.signal.aborted) return;
        delay = Math.min(RETRY_MAX_MS, Math.max(RETRY_MIN_MS, delay * 2));
        opts.log.debug({ path: opts.path, err: describe(e), retryMs: delay }, "list/watch failed; relisting");
        opts.onError?.(describe(e));
        rv = "";
        await opts.clock.sleep(delay, stopper.signal);
      }
    }
  };
  void loop();
  return {
    stop: () => {
      stopper.abort();
      request?.abort();
    },
    synced,
  };
}

/** Decodes a Lease from a watch event (plain JSON); its times stay text and are read with {@link timeOf}. */
export function decodeLease(raw: unknown): Lease | undefined {
  return isRecord(raw) && isRecord(raw["metadata"]) ? raw : undefined;
}

export function decodeRing(raw: unknown): RingObject | undefined {
  return isRecord(raw) && isRecord(raw["metadata"]) ? asRing(raw) : undefined;
}
