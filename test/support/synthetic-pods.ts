/**
 * Deterministic, realistic Pod JSON for benchmarks and size-heavy tests:
 * shaped like the pods in the kube-apiserver fixtures (labels, annotations,
 * managedFields, ownerReferences, containers with env/ports/resources,
 * volumes, tolerations, status with conditions and container statuses) and
 * 2–6 KB each in compact JSON. Pure: the same seed gives the same bytes.
 */

/** A small LCG so the data does not depend on Math.random. */
export function makeRandom(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 0x100000000;
  };
}

function hex(rnd: () => number, n: number): string {
  let out = "";
  for (let k = 0; k < n; k++) out += "0123456789abcdef"[Math.floor(rnd() * 16)];
  return out;
}

/** A random RFC 4122-shaped uid (lower-case, dashed), like the apiserver's. */
export function syntheticUid(rnd: () => number): string {
  return `${hex(rnd, 8)}-${hex(rnd, 4)}-4${hex(rnd, 3)}-${"89ab"[Math.floor(rnd() * 4)]}${hex(rnd, 3)}-${hex(rnd, 12)}`;
}

const NAMESPACES = ["alpha", "team-a", "beta", "gamma", "payments", "search-indexer"];
const APPS = ["web", "api", "worker", "cache", "batch"];

export interface PodShape {
  /** Slimmer pods (one container, no volumes, tolerations or container statuses): about 2 KB, like a typical watch event. */
  readonly small?: boolean;
}

/** One pod object (not serialised). `index` picks names; `rnd` everything else. */
export function syntheticPod(index: number, rnd: () => number, shape: PodShape = {}): Record<string, unknown> {
  const app = APPS[index % APPS.length] ?? "web";
  const ns = NAMESPACES[index % NAMESPACES.length] ?? "alpha";
  const name = `${app}-${hex(rnd, 10)}-${hex(rnd, 5)}`;
  const small = shape.small === true;
  const containers = small || rnd() < 0.75 ? 1 : 2;
  const envCount = Math.floor(rnd() * (small ? 3 : 5));
  const ts = `2026-11-30T07:${String(10 + (index % 50)).padStart(2, "0")}:21Z`;
  // About a third are still Pending: no node, no kubelet status, which gives
  // the spread of sizes a real list has (roughly 2–6 KB compact).
  const running = !small && rnd() < 0.65;
  const mkContainer = (k: number): Record<string, unknown> => ({
    name: `${app}-${k}`,
    image: `registry.example.com/team/${app}:v1.${index % 40}.${k}`,
    ports: [{ name: "http", containerPort: 8080 + k, protocol: "TCP" }],
    env: Array.from({ length: envCount }, (_, e) => ({ name: `ENV_VAR_${e}`, value: `value-${hex(rnd, 6 + (e % 12))}` })),
    resources: { limits: { cpu: "500m", memory: "256Mi" }, requests: { cpu: "100m", memory: "128Mi" } },
    ...(small ? {} : { volumeMounts: [{ name: "kube-api-access", readOnly: true, mountPath: "/var/run/secrets/kubernetes.io/serviceaccount" }] }),
    terminationMessagePath: "/dev/termination-log",
    terminationMessagePolicy: "File",
    imagePullPolicy: "IfNotPresent",
  });
  const fieldsV1Containers: Record<string, unknown> = {};
  for (let k = 0; k < containers; k++) {
    fieldsV1Containers[`k:{"name":"${app}-${k}"}`] = {
      ".": {},
      "f:env": Object.fromEntries(Array.from({ length: envCount }, (_, e) => [`k:{"name":"ENV_VAR_${e}"}`, { ".": {}, "f:name": {}, "f:value": {} }])),
      "f:image": {},
      "f:imagePullPolicy": {},
      "f:name": {},
      "f:ports": { ".": {}, [`k:{"containerPort":${8080 + k},"protocol":"TCP"}`]: { ".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {} } },
      "f:resources": { ".": {}, "f:limits": { ".": {}, "f:cpu": {}, "f:memory": {} }, "f:requests": { ".": {}, "f:cpu": {}, "f:memory": {} } },
    };
  }
  return {
    metadata: {
      name,
      generateName: `${app}-${hex(rnd, 10)}-`,
      namespace: ns,
      uid: syntheticUid(rnd),
      resourceVersion: String(100000 + index),
      creationTimestamp: ts,
      labels: { app, "pod-template-hash": hex(rnd, 10), tier: index % 2 === 0 ? "backend" : "frontend", "pod-index": String(index) },
      annotations: { "example.com/owner": `team-${ns}`, "kubectl.kubernetes.io/restartedAt": ts },
      ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: `${app}-${hex(rnd, 10)}`, uid: syntheticUid(rnd), controller: true, blockOwnerDeletion: true }],
      managedFields: [
        {
          manager: "kube-controller-manager",
          operation: "Update",
          apiVersion: "v1",
          time: ts,
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:metadata": { "f:generateName": {}, "f:labels": { ".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {} }, "f:ownerReferences": { ".": {}, 'k:{"uid":"x"}': {} } },
            "f:spec": { "f:containers": fieldsV1Containers, "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {} },
          },
        },
        ...(running ? [{
          manager: "kubelet",
          operation: "Update",
          apiVersion: "v1",
          time: ts,
          fieldsType: "FieldsV1",
          fieldsV1: { "f:status": { "f:conditions": { 'k:{"type":"Ready"}': { ".": {}, "f:lastProbeTime": {}, "f:status": {}, "f:type": {} } }, "f:phase": {}, "f:podIP": {} } },
          subresource: "status",
        }] : []),
      ],
    },
    spec: {
      ...(small ? {} : { volumes: [{ name: "kube-api-access", projected: { sources: [{ serviceAccountToken: { expirationSeconds: 3607, path: "token" } }], defaultMode: 420 } }] }),
      containers: Array.from({ length: containers }, (_, k) => mkContainer(k)),
      restartPolicy: "Always",
      terminationGracePeriodSeconds: 30,
      dnsPolicy: "ClusterFirst",
      serviceAccountName: "default",
      ...(running ? { nodeName: `node-${index % 97}` } : {}),
      securityContext: {},
      schedulerName: "default-scheduler",
      ...(small
        ? {}
        : {
            tolerations: [
              { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
              { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
            ],
          }),
      priority: 0,
      enableServiceLinks: true,
      preemptionPolicy: "PreemptLowerPriority",
    },
    status: running
      ? {
          phase: "Running",
          conditions: ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"].map((type) => ({ type, status: "True", lastProbeTime: null, lastTransitionTime: ts })),
          hostIP: `10.0.${index % 250}.${(index * 7) % 250}`,
          podIP: `10.244.${index % 250}.${(index * 13) % 250}`,
          startTime: ts,
          containerStatuses: Array.from({ length: containers }, (_, k) => ({
            name: `${app}-${k}`,
            state: { running: { startedAt: ts } },
            ready: true,
            restartCount: index % 3,
            image: `registry.example.com/team/${app}:v1.${index % 40}.${k}`,
            imageID: `registry.example.com/team/${app}@sha256:${hex(rnd, 64)}`,
            containerID: `containerd://${hex(rnd, 64)}`,
            started: true,
          })),
          qosClass: "Burstable",
        }
      : {
          phase: "Pending",
          conditions: [{ type: "PodScheduled", status: "False", lastProbeTime: null, lastTransitionTime: ts, reason: "Unschedulable", message: "0/97 nodes are available: 97 Insufficient cpu." }],
          qosClass: "Burstable",
        },
  };
}

