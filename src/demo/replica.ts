/**
 * A controller replica as the demo and the end-to-end tests run it: a real
 * `@kubernetes/client-node` informer that talks only to its own shardcar
 * proxy, exactly as an unmodified controller would after injection.
 */
import { CoreV1Api, KubeConfig, makeInformer, type Informer, type ObjectCache, type V1Pod } from "@kubernetes/client-node";
import type { Logger } from "../log.ts";
import type { ProxyFiltering } from "../proxy/request/filtering.ts";
import { StaticOwnership, type OwnershipSource } from "../shard/ownership.ts";
import { startProxy, type RunningProxy } from "../proxy/run.ts";
import type { Fallback } from "../settings/pod-settings.ts";
import { makeUpstream } from "../proxy/serving/upstream.ts";
import type { ShardedResource } from "../shard/spec.ts";
import { createLocalCa } from "../pki/ca.ts";

export interface ReplicaOptions {
  readonly name: string;
  /** The apiserver (devapi) the proxy forwards to. */
  readonly upstreamUrl: string;
  /** PEM the apiserver's certificate must chain to, for an https upstream; default: system roots. */
  readonly upstreamCa?: string;
  readonly resources: readonly ShardedResource[];
  readonly ownership: OwnershipSource;
  readonly fallback?: Fallback;
  /** How the apiserver is asked to filter; default shardselector. */
  readonly filtering?: ProxyFiltering;
  readonly logger: Logger;
  /** Bearer token the "controller" presents; the proxy must forward it unchanged. */
  readonly token?: string;
  /** Narrow without relists (see `ShardProxyOptions.syntheticDeletes`); default: on unless the ownership is static, as the sidecar. */
  readonly syntheticDeletes?: boolean;
  /** See `ShardProxyOptions.waitForRangesMs`; default: 30 s unless the ownership is static, as the sidecar. */
  readonly waitForRangesMs?: number;
}

export interface Replica {
  readonly name: string;
  readonly proxy: RunningProxy;
  readonly informer: Informer<V1Pod> & ObjectCache<V1Pod>;
  readonly kubeConfig: KubeConfig;
  /** Stops the informer and the proxy. Idempotent. */
  stop(): Promise<void>;
}

/** A KubeConfig that points a client at `server` with a bearer token, trusting `caPem`. */
export function kubeConfigFor(server: string, token: string, caPem: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server, caData: Buffer.from(caPem).toString("base64"), skipTLSVerify: false }],
    users: [{ name: "u", token }],
    contexts: [{ name: "ctx", cluster: "c", user: "u" }],
    currentContext: "ctx",
  });
  return kc;
}

/**
 * A replica's shardcar proxy on a loopback port, and the KubeConfig its
 * controller uses to reach it: TLS with a CA of its own, as after injection
 * (client-node refuses plain HTTP unless verification is off, and it must
 * stay on), and the controller's bearer token.
 */
export async function startReplicaProxy(opts: ReplicaOptions): Promise<{ proxy: RunningProxy; kubeConfig: KubeConfig }> {
  const ca = await createLocalCa(`shardcar-demo-${opts.name}`, new Date(), 24 * 3600_000);
  const tls = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1", "localhost"], now: new Date(), validityMs: 24 * 3600_000 });
  const proxy = await startProxy({
    listen: { host: "127.0.0.1", port: 0 },
    tls,
    admin: { host: "127.0.0.1", port: 0 },
    upstream: makeUpstream(opts.upstreamUrl, opts.upstreamCa),
    resources: opts.resources,
    ownership: opts.ownership,
    fallback: opts.fallback ?? "filter",
    ...(opts.filtering === undefined ? {} : { filtering: opts.filtering }),
    syntheticDeletes: opts.syntheticDeletes ?? !(opts.ownership instanceof StaticOwnership),
    waitForRangesMs: replicaWaitForRanges(opts),
    logger: opts.logger.child({ replica: opts.name }),
  });
  return { proxy, kubeConfig: kubeConfigFor(proxy.url, opts.token ?? `token-${opts.name}`, ca.certPem) };
}

/** As the sidecar: a ring member's proxy holds the first requests until it has ranges (30 s), a static one never. */
function replicaWaitForRanges(opts: Pick<ReplicaOptions, "waitForRangesMs" | "ownership">): number {
  return opts.waitForRangesMs ?? (opts.ownership instanceof StaticOwnership ? 0 : 30_000);
}

/** Starts a proxy and a pod informer behind it; resolves once the informer started. */
export async function startPodReplica(opts: ReplicaOptions): Promise<Replica> {
  const { proxy, kubeConfig: kc } = await startReplicaProxy(opts);
  const waitForRangesMs = replicaWaitForRanges(opts);
  const core = kc.makeApiClient(CoreV1Api);
  const informer = makeInformer<V1Pod>(kc, "/api/v1/pods", () => core.listPodForAllNamespaces());
  // Errors (e.g. a relist refused with 503) must not crash the demo; the
  // informer is restarted after a short pause, as a controller's would be.
  let stopped = false;
  informer.on("error", (err: unknown) => {
    // client-node reports its own stop() as an error (the aborted watch
    // request): a deliberately stopped informer must stay stopped.
    if (stopped || (err instanceof Error && err.name === "AbortError")) return;
    setTimeout(() => {
      if (!stopped) informer.start().catch(() => undefined);
    }, 500).unref();
  });
  const starting = informer.start();
  // A proxy waiting for the ring's first ranges holds the informer's LIST
  // until the member, started after this, has joined: do not wait for it.
  if (waitForRangesMs > 0 && opts.ownership.current().generation === 0) starting.catch(() => undefined);
  else await starting;
  let done: Promise<void> | undefined;
  return {
    name: opts.name,
    proxy,
    informer,
    kubeConfig: kc,
    stop() {
      done ??= (async () => {
        stopped = true;
        await informer.stop();
        await proxy.close();
      })();
      return done;
    },
  };
}
