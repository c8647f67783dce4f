/**
 * `shardcar audit --canary` with real controller replicas (client-node
 * informers behind proxies): one canary lands in each range, the owning
 * proxy reports it delivered, the canaries are deleted afterwards; a replica
 * whose controller stopped watching fails its canary.
 */
import t from "tap";
import { CANARY_LABEL } from "../../src/ops/canary.ts";
import { MutableOwnership, StaticOwnership } from "../../src/shard/ownership.ts";
import type { ShardKey } from "../../src/shard/selector.ts";
import { startCluster } from "../support/cluster.ts";
import { until } from "../support/wait.ts";
import { cli, kubeconfigFile } from "./support.ts";

interface CanaryJson {
  ok: boolean;
  created: number;
  uncovered: string[];
  results: { target: string; expectedBy: string[]; seenBy: string[]; leakedTo: string[]; latencyMs?: number }[];
}

for (const key of ["uid", "namespace"] as ShardKey[]) {
  t.test(`keyed by ${key}: every range's canary is delivered by exactly its owner, and removed afterwards`, async (t) => {
    const cluster = await startCluster({ gate: "on", key, replicas: 3, pods: 300, namespaces: ["alpha", "beta", "gamma", "delta", "team-a", "team-b"] });
    t.teardown(() => cluster.stop());
    const admin = cluster.replicas.flatMap((r, i) => ["--admin-url", `${i}=${r.proxy.adminUrl ?? ""}`]);
    const resource = key === "uid" ? "pods" : "pods=namespace";
    const r = await cli(["audit", "--kubeconfig", kubeconfigFile(cluster.api.url), "--resource", resource, "--shards", "3", "--canary", "--json", ...admin]);
    t.equal(r.code, 0, r.err);
    const canary = (JSON.parse(r.out) as { canary: CanaryJson }).canary;
    t.ok(canary.ok);
    t.same(canary.results.map((c) => c.target).sort(), ["0/3", "1/3", "2/3"], "one canary per range");
    for (const c of canary.results) {
      t.same(c.seenBy, [c.target], `${c.target}'s canary was delivered by ${c.target}`);
      t.same(c.leakedTo, [], "and by no other replica");
    }
    const left = cluster.api.store.list("pods").filter((p) => p.metadata?.labels?.[CANARY_LABEL] !== undefined);
    t.same(left, [], "no canary is left behind");
    if (key === "namespace") t.equal(cluster.api.store.list("namespaces").filter((n) => n.metadata?.name?.startsWith("shardcar-canary-")).length, 0, "nor a canary namespace");
    else t.ok(canary.created >= 3, `${canary.created} objects created to place 3 canaries`);
  });
}

t.test("a replica whose proxy enforces other ranges than its owner should fails its canary (exit 1)", async (t) => {
  // Replica 1's proxy drops its range (as a member with stale ranges would):
  // the lists still add up, because the audit lists with the owners' own
  // selectors; only the canary shows that replica 1's controller gets nothing.
  const mutable = new MutableOwnership({ generation: 0, ranges: [] });
  const cluster = await startCluster({ gate: "off", replicas: 3, pods: 90, namespaces: ["default"], ownership: (i, ranges) => (i === 1 ? ((mutable.set({ generation: 1, ranges }), mutable)) : new StaticOwnership(ranges)) });
  t.teardown(() => cluster.stop());
  mutable.set({ generation: 2, ranges: [] });
  const admin = cluster.replicas.flatMap((r, i) => ["--admin-url", `${i}=${r.proxy.adminUrl ?? ""}`]);
  const r = await cli(["audit", "--kubeconfig", kubeconfigFile(cluster.api.url), "--resource", "pods", "--shards", "3", "--canary", "--canary-timeout", "2s", ...admin]);
  t.equal(r.code, 1);
  t.match(r.out, /1\/3: default\/shardcar-canary-\S+ \(hash 0x[0-9a-f]{16}\) — NOT delivered by 1\/3/);
  t.match(r.out, /0\/3: .* — delivered by 0\/3 in \d+ ms/);
  t.match(r.out, /^canaries: NOT OK$/m);
  t.match(r.out, /^OK: the sum equals the total/m, "the list audit itself is fine: only the canary shows what replica 1 really delivers");
});

t.test("an owner with no admin URL cannot confirm its canary", async (t) => {
  const cluster = await startCluster({ gate: "on", replicas: 2, pods: 20, namespaces: ["default"] });
  t.teardown(() => cluster.stop());
  const r = await cli(["audit", "--kubeconfig", kubeconfigFile(cluster.api.url), "--resource", "pods", "--shards", "2", "--canary", "--canary-timeout", "1s", "--admin-url", `0=${cluster.replicas[0]?.proxy.adminUrl ?? ""}`]);
  t.equal(r.code, 1);
  t.match(r.out, /NOT delivered by 1\/2 \(could not ask: 1\/2: no --admin-url for 1\/2\)/);
});

t.test("a replica whose controller stopped watching fails its canary, though the lists add up", async (t) => {
  const cluster = await startCluster({ gate: "on", replicas: 2, pods: 40, namespaces: ["default"] });
  t.teardown(() => cluster.stop());
  await until("both informers watching", () => cluster.api.stats.openWatches === 2);
  await cluster.replicas[0]?.informer.stop();
  // Its watch has ended at devapi (a stop is no error: the replica does not restart it).
  await until("the stopped informer's watch ended", () => cluster.api.stats.openWatches === 1);
  const admin = cluster.replicas.flatMap((r, i) => ["--admin-url", `${i}=${r.proxy.adminUrl ?? ""}`]);
  const r = await cli(["audit", "--kubeconfig", kubeconfigFile(cluster.api.url), "--resource", "pods", "--shards", "2", "--canary", "--canary-timeout", "2s", ...admin]);
  t.equal(r.code, 1);
  t.match(r.out, /0\/2: .* — NOT delivered by 0\/2/);
  t.match(r.out, /1\/2: .* — delivered by 1\/2/);
  t.match(r.out, /^OK: the sum equals the total/m);
});
