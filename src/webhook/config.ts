/**
 * What the manager knows that a pod does not: the sidecar image, ports,
 * resources and the manager's own namespace. Parsed once from flags in
 * `src/cli/commands/manager.ts` and passed down; never read from the
 * environment here.
 */

/** The service-account directory every in-cluster client reads. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
/** Where the sidecar mounts the emptyDir it fills for the app containers. */
export const SIDECAR_SHARED_DIR = "/var/run/shardcar/serviceaccount";
/** Name of the injected native sidecar (an init container with restartPolicy Always). */
export const SIDECAR_NAME = "shardcar-proxy";
/** Name of the injected emptyDir holding token, namespace, ca.crt (and kubeconfig). */
export const SHARED_VOLUME = "shardcar-serviceaccount";

export type PullPolicy = "Always" | "IfNotPresent" | "Never";

export interface SidecarResources {
  readonly requests: { readonly cpu: string; readonly memory: string };
  readonly limits: { readonly memory: string };
}

export interface InjectorConfig {
  /** The shardcar image; the sidecar runs `shardcar proxy --injected`. */
  readonly image: string;
  readonly imagePullPolicy: PullPolicy;
  /** Loopback port the app's API client is pointed at. */
  readonly proxyPort: number;
  /** Health (`/healthz`, `/readyz`) and metrics port, on the pod IP, for the kubelet. */
  readonly adminPort: number;
  /** The manager's namespace; pods there are never injected. */
  readonly managerNamespace: string;
  readonly resources: SidecarResources;
  /**
   * Containers in `spec.containers` that are other meshes' proxies, not the
   * controller: they are left wired to the real apiserver.
   */
  readonly meshSidecars: readonly string[];
  /** The sidecar's `--metrics-auth`: /metrics behind TokenReview and SubjectAccessReview, over TLS (the probes follow). */
  readonly sidecarMetricsAuth: boolean;
  /** The sidecar's `--debug-remote`: /debug/shardcar beyond loopback, for `audit --canary` through the pod proxy. */
  readonly sidecarDebugRemote: boolean;
}

export const DEFAULT_PROXY_PORT = 7443;
export const DEFAULT_ADMIN_PORT = 9464;

/**
 * Defaults for everything but the image.
 *
 * Resources: an idle sidecar is about 64 MiB RSS (design target P6), it
 * grows by about 20 MiB while it streams a 100 MB list and watch churn
 * (P6b), and its filter's memory is bounded by the largest single object, so
 * 64 MiB requested and 256 MiB as the limit leave room for large objects. There is
 * no CPU limit on purpose: CFS throttling would add latency to every API call
 * of the controller it fronts.
 */
export function defaultInjectorConfig(image: string): InjectorConfig {
  return {
    image,
    imagePullPolicy: "IfNotPresent",
    proxyPort: DEFAULT_PROXY_PORT,
    adminPort: DEFAULT_ADMIN_PORT,
    managerNamespace: "shardcar-system",
    resources: { requests: { cpu: "20m", memory: "64Mi" }, limits: { memory: "256Mi" } },
    meshSidecars: ["istio-proxy", "linkerd-proxy"],
    sidecarMetricsAuth: false,
    sidecarDebugRemote: false,
  };
}
