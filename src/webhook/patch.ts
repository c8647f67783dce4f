/**
 * Patch generation: raw pod JSON and a plan in, RFC 6902 operations out.
 *
 * The pod is never decoded into a typed model: the injected pod is a deep
 * copy of the request's JSON, edited in place, then diffed against the
 * original. Fields this code has never heard of (newer API fields, other
 * webhooks' additions) are therefore carried through untouched, which a
 * typed round trip would silently drop (controller-runtime's
 * `dropSchemeRemovals` exists because of exactly that).
 *
 * Pure: no I/O, no clock; the same input always gives the same operations.
 */
import { SIDECAR_ENV } from "../sidecar-runtime.ts";
import { settingsToArgs } from "../settings/pod-settings.ts";
import { ANNOTATIONS } from "./annotations.ts";
import {
  SERVICE_ACCOUNT_DIR,
  SHARED_VOLUME,
  SIDECAR_NAME,
  SIDECAR_SHARED_DIR,
} from "./config.ts";
import { isServiceAccountPath, type InjectionPlan } from "./decide.ts";
import { arr, cloneJson, obj, str, type JsonObject, type JsonValue } from "./json.ts";
import { diffJson, type JsonPatchOperation } from "./jsonpatch.ts";

/** Bumped when the shape of what the webhook injects changes. */
export const STATUS_VERSION = 1;

/** What `shardcar.io/status` records (JSON), so a reader knows what was injected. */
export interface InjectionStatus {
  readonly version: number;
  readonly sidecar: string;
  readonly volume: string;
  /** The app containers that were rewired. */
  readonly containers: readonly string[];
  readonly image: string;
  readonly proxyPort: number;
  readonly adminPort: number;
}

/**
 * The JSON Patch that injects the sidecar into `rawPod` as `plan` says.
 * Does not mutate `rawPod`. Never throws for a plan made by
 * `decideInjection` from the same pod.
 */
export function buildInjectionPatch(rawPod: JsonObject, plan: InjectionPlan): JsonPatchOperation[] {
  const original = withoutManagedFields(rawPod);
  return diffJson(original, injectInto(cloneJson(original), plan));
}

/**
 * Drops `metadata.managedFields` from a copy, as istio does before diffing:
 * they can be large, the webhook never changes them, and diffing them is
 * wasted CPU on every admission.
 */
function withoutManagedFields(pod: JsonObject): JsonObject {
  const copy = cloneJson(pod);
  const metadata = obj(copy["metadata"]);
  if (metadata !== undefined) delete metadata["managedFields"];
  return copy;
}

function injectInto(pod: JsonObject, plan: InjectionPlan): JsonObject {
  const { config } = plan;
  const metadata = child(pod, "metadata");
  const annotations = child(metadata, "annotations");
  const status: InjectionStatus = {
    version: STATUS_VERSION,
    sidecar: SIDECAR_NAME,
    volume: SHARED_VOLUME,
    containers: plan.apps,
    image: config.image,
    proxyPort: config.proxyPort,
    adminPort: config.adminPort,
  };
  annotations[ANNOTATIONS.status] = JSON.stringify(status);

  const spec = child(pod, "spec");
  // tmpfs: the token must never reach the node's disk. 1 MiB is far above
  // token + namespace + two CA certificates + kubeconfig (a few KiB).
  list(spec, "volumes").push({ name: SHARED_VOLUME, emptyDir: { medium: "Memory", sizeLimit: "1Mi" } });

  // Appended after every existing init container: those run (or, for native
  // sidecars such as a mesh proxy, start) before shardcar's proxy, so the
  // network is ready when it dials the apiserver, and none of them is
  // rewired to a proxy that is not running yet.
  const grace = spec["terminationGracePeriodSeconds"];
  list(spec, "initContainers").push(sidecar(plan, typeof grace === "number" ? grace : undefined));

  for (const c of arr(spec["containers"])) {
    const container = obj(c);
    if (container === undefined || !plan.apps.includes(str(container["name"]) ?? "")) continue;
    setEnv(container, "KUBERNETES_SERVICE_HOST", "127.0.0.1");
    setEnv(container, "KUBERNETES_SERVICE_PORT", String(config.proxyPort));
    if (plan.settings.kubeconfig) setEnv(container, "KUBECONFIG", `${SERVICE_ACCOUNT_DIR}/kubeconfig`);
    addPreStop(container, plan);
    const mounts = list(container, "volumeMounts");
    const mount: JsonObject = { name: SHARED_VOLUME, mountPath: SERVICE_ACCOUNT_DIR, readOnly: true };
    const at = mounts.findIndex((m) => isServiceAccountPath(str(obj(m)?.["mountPath"])));
    // Moving an existing mount keeps its position; adding one where none was
    // is what stops the ServiceAccount admission plugin from mounting the
    // real token here (it skips containers with a mount at this path).
    if (at >= 0) mounts[at] = mount;
    else mounts.push(mount);
  }
  return pod;
}

/** Where the sidecar's admin listener answers the controller's preStop hook (src/proxy/reporting/admin.ts). */
export const PRESTOP_PATH = "/shardcar/prestop";

/**
 * A ring member must hand its slots on while its controller still runs: the
 * kubelet stops app containers before a native sidecar, and a proxy whose
 * controller is gone leaves its slots in no cache until the drain ends
 * (issue 32). So the controller's preStop asks the sidecar to step aside and
 * returns once it has, and only then does the kubelet send SIGTERM.
 *
 * httpGet, because the kubelet sends it itself (to the pod IP; the admin
 * listener is the one port there) and it needs nothing in the controller's
 * image, unlike `exec`; `sleep` would hold every stop for a fixed time
 * whether or not the handoff took it. A container with a preStop of its own
 * keeps it: a container has one, and the user's comes first. Such a pod's
 * member hands on when its sidecar gets SIGTERM, after the controller.
 */
