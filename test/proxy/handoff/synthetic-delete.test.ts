/**
 * Narrowing without a relist (docs/rings.md): when a replica's ranges only
 * shrink, the proxy sends synthetic DELETED events for the delivered objects
 * leaving them, and the open watch carries on with the narrower ranges. A
 * real client-node informer sits behind the proxy; LIST requests are counted
 * at devapi, and the informer's cache is compared with the store.
 */
import t from "tap";
import { Watch } from "@kubernetes/client-node";
import { seedPods, startDevApi, type DevApi, type GateMode } from "../../../src/devapi/index.ts";
import { kubeConfigFor } from "../../../src/demo/replica.ts";
import { silentLogger } from "../../../src/log.ts";
import { MutableOwnership } from "../../../src/shard/ownership.ts";
import { startProxy } from "../../../src/proxy/run.ts";
import { SYNTHETIC_DELETE_ANNOTATION } from "../../../src/proxy/handoff/synthetic-delete.ts";
import { makeUpstream } from "../../../src/proxy/serving/upstream.ts";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, FULL_RANGE, shardRange, type Range } from "../../../src/shard/range.ts";
import { parseResources } from "../../../src/shard/spec.ts";
import { createLocalCa } from "../../../src/pki/ca.ts";
import { cacheContents, eventually, expectedShard, keyValue, startChurn, startCluster, type Cluster } from "../../support/cluster.ts";
import { until } from "../../support/wait.ts";

const NAMESPACES = ["alpha", "beta", "gamma"];

function podLists(c: Cluster): number {
  return c.api.stats.lists.get("pods") ?? 0;
}

async function exact(c: Cluster, ranges: readonly Range[], timeoutMs = 15_000): Promise<{ extra: string[]; missing: string[] }> {
  const r = c.replicas[0];
  if (r === undefined) throw new Error("no replica");
  const diff = (): { extra: string[]; missing: string[] } => {
    const want = expectedShard(c.api, ranges, "uid");
    const got = cacheContents(r);
    return { extra: [...got].filter((k) => !want.has(k)), missing: [...want].filter((k) => !got.has(k)) };
  };
  await eventually(() => {
    const d = diff();
    return d.extra.length === 0 && d.missing.length === 0;
  }, timeoutMs);
  return diff();
}

/**
 * Creates pods until one lands in `ranges`; returns it as `ns/name@uid`.
 * A watch delivers in order, so once this one reached a cache, every
 * earlier write did, and a relist the proxy forced before it was made.
 */
function sentinelIn(api: DevApi, ranges: readonly Range[], tag: string): string {
  for (let i = 0; ; i++) {
    const o = api.store.create("pods", { metadata: { name: `sentinel-${tag}-${i}`, namespace: NAMESPACES[0] }, spec: { containers: [{ name: "c", image: "x" }] } });
    if (contains(ranges, fnv1a64(keyValue(o, "uid")))) return `${o.metadata?.namespace}/${o.metadata?.name}@${o.metadata?.uid}`;
  }
}

async function metric(c: Cluster, name: string): Promise<number> {
  const m = await c.replicas[0]?.proxy.metrics.registry.getSingleMetric(name)?.get();
  return (m?.values ?? []).reduce((a, v) => a + v.value, 0);
}

for (const gate of ["on", "off"] as GateMode[]) {
  t.test(`gate ${gate}: a narrowing reaches the informer as DELETED events, with no LIST, and the generation is applied at once`, async (t) => {
    let own: MutableOwnership | undefined;
    const c = await startCluster({
      gate,
      replicas: 1,
      pods: 1500,
      namespaces: NAMESPACES,
      ownership: () => (own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] })),
    });
    t.teardown(() => c.stop());
    if (own === undefined) throw new Error("no ownership");
    const o = own;
    t.same(await exact(c, [FULL_RANGE]), { extra: [], missing: [] }, "the informer synced the whole keyspace");
    // The informer lists, then watches: wait for its watch before narrowing.
    t.ok(await eventually(() => c.api.stats.openWatches === 1, 5000), "the informer is watching");

    const half = [shardRange(0, 2)];
    const leaving = [...cacheContents(c.replicas[0] as never)].length - expectedShard(c.api, half, "uid").size;
    const lists0 = podLists(c);
    o.set({ generation: 2, ranges: half });
    t.same(o.applied, [2], "applied synchronously: nothing to relist");
    t.same(await exact(c, half), { extra: [], missing: [] }, "the cache dropped exactly the objects that left");
    t.equal(podLists(c), lists0, "no LIST");
    t.equal(await metric(c, "shardcar_proxy_synthetic_deletes_total"), leaving, `one synthetic DELETED per object that left (${leaving})`);
    t.equal(await metric(c, "shardcar_proxy_forced_relists_total"), 0, "no forced relist");
    t.equal(c.api.stats.openWatches, 1, "the same watch stays open");

    // Under churn: narrow again, then widen (which must relist).
    const churn = startChurn(t, c.api, { ratePerSec: 100, namespaces: NAMESPACES });
    await churn.reached(50);
    const quarter = [shardRange(0, 4)];
    o.set({ generation: 3, ranges: quarter });
    t.same(o.applied, [2, 3], "the second narrowing is applied at once too");
    await churn.reached(churn.ops() + 100);
    const sentinel = sentinelIn(c.api, quarter, "narrowed");
    await until("the sentinel reached the informer", () => cacheContents(c.replicas[0] as never).has(sentinel));
    const lists1 = podLists(c);
    t.equal(lists1, lists0, "still no LIST after a narrowing under churn");
    o.set({ generation: 4, ranges: half });
    t.ok(await eventually(() => o.applied.includes(4), 10_000), "a widening is applied once the informer relisted");
    t.ok(podLists(c) > lists1, "a widening relists");
    await churn.stop();
    t.same(await exact(c, half), { extra: [], missing: [] }, "exact after churn, narrowing and widening");
  });
}

