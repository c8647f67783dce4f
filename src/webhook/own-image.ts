/**
 * The sidecar image defaults to the manager's own: one image serves both
 * (`shardcar manager` and `shardcar proxy`). Reading it from the manager's
 * own Pod, rather than from a flag or an env var filled in by kustomize,
 * keeps them in step however the image is overridden (kustomize `images:`
 * in any overlay, `kubectl set image`, a Helm value): a copy made at build
 * time in a base would go stale under an overlay's image override.
 */
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";

/**
 * The image of container `container` (or of the only container) in pod
 * `namespace/pod`. Throws when the pod cannot be read or has no such container.
 */
export async function readOwnImage(kc: KubeConfig, namespace: string, pod: string, container: string): Promise<string> {
  const got = await kc.makeApiClient(CoreV1Api).readNamespacedPod({ name: pod, namespace });
  const containers = got.spec?.containers ?? [];
  const mine = containers.find((c) => c.name === container) ?? (containers.length === 1 ? containers[0] : undefined);
  if (mine?.image === undefined || mine.image === "") {
    throw new Error(`pod ${namespace}/${pod} has no container ${JSON.stringify(container)} with an image; pass --image`);
  }
  return mine.image;
}