function addPreStop(container: JsonObject, plan: InjectionPlan): void {
  if (plan.settings.shards.mode !== "ring") return;
  const lifecycle = child(container, "lifecycle");
  if (lifecycle["preStop"] !== undefined) return;
  const { config } = plan;
  lifecycle["preStop"] = { httpGet: { path: PRESTOP_PATH, port: config.adminPort, scheme: config.sidecarMetricsAuth ? "HTTPS" : "HTTP" } };
}

/** The kubelet's default terminationGracePeriodSeconds, which the proxy's own leave timeout (25 s) fits. */
const DEFAULT_GRACE_SECONDS = 30;

/**
 * A ring member drains on SIGTERM (its slots are handed on while it still
 * serves); the kubelet SIGKILLs the pod at its grace period. So the drain
 * must end 5 s before it, when the pod asks for another grace period than
 * the default the proxy's own --leave-timeout fits.
 */
function leaveTimeoutArgs(plan: InjectionPlan, graceSeconds: number | undefined): string[] {
  if (plan.settings.shards.mode !== "ring" || graceSeconds === undefined || graceSeconds === DEFAULT_GRACE_SECONDS) return [];
  return ["--leave-timeout", `${Math.max(1, Math.floor(graceSeconds) - 5)}s`];
}

function sidecar(plan: InjectionPlan, graceSeconds: number | undefined): JsonObject {
  const { config, settings } = plan;
  const args = [
    "proxy",
    "--injected",
    "--listen",
    `127.0.0.1:${config.proxyPort}`,
    // On the pod IP: the kubelet probes it and Prometheus scrapes it.
    "--admin-listen",
    `0.0.0.0:${config.adminPort}`,
    ...(config.sidecarMetricsAuth ? ["--metrics-auth"] : []),
    ...(config.sidecarDebugRemote ? ["--debug-remote"] : []),
    // The pod's settings in the proxy's own vocabulary, with the ring the
    // decision resolved (the owning workload's name when none was written).
    ...settingsToArgs({ ...settings, ring: plan.ring }),
    ...leaveTimeoutArgs(plan, graceSeconds),
    "--sa-dir",
    SIDECAR_SHARED_DIR,
  ];
  const mounts: JsonValue[] = [{ name: SHARED_VOLUME, mountPath: SIDECAR_SHARED_DIR }];
  // The sidecar keeps the real token for itself at the standard path, so it
  // reads what the app would have read and its own in-cluster client works.
  if (plan.tokenVolume !== undefined) mounts.push({ name: plan.tokenVolume, mountPath: SERVICE_ACCOUNT_DIR, readOnly: true });
  const probe = (path: string, periodSeconds: number, failureThreshold: number): JsonObject => ({
    // --metrics-auth serves the whole admin listener over TLS (the kubelet does not verify it).
    httpGet: { path, port: config.adminPort, scheme: config.sidecarMetricsAuth ? "HTTPS" : "HTTP" },
    periodSeconds,
    timeoutSeconds: 1,
    failureThreshold,
  });
  return {
    name: SIDECAR_NAME,
    image: config.image,
    imagePullPolicy: config.imagePullPolicy,
    args,
    env: [
      { name: "POD_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } } },
      { name: "POD_NAMESPACE", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } } },
      // The sidecar's V8 and allocator settings, from their one source (the image carries the same).
      ...SIDECAR_ENV.map((e) => ({ name: e.name, value: e.value })),
    ],
    ports: [{ name: "shardcar-admin", containerPort: config.adminPort, protocol: "TCP" }],
    resources: {
      requests: { cpu: config.resources.requests.cpu, memory: config.resources.requests.memory },
      limits: { memory: config.resources.limits.memory },
    },
    securityContext: {
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      // Numeric, so runAsNonRoot can be verified whatever the image's USER.
      runAsUser: 65532,
      runAsGroup: 65532,
      seccompProfile: { type: "RuntimeDefault" },
    },
    // The app containers start only after this probe passes, and /readyz
    // passes only once token, namespace and ca.crt are in the emptyDir. One
    // second apart, 60 tries: a minute to pull nothing and start (target: 1 s).
    startupProbe: probe("/readyz", 1, 60),
    readinessProbe: probe("/readyz", 10, 3),
    livenessProbe: probe("/healthz", 10, 3),
    volumeMounts: mounts,
    restartPolicy: "Always",
    terminationMessagePolicy: "FallbackToLogsOnError",
  };
}

/** Sets `name=value` on a container, replacing every existing entry of that name in place. */
function setEnv(container: JsonObject, name: string, value: string): void {
  const env = list(container, "env");
  let found = false;
  for (const e of env) {
    const entry = obj(e);
    if (entry === undefined || entry["name"] !== name) continue;
    // An explicit value beats the kubelet's service-link variables, which is
    // why setting these two is enough to redirect in-cluster config.
    entry["value"] = value;
    delete entry["valueFrom"];
    found = true;
  }
  if (!found) env.push({ name, value });
}

function child(parent: JsonObject, key: string): JsonObject {
  const existing = obj(parent[key]);
  if (existing !== undefined) return existing;
  const created: JsonObject = {};
  parent[key] = created;
  return created;
}

function list(parent: JsonObject, key: string): JsonValue[] {
  const existing = parent[key];
  if (Array.isArray(existing)) return existing;
  const created: JsonValue[] = [];
  parent[key] = created;
  return created;
}
