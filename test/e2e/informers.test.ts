/**
 * Issue 2, acceptance (a): three real @kubernetes/client-node informers, each
 * behind its own proxy with shards 0/3, 1/3, 2/3, against devapi with 3,000
 * pods in 6 namespaces, under create/update/delete churn. Once churn stops
 * every cache must equal exactly the pods whose key hashes into its range,
 * and the caches together must hold every pod — with the gate on, off, and
 * mixed, and once more keyed by namespace.
 */
import t from "tap";
import type { GateMode } from "../../src/devapi/index.ts";
import type { ShardKey } from "../../src/shard/selector.ts";
import { cacheContents, eventually, expectedShard, startChurn, startCluster } from "../support/cluster.ts";

// Two namespaces hash into each third of the keyspace, so namespace keying
// spreads pods over all three replicas.
const NAMESPACES = ["alpha", "beta", "gamma", "delta", "team-a", "team-b"];

const SCENARIOS: Array<{ gate: GateMode; key: ShardKey }> = [
  { gate: "on", key: "uid" },
  { gate: "off", key: "uid" },
  { gate: "mixed", key: "uid" },
  { gate: "on", key: "namespace" },
];

for (const { gate, key } of SCENARIOS) {
  t.test(`gate ${gate}, keyed by ${key}: each informer caches exactly its shard after churn`, async (t) => {
    const cluster = await startCluster({ gate, key, replicas: 3, pods: 3000, namespaces: NAMESPACES });
    t.teardown(() => cluster.stop());
    const churn = startChurn(t, cluster.api, { ratePerSec: 200, namespaces: NAMESPACES, seed: 17 });
    await churn.reached(500);
    t.comment(`churn made ${await churn.stop()} writes while the informers watched`);

    const exact = (): boolean => cluster.replicas.every((r, i) => setsEqual(cacheContents(r), expectedShard(cluster.api, cluster.ranges[i] ?? [], key)));
    const settled = await eventually(exact, 15_000);
    const all = new Set(cluster.api.store.list("pods").map((o) => `${o.metadata?.namespace}/${o.metadata?.name}@${o.metadata?.uid}`));
    const union = new Set<string>();
    cluster.replicas.forEach((r, i) => {
      const got = cacheContents(r);
      const want = expectedShard(cluster.api, cluster.ranges[i] ?? [], key);
      t.same(diff(got, want), { missing: [], extra: [] }, `replica ${i} holds exactly its shard (${want.size} pods)`);
      t.ok(want.size > 500, `replica ${i}'s shard is a real share of the pods`);
      for (const k of got) union.add(k);
    });
    t.ok(settled, "caches converged");
    t.equal(union.size, all.size, "the caches together hold every pod");
    t.ok(setsEqual(union, all), "and nothing else");
    const verdicts = cluster.replicas.map((r) => r.proxy.proxy.stats().get("pods")?.lastVerdict);
    if (gate === "off") t.ok(verdicts.every((v) => v === "no"), `gate off: every proxy fell back to filtering (${verdicts.join(",")})`);
    if (gate === "on") t.ok(verdicts.every((v) => v === "confirmed"), `gate on: every list was confirmed by shardInfo (${verdicts.join(",")})`);
    const tokens = new Set(cluster.api.stats.requests.filter((q) => q.url.startsWith("/api/v1/pods")).map((q) => q.authorization));
    t.same([...tokens].sort(), ["Bearer controller-token-0", "Bearer controller-token-1", "Bearer controller-token-2"], "each proxy forwarded its controller's own token, and only that");
  });
}

function setsEqual(a: Set<string>, b: Set<string>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}

function diff(got: Set<string>, want: Set<string>): { missing: string[]; extra: string[] } {
  return { missing: [...want].filter((x) => !got.has(x)).slice(0, 5), extra: [...got].filter((x) => !want.has(x)).slice(0, 5) };
}
