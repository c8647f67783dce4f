/**
 * devapi: a small in-memory Kubernetes-like API server for tests, benchmarks
 * and the demo, with KEP-5866 sharded LIST/WATCH and a switchable gate.
 *
 * Emulated (checked against the recorded transcripts in
 * `test/fixtures/kube-apiserver/` by `test/devapi/conformance.test.ts`):
 * - CRUD for any group/version/resource, namespaced or cluster-scoped, typed
 *   (metadata before items, shardInfo echoed) or unstructured (sorted keys,
 *   list metadata after items, no shardInfo); `generateName`; server-set
 *   uid, resourceVersion (one global counter), creationTimestamp, generation;
 *   PUT with optimistic concurrency (409 on a stale resourceVersion); merge,
 *   JSON and strategic-merge (treated as merge) PATCH; DELETE with
 *   preconditions and finalizers, pods' two-step delete (MODIFIED with
 *   deletionTimestamp, then DELETED); deletecollection; `/status`.
 * - LIST: limit/continue (the token records neither selector), `resourceVersion=0`
 *   ignores limit, `resourceVersionMatch=Exact` at an older version within the
 *   history (served like etcd: items carry kind, batch-doubling
 *   remainingItemCount), NotOlderThan, label selectors (=, ==, !=, in, notin,
 *   exists, !key, gt, lt), field selectors (metadata.name, metadata.namespace,
 *   plus per-resource ones), `as=Table` (includeObject None/Metadata/Object),
 *   `as=PartialObjectMetadataList`, Go-style pretty printing for curl.
 *   `remainingItemCount` reproduces 1.36's sharded-page bug.
 * - WATCH: `watch=1|true`, `/watch/` paths, resourceVersion semantics (unset/0:
 *   current state as ADDED first; N: replay from history or a 410 ERROR
 *   event), label-selector transitions (ADDED/DELETED when an object enters or
 *   leaves the selection), bookmarks (periodic and before the timeout),
 *   watch-list with the `k8s.io/initial-events-end` bookmark, timeoutSeconds,
 *   Table and PartialObjectMetadata watches (columnDefinitions on the first
 *   event only), backpressure, cleanup on disconnect.
 * - KEP-5866: gate `on`, `off`, `mixed`, `bug-1.36.0` (see {@link GateMode});
 *   500 `invalid shard selector: …` with the server's own detail text.
 * - CustomResourceDefinitions: writing one serves its versions as unstructured
 *   resources (with `/status` and printer columns); no schema validation,
 *   defaulting or conversion, and deleting it does not delete its objects.
 * - Discovery (legacy, not aggregated), `/version` (1.36), health endpoints,
 *   optional bearer-token requirement, per-request Authorization recording.
 *
 * - Mutating admission webhooks (`admission.ts`): writes of the resources and
 *   operations a webhook lists go through it as AdmissionReview v1 over
 *   verified HTTPS, and its JSON Patch is applied.
 *
 * Not emulated: protobuf and YAML (a request that accepts only those gets
 * 406), aggregated discovery, OpenAPI, server-side apply, dry-run, other
 * admission (validating webhooks, selectors, matchConditions) and validation beyond names, defaulting, the namespace lifecycle (objects
 * may be created in a namespace that does not exist; deleting a namespace
 * deletes only it), garbage collection, graceful deletion periods (the pod
 * two-step is immediate), authentication/authorization beyond the optional
 * token check, priority-and-fairness, HTTP/2, and waiting for a future
 * resourceVersion (devapi answers 504 at once instead of after 3 s).
 *
 * Exports {@link startDevApi}, the {@link DevApi} handle, the {@link DevStore}
 * interface for programmatic seeding and churn, the built-in resource
 * definitions, and {@link seedPods} (from `seed.ts`). No module state: every
 * server is independent.
 *
 * @packageDocumentation
 */
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { silentLogger, type Logger } from "../log.ts";
import type { MutatingWebhook } from "./admission.ts";
import { BUILTIN_RESOURCES, CUSTOMRESOURCEDEFINITIONS } from "./builtins.ts";
import { defsFromCrd } from "./crd.ts";
import type { DevAuth } from "./reviews.ts";
import { DevApiHandler, type DevApiStats } from "./server.ts";
import { MemoryStore, type DevStore } from "./store.ts";
import type { GateMode, ResourceDef } from "./types.ts";

export type { GateMode, GroupVersionResource, KubeObject, ObjectMeta, ResourceDef, ResourceRef, TableColumn } from "./types.ts";
export { GATE_MODES, isGateMode } from "./types.ts";
export type { DevStore, DevWatchEvent, ObjectIdentity } from "./store.ts";
export type { AdmissionOperation, MutatingWebhook } from "./admission.ts";
export type { DevApiStats, RequestRecord } from "./server.ts";
export type { DevAuth, DevUser } from "./reviews.ts";
export { DevApiStatusError, type StatusBody } from "./status.ts";
export { BUILTIN_RESOURCES, CONFIGMAPS, CUSTOMRESOURCEDEFINITIONS, LEASES, NAMESPACES, PODS, SECRETS, SERVICEACCOUNTS, SHARDRINGS } from "./builtins.ts";
export { seedPods, type SeedPodsOptions } from "./seed.ts";

