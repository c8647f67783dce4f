/**
 * Proxies and informer replicas in front of the real server, and a writer
 * that churns objects on it. Every proxy the lane starts goes through
 * {@link startRealProxy}, so the test-only broken mode
 * (`SHARDCAR_TEST_BREAK_PROXY`) reaches all of them.
 */
import { CoreV1Api, CustomObjectsApi, makeInformer, type Informer, type KubernetesObject, type ObjectCache } from "@kubernetes/client-node";
import { kubeConfigFor } from "../../../src/demo/replica.ts";
import { silentLogger } from "../../../src/log.ts";
import { StaticOwnership, type OwnershipSource } from "../../../src/shard/ownership.ts";
import { startProxy, type RunningProxy } from "../../../src/proxy/run.ts";
import type { ProxyFiltering } from "../../../src/proxy/request/filtering.ts";
import type { Fallback } from "../../../src/settings/pod-settings.ts";
import { makeUpstream } from "../../../src/proxy/serving/upstream.ts";
import type { Range } from "../../../src/shard/range.ts";
import type { ShardedResource } from "../../../src/shard/spec.ts";
import { createLocalCa } from "../../../src/pki/ca.ts";
import { NAMESPACES, PODS, pod } from "./dataset.ts";
import { brokenProxyOptions, callJson, HttpError, type RealApiEnv, type Target } from "./realapi.ts";

export interface ProxyOptions {
  readonly resources: readonly ShardedResource[];
  readonly ranges?: readonly Range[];
  readonly ownership?: OwnershipSource;
  readonly fallback?: Fallback;
  /** Serve TLS to the client (client-node refuses plain HTTP with verification on). */
  readonly tls?: boolean;
  /** Narrow without relists (ring mode's default in the sidecar); off unless set. */
  readonly syntheticDeletes?: boolean;
  /** How the server is asked to filter; default shardselector. */
  readonly filtering?: ProxyFiltering;
  /** Hold the first sharded requests until the ring gives ranges (the sidecar's 30 s in ring mode); default 0. */
  readonly waitForRangesMs?: number;
}

export interface LaneProxy {
  readonly proxy: RunningProxy;
  /** How a client reaches the proxy with the real token. */
  readonly target: Target;
}

/** A shardcar proxy on loopback, forwarding to realapi over verified TLS. */
export async function startRealProxy(env: RealApiEnv, opts: ProxyOptions): Promise<LaneProxy> {
  let tls: { key: string; cert: string } | undefined;
  let caPem: string | undefined;
  if (opts.tls === true) {
    const ca = await createLocalCa("shardcar-real-lane", new Date(), 24 * 3600_000);
    tls = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1", "localhost"], now: new Date(), validityMs: 24 * 3600_000 });
    caPem = ca.certPem;
  }
  const proxy = await startProxy({
    listen: { host: "127.0.0.1", port: 0 },
    ...(tls === undefined ? {} : { tls }),
    admin: { host: "127.0.0.1", port: 0 },
    upstream: makeUpstream(env.url, env.caPem),
    resources: opts.resources,
    ownership: opts.ownership ?? new StaticOwnership(opts.ranges ?? []),
    fallback: opts.fallback ?? "filter",
    logger: silentLogger(),
    ...(opts.syntheticDeletes === undefined ? {} : { syntheticDeletes: opts.syntheticDeletes }),
    ...(opts.filtering === undefined ? {} : { filtering: opts.filtering }),
    ...(opts.waitForRangesMs === undefined ? {} : { waitForRangesMs: opts.waitForRangesMs }),
    ...brokenProxyOptions(),
  });
  return { proxy, target: { url: proxy.url, token: env.token, ...(caPem === undefined ? {} : { caPem }) } };
}

export { kubeConfigFor };

export type InformerKind = "pods" | "configmaps" | "widgets";

export interface Replica {
  readonly name: string;
  readonly lane: LaneProxy;
  readonly informer: Informer<KubernetesObject> & ObjectCache<KubernetesObject>;
  readonly errors: unknown[];
  stop(): Promise<void>;
}

/**
 * A real `@kubernetes/client-node` informer for `kind`, talking only to its
 * own proxy (TLS, the real token), as an unmodified controller after injection.
 */
