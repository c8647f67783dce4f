/**
 * Realistic protobuf pods (2–6 KB each, like a kube-apiserver pod with
 * managedFields, a few containers, env, probes and status), encoded with
 * protobufjs from the upstream .proto, for tests and benchmarks that need
 * more or different data than the recordings hold. Deterministic: the same
 * index and seed always give the same bytes.
 */
import type { K8sProto, PlainObject } from "./k8s.ts";
import { encodeEnvelope, encodeEventFrame } from "./k8s.ts";

import { rng } from "../rng.ts";

export { rng };

function hex(r: () => number, n: number): string {
  let s = "";
  for (let k = 0; k < n; k++) s += Math.floor(r() * 16).toString(16);
  return s;
}

/** A random version-4-shaped UUID, lower case, 36 characters. */
export function uuid(r: () => number): string {
  return `${hex(r, 8)}-${hex(r, 4)}-4${hex(r, 3)}-a${hex(r, 3)}-${hex(r, 12)}`;
}

const NAMESPACES = ["alpha", "team-a", "beta", "gamma"];
const APPS = ["web", "api", "worker", "cache", "batch"];

export interface PodOptions {
  readonly seed?: number;
  readonly resourceVersion?: string;
  /** Overrides the generated uid. */
  readonly uid?: string;
}

/** One pod as a plain object protobufjs can encode (keepCase field names). */
export function podObject(i: number, opts: PodOptions = {}): PlainObject {
  const r = rng((opts.seed ?? 1) * 1_000_003 + i);
  const app = APPS[i % APPS.length] ?? "web";
  const ns = NAMESPACES[i % NAMESPACES.length] ?? "alpha";
  const name = `${app}-${String(i).padStart(5, "0")}-${hex(r, 5)}`;
  const containers = 1 + Math.floor(r() * 3);
  const created = { seconds: 1_780_000_000 + i, nanos: 0 };
  const managed = JSON.stringify({
    "f:metadata": { "f:labels": { ".": {}, "f:app": {}, "f:tier": {}, "f:pod-index": {} }, "f:annotations": { ".": {}, "f:example.com/owner": {} } },
    "f:spec": {
      "f:containers": Object.fromEntries(
        Array.from({ length: containers }, (_, c) => [
          `k:{"name":"c${c}"}`,
          { ".": {}, "f:env": { ".": {}, 'k:{"name":"LOG_LEVEL"}': { ".": {}, "f:name": {}, "f:value": {} } }, "f:image": {}, "f:name": {}, "f:resources": {} },
        ]),
      ),
      "f:restartPolicy": {},
    },
  });
  return {
    metadata: {
      name,
      generateName: "",
      namespace: ns,
      uid: opts.uid ?? uuid(r),
      resourceVersion: opts.resourceVersion ?? String(1000 + i),
      generation: "1",
      creationTimestamp: created,
      labels: { app, tier: i % 2 === 0 ? "frontend" : "backend", "pod-index": String(i), "shard-test": "true" },
      annotations: {
        "example.com/owner": `team-${ns}`,
        "example.com/build": hex(r, 40),
        // What `kubectl apply` leaves behind: the bulk of many real pods' size.
        "kubectl.kubernetes.io/last-applied-configuration": JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace: ns }, note: hex(r, 200 + Math.floor(r() * 2200)) }),
      },
      ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: `${app}-${hex(r, 10)}`, uid: uuid(r), controller: true, blockOwnerDeletion: true }],
      managedFields: [
        { manager: "kube-controller-manager", operation: "Update", apiVersion: "v1", time: created, fieldsType: "FieldsV1", fieldsV1: { Raw: Buffer.from(managed) } },
        { manager: "kubelet", operation: "Update", apiVersion: "v1", time: created, fieldsType: "FieldsV1", fieldsV1: { Raw: Buffer.from('{"f:status":{"f:conditions":{},"f:phase":{}}}') }, subresource: "status" },
      ],
    },
    spec: {
      containers: Array.from({ length: containers }, (_, c) => ({
        name: `c${c}`,
        image: `registry.example.com/${app}/c${c}:v1.${Math.floor(r() * 40)}.${Math.floor(r() * 10)}`,
        args: ["--port=8080", `--shard=${i % 7}`],
        ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }],
        env: [
          { name: "LOG_LEVEL", value: "info" },
          { name: "POD_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } } },
          { name: "FEATURE_FLAGS", value: hex(r, 24) },
        ],
        resources: {
          limits: { cpu: { string: "500m" }, memory: { string: "256Mi" } },
          requests: { cpu: { string: "100m" }, memory: { string: "128Mi" } },
        },
        volumeMounts: [{ name: "config", mountPath: "/etc/app", readOnly: true }],
        readinessProbe: { handler: { httpGet: { path: "/healthz", port: { type: "0", intVal: 8080 }, scheme: "HTTP" } }, periodSeconds: 10 },
        terminationMessagePath: "/dev/termination-log",
        terminationMessagePolicy: "File",
        imagePullPolicy: "IfNotPresent",
      })),
      volumes: [{ name: "config", volumeSource: { configMap: { localObjectReference: { name: `${app}-config` }, defaultMode: 420 } } }],
      restartPolicy: "Always",
      terminationGracePeriodSeconds: "30",
      dnsPolicy: "ClusterFirst",
      serviceAccountName: "default",
      nodeName: `node-${Math.floor(r() * 50)}`,
      schedulerName: "default-scheduler",
      tolerations: [
        { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute", tolerationSeconds: "300" },
        { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute", tolerationSeconds: "300" },
      ],
      priority: 0,
      enableServiceLinks: true,
    },
    status: {
      phase: "Running",
      conditions: ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"].map((type) => ({ type, status: "True", lastTransitionTime: created })),
      hostIP: `10.0.${Math.floor(r() * 255)}.${Math.floor(r() * 255)}`,
      podIP: `10.244.${Math.floor(r() * 255)}.${Math.floor(r() * 255)}`,
      startTime: created,
      qosClass: "Burstable",
      containerStatuses: Array.from({ length: containers }, (_, c) => ({
        name: `c${c}`,
        state: { running: { startedAt: created } },
        ready: true,
        restartCount: 0,
        image: `registry.example.com/${app}/c${c}:v1`,
        imageID: `registry.example.com/${app}/c${c}@sha256:${hex(r, 64)}`,
        containerID: `containerd://${hex(r, 64)}`,
        started: true,
      })),
    },
  };
}