export interface DevApiOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 (default) picks an ephemeral port. */
  port?: number;
  /** Default `on`. */
  gate?: GateMode;
  /** PEM key and certificate; serves HTTPS when given. */
  tls?: { key: string; cert: string };
  /** Events kept per resource for watch resumption; older resourceVersions get 410. Default 10,000. */
  watchHistory?: number;
  /** Interval of periodic BOOKMARKs on watches that allow them. Default 60,000 (the real cacher's minute). */
  bookmarkIntervalMs?: number;
  /** Default: silent. */
  logger?: Logger;
  /** `true`: any `Bearer` token; a string: exactly that token. Otherwise 401. Health endpoints are exempt. Default false. */
  requireToken?: boolean | string;
  /** Whom TokenReview authenticates and what SubjectAccessReview allows (reviews.ts). Default: nobody, nothing. */
  auth?: DevAuth;
  /** Serve the built-in resources (default true); `registerResource` adds more either way. */
  builtins?: boolean;
  /** How many requests `stats.requests` keeps (oldest dropped). Default 10,000. */
  maxRecordedRequests?: number;
  /** Clock for timestamps and ages, in ms. Default `Date.now`. */
  now?: () => number;
  /** Mutating admission webhooks for writes (see `admission.ts`); settable later with `setMutatingWebhooks`. */
  mutatingWebhooks?: readonly MutatingWebhook[];
}

/** A running devapi. */
export interface DevApi {
  /** `http://host:port` or `https://host:port`. */
  readonly url: string;
  readonly port: number;
  /** The KEP-5866 gate; settable at any time, applies to requests that arrive afterwards. */
  gate: GateMode;
  /** Programmatic CRUD on the same data the HTTP API serves. */
  readonly store: DevStore;
  readonly stats: DevApiStats;
  /** Adds a resource, or replaces a definition (objects and watches kept). Discovery picks it up at once. */
  registerResource(r: ResourceDef): void;
  /** Replaces the mutating webhooks; applies to writes that arrive afterwards. */
  setMutatingWebhooks(hooks: readonly MutatingWebhook[]): void;
  /**
   * Restarts the server as a process restart looks to its clients: ends every
   * open watch and connection, stops listening (connections are refused),
   * awaits `whileDown` (e.g. writes through {@link store} or
   * `store.compact()`), then listens again on the same port with the same
   * data, as an apiserver restarting on the same etcd. Rejects if the port
   * was taken meanwhile, or the server was closed.
   */
  restart(whileDown?: () => void | Promise<void>): Promise<void>;
  /** Ends open watches, closes connections and the listener. Idempotent; later calls return the same promise. */
  close(): Promise<void>;
}

/**
 * Starts a devapi and resolves once it listens. Rejects if the port cannot be
 * bound. Nothing is global: several servers can run in one process.
 */
export async function startDevApi(opts: DevApiOptions = {}): Promise<DevApi> {
  const now = opts.now ?? Date.now;
  const store = new MemoryStore({ historyLimit: opts.watchHistory ?? 10_000, now });
  if (opts.builtins !== false) {
    for (const d of BUILTIN_RESOURCES) store.register(d);
    // A written CRD starts serving its custom resources, as on a cluster.
    store.watch(CUSTOMRESOURCEDEFINITIONS, (e) => {
      if (e.type !== "DELETED") for (const d of defsFromCrd(e.object)) store.register(d);
    });
  }
  const host = opts.host ?? "127.0.0.1";
  let port = opts.port ?? 0;
  let webhooks: readonly MutatingWebhook[] = opts.mutatingWebhooks ?? [];
  const handler = new DevApiHandler(
    {
      store,
      logger: opts.logger ?? silentLogger(),
      bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 60_000,
      requireToken: opts.requireToken ?? false,
      auth: opts.auth,
      maxRecordedRequests: opts.maxRecordedRequests ?? 10_000,
      now,
      serverAddress: () => `${host}:${port}`,
      webhooks: () => webhooks,
    },
    opts.gate ?? "on",
  );
  const makeServer = (): Server => {
    const s = opts.tls ? createHttpsServer({ key: opts.tls.key, cert: opts.tls.cert }, handler.handle) : createHttpServer(handler.handle);
    // Watches are long-lived by design; the defaults would cut them.
    s.requestTimeout = 0;
    s.headersTimeout = 60_000;
    // kube-apiserver keeps an idle connection 90 s (k8s.io/apiserver
    // secure_serving.go, IdleTimeout), Node's default is 5 s: clients that
    // call every few seconds would meet far more idle closes here than there.
    s.keepAliveTimeout = 90_000;
    return s;
  };
  const listen = (s: Server): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      s.once("error", reject);
      s.listen(port, host, () => {
        s.off("error", reject);
        resolve();
      });
    });
  const stop = (s: Server): Promise<void> =>
    new Promise<void>((resolve) => {
      handler.closeWatches();
      s.close(() => resolve());
      s.closeAllConnections();
    });
  let server = makeServer();
  await listen(server);
  port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  const url = `${opts.tls ? "https" : "http"}://${urlHost}:${port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    get gate() {
      return handler.gate;
    },
    set gate(mode: GateMode) {
      handler.gate = mode;
    },
    store,
    stats: handler.stats,
    registerResource: (r) => {
      store.register(r);
    },
    setMutatingWebhooks: (hooks) => {
      webhooks = hooks;
    },
    async restart(whileDown) {
      if (closing !== undefined) throw new Error("devapi: restart after close");
      await stop(server);
      await whileDown?.();
      server = makeServer();
      await listen(server);
    },
    close() {
      closing ??= stop(server);
      return closing;
    },
  };
}
