/**
 * Issue 13 §1: with `pods=owner`, children land on the replica of their
 * uid-keyed parent. Three replicas, each a real client-node informer on
 * configmaps (the parents, `uid`) and one on pods (the children, `owner`)
 * behind its own proxy with shards i/3, gate on and off, with parents and
 * children created and deleted while the informers run. Every cache must
 * be exactly its shard, and every cached child's parent must sit in the
 * same replica. The negative control keys the children by `uid`: the same
 * check then finds children split from their parents.
 */
import t, { type Test } from "tap";
import { startDevApi, type DevApi, type GateMode, type KubeObject } from "../../src/devapi/index.ts";
import { StaticOwnership } from "../../src/shard/ownership.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, split, type Range } from "../../src/shard/range.ts";
import { controllerOwnerUid, keyValue, type ResourceKey } from "../../src/shard/slots.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { eventually } from "../support/cluster.ts";
import { objectId, startInformedReplica, type InformedReplica } from "../support/informed-replica.ts";
import { uuid } from "../support/proto/pods.ts";
import { rng } from "../support/rng.ts";

const NAMESPACES = ["team-a", "team-b", "team-c"];

interface World {
  readonly api: DevApi;
  readonly random: () => number;
  parents: number;
  pods: number;
}

/** A parent ConfigMap, and `children` pods it controls (plus, sometimes, a pod that only refers to it). */
function family(w: World, children: number): void {
  const ns = NAMESPACES[w.parents % NAMESPACES.length] ?? "team-a";
  const parent = w.api.store.create("configmaps", { metadata: { name: `parent-${w.parents++}`, namespace: ns, uid: uuid(w.random) }, data: { k: "v" } });
  const owner = { apiVersion: "v1", kind: "ConfigMap", name: parent.metadata?.name ?? "", uid: parent.metadata?.uid ?? "" };
  for (let c = 0; c < children; c++) {
    w.api.store.create("pods", { metadata: { name: `child-${w.pods++}`, namespace: ns, uid: uuid(w.random), ownerReferences: [{ ...owner, controller: true, blockOwnerDeletion: true }] }, spec: { containers: [{ name: "c", image: "x" }] } });
  }
  if (w.random() < 0.2) {
    // Not a controller reference: follows its own uid.
    w.api.store.create("pods", { metadata: { name: `referrer-${w.pods++}`, namespace: ns, uid: uuid(w.random), ownerReferences: [{ ...owner, controller: false }] }, spec: { containers: [{ name: "c", image: "x" }] } });
  }
}

function orphan(w: World): void {
  w.api.store.create("pods", { metadata: { name: `orphan-${w.pods++}`, namespace: NAMESPACES[w.pods % NAMESPACES.length] ?? "team-a", uid: uuid(w.random) }, spec: { containers: [{ name: "c", image: "x" }] } });
}

/** Deletes a parent and every pod it controls, as the garbage collector would. */
function removeFamily(api: DevApi, parent: KubeObject): void {
  const uid = parent.metadata?.uid;
  for (const p of api.store.list("pods")) if (controllerOwnerUid(p.metadata ?? {}) === uid) api.store.delete("pods", p.metadata?.namespace, p.metadata?.name ?? "");
  api.store.delete("configmaps", parent.metadata?.namespace, parent.metadata?.name ?? "");
}

function expected(api: DevApi, resource: "pods" | "configmaps", key: ResourceKey, ranges: readonly Range[]): Set<string> {
  return new Set(
    api.store
      .list(resource)
      .filter((o) => contains(ranges, fnv1a64(keyValue(o.metadata ?? {}, key) ?? "")))
      .map((o) => objectId(o)),
  );
}