/** Compact pod JSON strings until `targetBytes` is reached. */
export function syntheticPodJsons(targetBytes: number, seed = 1, shape: PodShape = {}): string[] {
  const rnd = makeRandom(seed);
  const out: string[] = [];
  let total = 0;
  for (let i = 0; total < targetBytes; i++) {
    const s = JSON.stringify(syntheticPod(i, rnd, shape));
    out.push(s);
    total += s.length + 1;
  }
  return out;
}

/** A compact PodList body of about `targetBytes`, with list metadata before the items (typed-list order). */
export function syntheticPodList(targetBytes: number, opts: { seed?: number; selector?: string } = {}): Buffer {
  const pods = syntheticPodJsons(targetBytes, opts.seed ?? 1);
  const meta = opts.selector === undefined ? `{"resourceVersion":"123456"}` : `{"resourceVersion":"123456","shardInfo":{"selector":${JSON.stringify(opts.selector)}}}`;
  return Buffer.from(`{"kind":"PodList","apiVersion":"v1","metadata":${meta},"items":[${pods.join(",")}]}\n`);
}

/** Newline-delimited watch events (`ADDED`/`MODIFIED`/`DELETED`), one pod each; about 2 KB each with `small`. */
export function syntheticWatchStream(targetBytes: number, seed = 1, shape: PodShape = {}): Buffer {
  const pods = syntheticPodJsons(targetBytes, seed, shape);
  const types = ["ADDED", "MODIFIED", "MODIFIED", "DELETED"];
  return Buffer.from(pods.map((p, i) => `{"type":"${types[i % types.length] ?? "ADDED"}","object":{"kind":"Pod","apiVersion":"v1",${p.slice(1)}}\n`).join(""));
}
