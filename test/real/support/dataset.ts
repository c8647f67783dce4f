/**
 * The objects the real-server lane works on, and how to create them. Seeded
 * once by `test/real/seed.ts` after the first start (gate on); the gate-off
 * run restarts the server on the same etcd data, so both see the same objects.
 *
 * realapi has no namespace lifecycle: namespaced objects may be created in a
 * namespace that does not exist. The Namespace objects are created anyway, as
 * on a real cluster.
 */
import { callJson, HttpError, inParallel, sleep, type KubeObject, type Target } from "./realapi.ts";

/** Two of these hash into each third of the keyspace, so namespace keying spreads over three shards. */
export const NAMESPACES = ["alpha", "beta", "gamma", "delta", "team-a", "team-b"] as const;
export const PODS = 300;
export const CONFIGMAPS = 120;
export const WIDGETS = 150;

export const WIDGET = { group: "example.com", version: "v1", plural: "widgets", kind: "Widget" } as const;
export const WIDGETS_PATH = `/apis/${WIDGET.group}/${WIDGET.version}/${WIDGET.plural}`;

export function pod(name: string, namespace: string, i: number): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, labels: { app: `demo-${i % 5}`, tier: i % 2 === 0 ? "web" : "batch", "shard-test": "true" }, annotations: { "example.com/note": `pod ${i}` } },
    spec: { containers: [{ name: "main", image: "registry.example/app:1", ports: [{ containerPort: 8080 }], env: [{ name: "INDEX", value: String(i) }] }] },
  };
}

export function configMap(name: string, namespace: string, i: number): KubeObject {
  return { apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace, labels: { "shard-test": "true", app: `demo-${i % 5}` } }, data: { index: String(i) } };
}

export function lease(name: string, namespace: string): KubeObject {
  return { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name, namespace }, spec: { holderIdentity: `${name}-holder`, leaseDurationSeconds: 15 } };
}

export function widget(name: string, namespace: string, i: number): KubeObject {
  return { apiVersion: `${WIDGET.group}/${WIDGET.version}`, kind: WIDGET.kind, metadata: { name, namespace, labels: { "shard-test": "true" } }, spec: { size: i, color: ["red", "green", "blue"][i % 3] } };
}

export const WIDGET_CRD: KubeObject = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: `${WIDGET.plural}.${WIDGET.group}` },
  spec: {
    group: WIDGET.group,
    scope: "Namespaced",
    names: { plural: WIDGET.plural, singular: "widget", kind: WIDGET.kind, listKind: `${WIDGET.kind}List` },
    versions: [
      {
        name: WIDGET.version,
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: { spec: { type: "object", properties: { size: { type: "integer" }, color: { type: "string" } } } },
          },
        },
      },
    ],
  },
};

/** Creates `obj` at `collection`; an existing object (409) is fine, so seeding is idempotent. Returns whether it was created. */
export async function ensure(target: Target, collection: string, obj: KubeObject): Promise<boolean> {
  try {
    await callJson(target, "POST", collection, obj);
    return true;
  } catch (e) {
    if (!(e instanceof HttpError) || e.status !== 409) throw e;
    return false;
  }
}

/** Installs a CRD and waits until its resource is served (a list answers 200). */
export async function installCrd(target: Target, crd: KubeObject, collectionPath: string, timeoutMs = 30_000): Promise<void> {
  await ensure(target, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
  await waitServed(target, collectionPath, timeoutMs);
}

/**
 * Waits until a collection answers 200. Right after a start, the first
 * custom-resource list may be 429 "storage is (re)initializing" (recorded in
 * the transcripts), and a new CRD takes a moment to be established.
 */
export async function waitServed(target: Target, collectionPath: string, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < end) {
    try {
      await callJson(target, "GET", `${collectionPath}?limit=1`);
      return;
    } catch (e) {
      last = e instanceof Error ? e.message : String(e);
    }
    await sleep(200);
  }
  throw new Error(`${collectionPath} not served after ${timeoutMs} ms: ${last}`);
}

/** Seeds the lane's data set. Idempotent: on a restart it only checks that everything is there and served. */
export async function seed(target: Target): Promise<{ created: number; existing: number }> {
  let created = 0;
  let existing = 0;
  const jobs: Array<[string, KubeObject]> = [];
  for (const ns of NAMESPACES) jobs.push(["/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } }]);
  for (let i = 0; i < PODS; i++) {
    const ns = NAMESPACES[i % NAMESPACES.length] ?? "alpha";
    jobs.push([`/api/v1/namespaces/${ns}/pods`, pod(`pod-${String(i).padStart(3, "0")}`, ns, i)]);
  }
  for (let i = 0; i < CONFIGMAPS; i++) {
    const ns = NAMESPACES[i % NAMESPACES.length] ?? "alpha";
    jobs.push([`/api/v1/namespaces/${ns}/configmaps`, configMap(`cm-${String(i).padStart(3, "0")}`, ns, i)]);
  }
  for (const ns of NAMESPACES) jobs.push([`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`, lease(`leader-${ns}`, ns)]);
  await inParallel(jobs, 8, async ([path, obj]) => {
    if (await ensure(target, path, obj)) created++;
    else existing++;
  });
  await installCrd(target, WIDGET_CRD, WIDGETS_PATH);
  const widgets: Array<[string, KubeObject]> = [];
  for (let i = 0; i < WIDGETS; i++) {
    const ns = NAMESPACES[i % NAMESPACES.length] ?? "alpha";
    widgets.push([`/apis/${WIDGET.group}/${WIDGET.version}/namespaces/${ns}/${WIDGET.plural}`, widget(`widget-${String(i).padStart(3, "0")}`, ns, i)]);
  }
  await inParallel(widgets, 8, async ([path, obj]) => {
    if (await ensure(target, path, obj)) created++;
    else existing++;
  });
  return { created, existing };
}
