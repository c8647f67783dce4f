/**
 * Bulk seeding for e2e tests, benchmarks and the demo: many pods of a chosen
 * size, spread over namespaces, written straight into the store (no HTTP),
 * so 20,000 pods take well under a second or two.
 */
import type { KubeObject } from "./types.ts";
import { MemoryStore, type DevStore } from "./store.ts";

export interface SeedPodsOptions {
  /** How many pods. */
  count: number;
  /** Namespace names, or how many to make (`ns-0` … `ns-<n-1>`). Default 1. Pods go round-robin. */
  namespaces?: number | readonly string[];
  /** Approximate serialised size of each pod in bytes (padded with an annotation). Default: the natural size, ~1 KB. */
  podBytes?: number;
  /** Pod name prefix. Default `pod-`; names are zero-padded to 5 digits. */
  prefix?: string;
  /** Extra labels on every pod. */
  labels?: Record<string, string>;
}

export interface SeedResult {
  namespaces: string[];
  names: string[];
}

function basePod(name: string, namespace: string, index: number, labels: Record<string, string>): KubeObject {
  const app = ["web", "api", "worker", "cache", "batch"][index % 5] as string;
  return {
    metadata: {
      name,
      namespace,
      labels: { app, "pod-index": String(index), ...labels },
      annotations: {},
    },
    spec: {
      containers: [
        {
          name: app,
          image: "registry.invalid/library/pause:3.10",
          ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }],
          env: [
            { name: "APP_NAME", value: app },
            { name: "POD_INDEX", value: String(index) },
          ],
          resources: { limits: { cpu: "500m", memory: "256Mi" }, requests: { cpu: "100m", memory: "128Mi" } },
          terminationMessagePath: "/dev/termination-log",
          terminationMessagePolicy: "File",
          imagePullPolicy: "IfNotPresent",
        },
      ],
      restartPolicy: "Always",
      terminationGracePeriodSeconds: 30,
      dnsPolicy: "ClusterFirst",
      serviceAccountName: "default",
      schedulerName: "default-scheduler",
    },
    status: { phase: "Pending", qosClass: "Burstable" },
  };
}

/**
 * Creates the namespaces (if missing) and `count` pods through `api.store`.
 * Synchronous work behind a promise-free API; throws the store's 409 if a
 * pod name already exists.
 */
export function seedPods(api: { store: DevStore }, opts: SeedPodsOptions): SeedResult {
  const store = api.store;
  const nsOpt = opts.namespaces ?? 1;
  const namespaces = typeof nsOpt === "number" ? Array.from({ length: Math.max(1, nsOpt) }, (_, i) => `ns-${i}`) : [...nsOpt];
  for (const ns of namespaces) {
    if (store.get("namespaces", undefined, ns) === undefined) store.create("namespaces", { metadata: { name: ns }, spec: {}, status: { phase: "Active" } });
  }
  const prefix = opts.prefix ?? "pod-";
  const names: string[] = [];
  // Size the padding once from a sample pod; every pod then has about the same size.
  const sample = basePod(`${prefix}00000`, namespaces[0] as string, 0, opts.labels ?? {});
  const overhead = JSON.stringify(sample).length + 220; // uid, resourceVersion, timestamps, padding key
  const pad = opts.podBytes !== undefined && opts.podBytes > overhead ? "x".repeat(opts.podBytes - overhead) : "";
  // devapi's own store can skip the defensive copy `create` returns.
  const create = store instanceof MemoryStore ? ((state) => (o: KubeObject) => void store.createIn(state, o, { keepIdentity: false }))(store.resolve("pods")) : (o: KubeObject) => void store.create("pods", o);
  for (let i = 0; i < opts.count; i++) {
    const name = `${prefix}${String(i).padStart(5, "0")}`;
    const pod = basePod(name, namespaces[i % namespaces.length] as string, i, opts.labels ?? {});
    if (pad !== "" && pod.metadata?.annotations) pod.metadata.annotations["shardcar.io/padding"] = pad;
    create(pod);
    names.push(name);
  }
  return { namespaces, names };
}