t.test("with synthetic deletes off, a narrowing relists", async (t) => {
  let own: MutableOwnership | undefined;
  const c = await startCluster({ gate: "off", replicas: 1, pods: 600, namespaces: NAMESPACES, ownership: () => (own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] })) });
  t.teardown(() => c.stop());
  // startCluster's replica follows the sidecar's default; build one with the path off.
  await c.replicas[0]?.stop();
  const { startPodReplica } = await import("../../../src/demo/replica.ts");
  const o = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const r = await startPodReplica({ name: "off", upstreamUrl: c.api.url, resources: parseResources("pods"), ownership: o, logger: silentLogger(), syntheticDeletes: false });
  t.teardown(() => r.stop());
  t.ok(own, "the cluster's ownership existed");
  t.ok(await eventually(() => cacheContents(r).size === expectedShard(c.api, [FULL_RANGE], "uid").size && c.api.stats.openWatches >= 1, 10_000), "synced and watching");
  const lists0 = podLists(c);
  o.set({ generation: 2, ranges: [shardRange(1, 2)] });
  t.same(o.applied, [], "not applied before the relist");
  t.ok(await eventually(() => o.applied.includes(2), 10_000), "applied after the relist");
  t.ok(podLists(c) > lists0, "the narrowing cost a LIST");
  const want = expectedShard(c.api, [shardRange(1, 2)], "uid");
  t.ok(await eventually(() => cacheContents(r).size === want.size, 10_000), "the cache holds the narrower shard");
});

t.test("watch-list: a narrowing after the initial events sends DELETEDs at the stream's resourceVersion", async (t) => {
  const api = await startDevApi({ gate: "off", bookmarkIntervalMs: 200 });
  seedPods(api, { count: 800, namespaces: NAMESPACES });
  const ca = await createLocalCa("t", new Date(), 3600_000);
  const tls = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1"], now: new Date(), validityMs: 3600_000 });
  const own = new MutableOwnership({ generation: 1, ranges: [shardRange(0, 2)] });
  const proxy = await startProxy({
    listen: { host: "127.0.0.1", port: 0 },
    tls,
    upstream: makeUpstream(api.url),
    resources: parseResources("pods"),
    ownership: own,
    fallback: "filter",
    logger: silentLogger(),
    syntheticDeletes: true,
    bookmarkIntervalMs: 100,
  });
  const cache = new Map<string, string>();
  const deletes: Array<{ rv: string; annotated: boolean; kind: string | undefined }> = [];
  let lastRv = "";
  let synced = false;
  let errors = 0;
  const watch = new Watch(kubeConfigFor(proxy.url, "wl", ca.certPem));
  const ctl = await watch.watch(
    "/api/v1/pods",
    { sendInitialEvents: true, resourceVersionMatch: "NotOlderThan", allowWatchBookmarks: true },
    (type: string, obj: { kind?: string; metadata?: { uid?: string; name?: string; namespace?: string; resourceVersion?: string; annotations?: Record<string, string> } }) => {
      const m = obj.metadata ?? {};
      if (type === "ERROR") errors++;
      if (type === "ADDED" || type === "MODIFIED") cache.set(`${m.namespace}/${m.name}@${m.uid}`, m.resourceVersion ?? "");
      if (type === "DELETED") {
        cache.delete(`${m.namespace}/${m.name}@${m.uid}`);
        if (m.annotations?.[SYNTHETIC_DELETE_ANNOTATION] !== undefined) deletes.push({ rv: m.resourceVersion ?? "", annotated: true, kind: obj.kind });
      }
      if (synced && m.resourceVersion !== undefined) lastRv = m.resourceVersion;
      if (m.annotations?.["k8s.io/initial-events-end"] === "true") {
        synced = true;
        lastRv = m.resourceVersion ?? "";
      }
    },
    () => undefined,
  );
  t.teardown(async () => {
    ctl.abort();
    await proxy.close();
    await api.close();
  });
  t.ok(await eventually(() => synced, 10_000), "initial events through");
  const churn = startChurn(t, api, { ratePerSec: 100, namespaces: NAMESPACES });
  await churn.reached(50);
  const rvBefore = lastRv;
  const lists0 = api.stats.lists.get("pods") ?? 0;
  const watches0 = api.stats.watches.get("pods") ?? 0;
  own.set({ generation: 2, ranges: [shardRange(0, 4)] });
  t.same(own.applied, [2], "applied at once");
  await churn.reached(churn.ops() + 80);
  await churn.stop();
  const sentinel = sentinelIn(api, [shardRange(0, 4)], "narrowed");
  await until("the sentinel reached the watch", () => cache.has(sentinel));
  const want = [...expectedShard(api, [shardRange(0, 4)], "uid")];
  t.same([...cache.keys()].filter((k) => !want.includes(k)), [], "nothing outside the narrower range is left");
  t.same(want.filter((k) => !cache.has(k)), [], "everything inside it is there");
  t.ok(deletes.length > 100, `synthetic DELETEDs arrived (${deletes.length})`);
  t.ok(deletes.every((d) => d.kind === "Pod"), "typed as the stream's objects");
  t.ok(deletes.every((d) => Number(d.rv) >= Number(rvBefore)), "at the stream's resourceVersion, never older than what the client had");
  t.equal(errors, 0, "no ERROR event: the watch was not ended");
  t.equal(api.stats.lists.get("pods") ?? 0, lists0, "no LIST");
  t.equal(api.stats.watches.get("pods") ?? 0, watches0, "no new WATCH either");
});