export async function startReplica(env: RealApiEnv, name: string, kind: InformerKind, opts: Omit<ProxyOptions, "tls" | "resources"> & { readonly resources: readonly ShardedResource[] }): Promise<Replica> {
  const lane = await startRealProxy(env, { ...opts, tls: true });
  const kc = kubeConfigFor(lane.proxy.url, env.token, lane.target.caPem ?? "");
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  let informer: Informer<KubernetesObject> & ObjectCache<KubernetesObject>;
  if (kind === "pods") informer = makeInformer<KubernetesObject>(kc, "/api/v1/pods", () => core.listPodForAllNamespaces());
  else if (kind === "configmaps") informer = makeInformer<KubernetesObject>(kc, "/api/v1/configmaps", () => core.listConfigMapForAllNamespaces());
  else {
    informer = makeInformer<KubernetesObject>(kc, "/apis/example.com/v1/widgets", async () => {
      const l = (await custom.listClusterCustomObject({ group: "example.com", version: "v1", plural: "widgets" })) as { metadata?: { resourceVersion?: string }; items?: KubernetesObject[] };
      return { metadata: l.metadata ?? {}, items: l.items ?? [] };
    });
  }
  const errors: unknown[] = [];
  let stopped = false;
  informer.on("error", (err: unknown) => {
    errors.push(err);
    if (stopped) return;
    // As a controller's would be: restarted after a short pause.
    setTimeout(() => {
      if (!stopped) informer.start().catch(() => undefined);
    }, 500).unref();
  });
  await informer.start();
  let done: Promise<void> | undefined;
  return {
    name,
    lane,
    informer,
    errors,
    stop() {
      done ??= (async () => {
        stopped = true;
        await informer.stop();
        await lane.proxy.close();
      })();
      return done;
    },
  };
}

export function cacheIdents(r: Replica): Set<string> {
  return new Set(r.informer.list().map((o) => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}@${o.metadata?.uid ?? ""}`));
}

/**
 * Creates, label-patches and deletes pods (`churn-*`), and label-patches
 * seeded pods (so an event that wrongly reaches a cache stays there), on the
 * real server as fast as `concurrency` requests allow, for `ms`; then deletes
 * the churn pods left. Deterministic choices for a seed.
 */
export async function churnPods(target: Target, opts: { ms: number; seed?: number; concurrency?: number; prefix?: string }): Promise<{ ops: number; errors: number }> {
  let seed = opts.seed ?? 1;
  const rnd = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  const live: Array<[string, string]> = [];
  let n = 0;
  let ops = 0;
  let errors = 0;
  const end = Date.now() + opts.ms;
  const prefix = opts.prefix ?? `churn-${Date.now().toString(36)}`;
  const worker = async (): Promise<void> => {
    while (Date.now() < end) {
      const choice = rnd() % 4;
      ops++;
      try {
        if (choice === 3) {
          const i = rnd() % PODS;
          const ns = NAMESPACES[i % NAMESPACES.length] ?? "alpha";
          await callJson(target, "PATCH", `/api/v1/namespaces/${ns}/pods/pod-${String(i).padStart(3, "0")}`, { metadata: { labels: { touched: String(ops) } } }, "application/merge-patch+json");
        } else if (choice === 0 || live.length === 0) {
          const ns = NAMESPACES[rnd() % NAMESPACES.length] ?? "alpha";
          const name = `${prefix}-${n++}`;
          live.push([ns, name]);
          await callJson(target, "POST", `/api/v1/namespaces/${ns}/pods`, pod(name, ns, n));
        } else {
          const i = rnd() % live.length;
          const [ns, name] = live[i] as [string, string];
          if (choice === 1) {
            await callJson(target, "PATCH", `/api/v1/namespaces/${ns}/pods/${name}`, { metadata: { labels: { touched: String(ops) } } }, "application/merge-patch+json");
          } else {
            live[i] = live[live.length - 1] as [string, string];
            live.pop();
            await callJson(target, "DELETE", `/api/v1/namespaces/${ns}/pods/${name}`);
          }
        }
      } catch (e) {
        // A patch racing its own delete is a 404; anything else is a real error.
        if (!(e instanceof HttpError) || e.status !== 404) errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency ?? 4 }, worker));
  // What is left is deleted too, so the data set does not grow run after run.
  await Promise.all(
    live.map(([ns, name]) =>
      callJson(target, "DELETE", `/api/v1/namespaces/${ns}/pods/${name}`).then(
        () => ops++,
        () => errors++,
      ),
    ),
  );
  return { ops, errors };
}