/** The pod's bytes without envelope (as a list item). */
export function podBytes(pb: K8sProto, i: number, opts: PodOptions = {}): Uint8Array {
  const T = pb.type("Pod");
  return T.encode(T.fromObject(podObject(i, opts))).finish();
}

export interface ListOptions extends PodOptions {
  readonly resourceVersion?: string;
  readonly continue?: string;
  readonly remainingItemCount?: number;
  /** Sets `metadata.shardInfo.selector`, as a gate-on server does. */
  readonly shardSelector?: string;
}

/** A whole `k8s\0` PodList body of `n` pods. */
export function podListBody(pb: K8sProto, n: number, opts: ListOptions = {}): Buffer {
  const T = pb.type("PodList");
  const items = Array.from({ length: n }, (_, i) => T.lookupType("Pod").fromObject(podObject(i, { seed: opts.seed ?? 1 })));
  const metadata: PlainObject = {
    resourceVersion: opts.resourceVersion ?? "123456",
    ...(opts.continue === undefined ? {} : { continue: opts.continue }),
    ...(opts.remainingItemCount === undefined ? {} : { remainingItemCount: String(opts.remainingItemCount) }),
    ...(opts.shardSelector === undefined ? {} : { shardInfo: { selector: opts.shardSelector } }),
  };
  const raw = T.encode(T.create({ metadata, items })).finish();
  return encodeEnvelope(pb, "v1", "PodList", raw);
}

/** `n` framed watch events (ADDED, MODIFIED, DELETED in turn) for distinct pods, resourceVersions rising. */
export function podWatchFrames(pb: K8sProto, n: number, opts: { seed?: number; firstResourceVersion?: number } = {}): Buffer[] {
  const types = ["ADDED", "MODIFIED", "DELETED"];
  const rv0 = opts.firstResourceVersion ?? 5000;
  return Array.from({ length: n }, (_, i) =>
    encodeEventFrame(pb, types[i % 3] ?? "ADDED", "v1", "Pod", podObject(i, { seed: opts.seed ?? 1, resourceVersion: String(rv0 + i) })),
  );
}
