/**
 * A proxy that shards parents (`gizmos`, uid) and their owner-keyed children
 * (`configmaps=owner`) with ownership that changes: what the controller's
 * two informers see, in the order they see it. When the proxy gains a
 * range, every gained child reaches the controller before its parent; when
 * it loses one, every lost parent leaves before its children. (Both at once
 * would let a controller create a child again: test/e2e/colocation-*.)
 */
import t from "tap";
import { makeInformer, type KubernetesObject } from "@kubernetes/client-node";
import { startReplicaProxy } from "../../src/demo/replica.ts";
import { startDevApi } from "../../src/devapi/index.ts";
import { silentLogger } from "../../src/log.ts";
import { MutableOwnership } from "../../src/shard/ownership.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, FULL_RANGE, shardRange, type Range } from "../../src/shard/range.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { eventually } from "../support/cluster.ts";
import { CONFIGMAPS, controllerRef, resourceClient, type ResourceRef } from "../../src/demo/kube-resources.ts";
import { uuid } from "../support/proto/pods.ts";
import { rng } from "../support/rng.ts";

const GIZMOS: ResourceRef = { group: "coloc.example.com", version: "v1", plural: "gizmos", kind: "Gizmo" };
const NS = "staged";
const FAMILIES = 200;

interface Seen {
  readonly resource: "parent" | "child";
  readonly type: "add" | "delete";
  /** The family: the parent's uid. */
  readonly family: string;
}

t.test("owner-keyed children move before their parents on a gain, after them on a loss", async (t) => {
  const api = await startDevApi({ gate: "on" });
  t.teardown(() => api.close());
  api.registerResource({ group: GIZMOS.group, version: GIZMOS.version, resource: GIZMOS.plural, kind: GIZMOS.kind, namespaced: true, encoding: "unstructured" });
  api.store.create("namespaces", { metadata: { name: NS } });
  const random = rng(5);
  for (let i = 0; i < FAMILIES; i++) {
    const p = api.store.create({ group: GIZMOS.group, version: GIZMOS.version, resource: GIZMOS.plural }, { apiVersion: "coloc.example.com/v1", kind: "Gizmo", metadata: { name: `g-${i}`, namespace: NS, uid: uuid(random) }, spec: {} });
    api.store.create("configmaps", { metadata: { name: `g-${i}-c`, namespace: NS, uid: uuid(random), ownerReferences: [{ apiVersion: "coloc.example.com/v1", kind: "Gizmo", name: `g-${i}`, uid: p.metadata?.uid ?? "", controller: true }] } });
  }
  const own = new MutableOwnership({ generation: 1, ranges: [shardRange(0, 2)] });
  const { proxy, kubeConfig } = await startReplicaProxy({ name: "staged", upstreamUrl: api.url, resources: parseResources("gizmos.coloc.example.com, configmaps=owner"), ownership: own, syntheticDeletes: true, logger: silentLogger() });
  t.teardown(() => proxy.close());

  const seen: Seen[] = [];
  const informers = ([["parent", GIZMOS], ["child", CONFIGMAPS]] as const).map(([resource, ref]) => {
    const api = resourceClient(kubeConfig, ref);
    const inf = makeInformer(kubeConfig, api.path, () => api.list());
    const family = (o: KubernetesObject): string => (resource === "parent" ? (o.metadata?.uid ?? "") : (controllerRef(o)?.uid ?? ""));
    inf.on("add", (o) => seen.push({ resource, type: "add", family: family(o) }));
    // A synthetic DELETED is a stub without ownerReferences: its family is known from what was added.
    const families = new Map<string, string>();
    inf.on("add", (o) => families.set(o.metadata?.uid ?? "", family(o)));
    inf.on("delete", (o) => seen.push({ resource, type: "delete", family: families.get(o.metadata?.uid ?? "") ?? "" }));
    return inf;
  });
  t.teardown(() => Promise.all(informers.map((i) => i.stop())));
  await Promise.all(informers.map((i) => i.start()));

  const families = (ranges: readonly Range[]): Set<string> => new Set(api.store.list({ group: GIZMOS.group, version: GIZMOS.version, resource: GIZMOS.plural }).map((p) => p.metadata?.uid ?? "").filter((uid) => contains(ranges, fnv1a64(uid))));
  const cached = (which: 0 | 1): Set<string> => new Set(informers[which]?.list().map((o) => (which === 0 ? (o.metadata?.uid ?? "") : (controllerRef(o)?.uid ?? ""))));
  const exact = (ranges: readonly Range[]): boolean => [0, 1].every((w) => sameSet(cached(w as 0 | 1), families(ranges)));
  t.ok(await eventually(() => exact([shardRange(0, 2)]), 10_000), "both caches start with the families of the first half");

  // Whether, for every family in `moved`, its `first` event came before its `second` one.
  const order = (from: number, type: Seen["type"], first: Seen["resource"], moved: ReadonlySet<string>): string[] => {
    const at = new Map<string, number>();
    const late: string[] = [];
    seen.slice(from).forEach((e, i) => {
      if (e.type !== type || !moved.has(e.family)) return;
      if (e.resource === first) at.set(e.family, i);
      else if (!at.has(e.family)) late.push(e.family);
    });
    return late;
  };

  const gained = families([shardRange(1, 2)]);
  const before = seen.length;
  const requestsBefore = api.stats.requests.length;
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  t.ok(await eventually(() => own.applied.includes(2) && exact([FULL_RANGE]), 15_000), "gain: generation 2 applied with every family in both caches");
  t.ok(gained.size > 50, `premise: ${gained.size} families gained`);
  t.same(order(before, "add", "child", gained), [], "every gained child reached the controller before its parent");
  const since = api.stats.requests.slice(requestsBefore);
  const first = (verb: "list" | "watch", resource: string): number => since.findIndex((q) => q.served?.verb === verb && q.served.resource === resource);
  t.ok(first("watch", "configmaps") >= 0 && first("watch", "configmaps") < first("list", "gizmos.coloc.example.com"), "the parents' relist went upstream only once the children's informer was watching again (its cache rebuilt)");

  const lost = families([shardRange(0, 2)]);
  const stats = (r: string) => ({ ...proxy.proxy.stats().get(r) });
  const [parentsBefore, childrenBefore] = [stats("gizmos.coloc.example.com"), stats("configmaps")];
  const mark = seen.length;
  own.set({ generation: 3, ranges: [shardRange(1, 2)] });
  t.ok(await eventually(() => own.applied.includes(3) && exact([shardRange(1, 2)]), 15_000), "loss: generation 3 applied with only the second half's families cached");
  t.same(order(mark, "delete", "parent", lost), [], "every lost parent left the controller's cache before its children");
  const [parentsAfter, childrenAfter] = [stats("gizmos.coloc.example.com"), stats("configmaps")];
  t.ok((parentsAfter.forcedRelists ?? 0) > (parentsBefore.forcedRelists ?? 0), "the parents relisted (the relist is how the proxy knows they left the cache)");
  t.same([childrenAfter.narrowedWatches, childrenAfter.lists], [(childrenBefore.narrowedWatches ?? 0) + 1, childrenBefore.lists], "the children narrowed in place, without a relist");
});

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}
