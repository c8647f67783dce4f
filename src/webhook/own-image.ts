/**
 * The sidecar image defaults to the manager's own: one image serves both
 * (`shardcar manager` and `shardcar proxy`). Reading it from the manager's
 * own Pod, rather than from a flag or an env var filled in by kustomize,
 * keeps them in step however the image is overridden (kustomize `images:`
 * in any overlay, `kubectl set image`, a Helm value): a copy made at build
 * time in a base would go stale under an overlay's image override.
 */
import { ApiError, type ApiClient } from "../kube/client.ts";

interface PodSpec {
  readonly spec?: { readonly containers?: ReadonlyArray<{ readonly name?: string; readonly image?: string }> };
}

/**
 * The image of container `container` (or of the only container) in pod
 * `namespace/pod`. Throws when the pod cannot be read or has no such container.
 */
export async function readOwnImage(api: ApiClient, namespace: string, pod: string, container: string): Promise<string> {
  let got: PodSpec;
  try {
    got = (await api.request("GET", `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}`, { timeoutMs: 15_000 })) as PodSpec;
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    throw new Error(`cannot read the manager's own pod ${namespace}/${pod} for its image: HTTP ${e.statusCode} ${e.message}; pass --image`, { cause: e });
  }
  const containers = got.spec?.containers ?? [];
  const mine = containers.find((c) => c.name === container) ?? (containers.length === 1 ? containers[0] : undefined);
  if (mine?.image === undefined || mine.image === "") {
    throw new Error(`pod ${namespace}/${pod} has no container ${JSON.stringify(container)} with an image; pass --image`);
  }
  return mine.image;
}