/** Children cached by a replica whose parent that replica does not cache. */
function splitChildren(api: DevApi, replicas: readonly InformedReplica[]): string[] {
  const parentOf = new Map(api.store.list("pods").map((p) => [objectId(p), controllerOwnerUid(p.metadata ?? {})]));
  const out: string[] = [];
  for (const r of replicas) {
    const parents = new Set([...r.cache("configmaps")].map((id) => id.slice(id.indexOf("@") + 1)));
    for (const child of r.cache("pods")) {
      const p = parentOf.get(child);
      if (p !== undefined && !parents.has(p)) out.push(child);
    }
  }
  return out;
}

async function run(t: Test, gate: GateMode, childKey: "owner" | "uid"): Promise<{ replicas: InformedReplica[]; api: DevApi }> {
  const api = await startDevApi({ gate });
  for (const ns of NAMESPACES) api.store.create("namespaces", { metadata: { name: ns } });
  const w: World = { api, random: rng(gate === "on" ? 3 : 4), parents: 0, pods: 0 };
  for (let i = 0; i < 300; i++) family(w, 1 + (i % 2));
  for (let i = 0; i < 60; i++) orphan(w);
  const ranges = split(3).map((r) => [r]);
  const resources = parseResources(`configmaps, pods${childKey === "owner" ? "=owner" : ""}`);
  const replicas: InformedReplica[] = [];
  t.teardown(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await api.close();
  });
  for (let i = 0; i < 3; i++) {
    replicas.push(await startInformedReplica({ name: `r${i}`, upstreamUrl: api.url, resources, ownership: new StaticOwnership(ranges[i] ?? []), informed: ["configmaps", "pods"] }));
  }
  // Families come and go while the informers watch.
  for (let i = 0; i < 60; i++) family(w, 1);
  for (const parent of api.store.list("configmaps").slice(0, 30)) removeFamily(api, parent);
  for (let i = 0; i < 10; i++) orphan(w);
  const exact = (): boolean =>
    replicas.every((r, i) => same(r.cache("configmaps"), expected(api, "configmaps", "uid", ranges[i] ?? [])) && same(r.cache("pods"), expected(api, "pods", childKey, ranges[i] ?? [])));
  t.ok(await eventually(exact, 20_000), "every cache converged to exactly its shard");
  const union = new Set(replicas.flatMap((r) => [...r.cache("pods")]));
  t.equal(union.size, api.store.list("pods").length, "the caches together hold every pod once");
  return { replicas, api };
}

function same(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}

for (const gate of ["on", "off"] as const) {
  t.test(`gate ${gate}: children keyed by owner are cached by their parent's replica`, async (t) => {
    const { replicas, api } = await run(t, gate, "owner");
    const children = replicas.reduce((n, r) => n + [...r.cache("pods")].filter((id) => id.includes("/child-")).length, 0);
    t.ok(children > 300, `premise: ${children} children cached`);
    t.same(splitChildren(api, replicas), [], "no child is cached apart from its parent");
    const podLists = api.stats.requests.filter((q) => q.url.startsWith("/api/v1/pods") && !q.url.includes("watch="));
    t.ok(podLists.length >= 3 && podLists.every((q) => !q.url.includes("shardSelector")), "no shardSelector is sent for the owner-keyed pods");
    const verdicts = replicas.map((r) => [r.proxy.proxy.stats().get("pods")?.lastVerdict, r.proxy.proxy.stats().get("configmaps")?.lastVerdict]);
    t.same(
      verdicts,
      replicas.map(() => ["proxy", gate === "on" ? "confirmed" : "no"]),
      "pods: filtered by the proxy by design; configmaps: by the server when the gate is on",
    );
    const metrics = await (await fetch(`${replicas[0]?.proxy.adminUrl ?? ""}/metrics`)).text();
    t.match(metrics, /shardcar_proxy_server_filtered_total\{resource="pods",verdict="proxy"\} [1-9]/, "/metrics says the proxy filtered the owner-keyed pods");
  });
}

t.test("negative control: children keyed by uid are split from their parents", async (t) => {
  const { replicas, api } = await run(t, "on", "uid");
  const split = splitChildren(api, replicas);
  t.ok(split.length > 100, `${split.length} children cached apart from their parents: the co-location check can fail`);
});
