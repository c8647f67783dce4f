/**
 * A controller replica with an informer per resource, all behind one
 * shardcar proxy, as an unmodified controller that reconciles a parent and
 * its children would run after injection: real `@kubernetes/client-node`
 * informers over verified TLS to the proxy. For the e2e tests of the owner
 * key and labels mode; pods and configmaps only (client-node's CoreV1Api
 * lists them).
 */
import { CoreV1Api, makeInformer, type Informer, type KubernetesObject, type ObjectCache } from "@kubernetes/client-node";
import { startReplicaProxy } from "../../src/demo/replica.ts";
import { silentLogger } from "../../src/log.ts";
import type { ProxyFiltering } from "../../src/proxy/request/filtering.ts";
import type { OwnershipSource } from "../../src/shard/ownership.ts";
import type { RunningProxy } from "../../src/proxy/run.ts";
import type { ShardedResource } from "../../src/shard/spec.ts";

export type CoreResource = "pods" | "configmaps";

export interface InformedReplica {
  readonly proxy: RunningProxy;
  readonly informers: ReadonlyMap<CoreResource, Informer<KubernetesObject> & ObjectCache<KubernetesObject>>;
  /** `ns/name@uid` of every object the informer for `resource` holds. */
  cache(resource: CoreResource): Set<string>;
  stop(): Promise<void>;
}

export function objectId(o: { readonly metadata?: { readonly namespace?: string | undefined; readonly name?: string | undefined; readonly uid?: string | undefined } | undefined }): string {
  return `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}@${o.metadata?.uid ?? ""}`;
}

export async function startInformedReplica(opts: {
  readonly name: string;
  readonly upstreamUrl: string;
  readonly resources: readonly ShardedResource[];
  readonly ownership: OwnershipSource;
  readonly filtering?: ProxyFiltering;
  readonly informed: readonly CoreResource[];
}): Promise<InformedReplica> {
  // The ownership these tests give has its ranges from the start: nothing to wait for.
  const { proxy, kubeConfig: kc } = await startReplicaProxy({ ...opts, token: `controller-${opts.name}`, logger: silentLogger(), waitForRangesMs: 0 });
  const core = kc.makeApiClient(CoreV1Api);
  const informers = new Map<CoreResource, Informer<KubernetesObject> & ObjectCache<KubernetesObject>>();
  let stopped = false;
  for (const r of opts.informed) {
    const informer =
      r === "pods"
        ? makeInformer<KubernetesObject>(kc, "/api/v1/pods", () => core.listPodForAllNamespaces())
        : makeInformer<KubernetesObject>(kc, "/api/v1/configmaps", () => core.listConfigMapForAllNamespaces());
    // A relist after a 410 is the informer's own business; restart it the way a controller's would be.
    informer.on("error", (err: unknown) => {
      if (stopped || (err instanceof Error && err.name === "AbortError")) return;
      setTimeout(() => {
        if (!stopped) informer.start().catch(() => undefined);
      }, 200).unref();
    });
    informers.set(r, informer);
  }
  await Promise.all([...informers.values()].map((i) => i.start()));
  let done: Promise<void> | undefined;
  return {
    proxy,
    informers,
    cache: (resource) => new Set((informers.get(resource)?.list() ?? []).map(objectId)),
    stop() {
      done ??= (async () => {
        stopped = true;
        await Promise.all([...informers.values()].map((i) => i.stop()));
        await proxy.close();
      })();
      return done;
    },
  };
}
