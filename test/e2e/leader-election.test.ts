/**
 * Issue 5, acceptance 4: three replicas of a controller with leader election
 * on lease `demo-lock` all lead — each its own renamed lock — behind their
 * proxies with `--leader-election leases/demo-lock`. Without it, only one does.
 */
import t from "tap";
import { startDevApi } from "../../src/devapi/index.ts";
import { kubeConfigFor } from "../../src/demo/replica.ts";
import { silentLogger } from "../../src/log.ts";
import { parseLockSpec } from "../../src/settings/lock.ts";
import { StaticOwnership } from "../../src/shard/ownership.ts";
import { startProxy } from "../../src/proxy/run.ts";
import { makeUpstream } from "../../src/proxy/serving/upstream.ts";
import { shardRange } from "../../src/shard/range.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { createLocalCa } from "../../src/pki/ca.ts";
import { startElector, type Elector } from "../support/elector.ts";
import { until } from "../support/wait.ts";

for (const renamed of [true, false]) {
  t.test(renamed ? "with leader-election renaming every replica leads its own shard's lock" : "without it only one replica leads", async (t) => {
    const api = await startDevApi({ gate: "on" });
    const ca = await createLocalCa("test", new Date(), 3600_000);
    const tls = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1"], now: new Date(), validityMs: 3600_000 });
    const electors: Elector[] = [];
    const closers: Array<() => Promise<void>> = [];
    t.teardown(async () => {
      electors.forEach((e) => e.stop());
      await Promise.all(closers.map((c) => c()));
      await api.close();
    });
    for (let i = 0; i < 3; i++) {
      const proxy = await startProxy({
        listen: { host: "127.0.0.1", port: 0 },
        tls,
        upstream: makeUpstream(api.url),
        resources: parseResources("pods"),
        ownership: new StaticOwnership([shardRange(i, 3)]),
        fallback: "filter",
        logger: silentLogger(),
        ...(renamed ? { lock: { spec: parseLockSpec("leases/demo-lock"), identity: String(i) } } : {}),
      });
      closers.push(() => proxy.close());
      electors.push(startElector(kubeConfigFor(proxy.url, `ctl-${i}`, ca.certPem), { namespace: "team-a", lock: "demo-lock", identity: `replica-${i}`, leaseSeconds: 15, retryMs: 100 }));
    }
    // Two attempts each: by its second, every elector has seen the lock it
    // competes for held (by itself or another), however slowly it started.
    await until("every elector's second attempt", () => electors.every((e) => e.attempts() >= 2));
    const leaders = electors.filter((e) => e.isLeader()).map((e) => e.identity);
    const leases = api.store.list("leases.coordination.k8s.io", { namespace: "team-a" }).map((l) => [l.metadata?.name, (l["spec"] as { holderIdentity?: string }).holderIdentity]);
    if (renamed) {
      t.same(leaders.sort(), ["replica-0", "replica-1", "replica-2"], "all three lead");
      t.same(leases.sort(), [["demo-lock-0", "replica-0"], ["demo-lock-1", "replica-1"], ["demo-lock-2", "replica-2"]], "each holds its own renamed lock");
    } else {
      t.equal(leaders.length, 1, `exactly one leads (${leaders.join(",")})`);
      t.same(leases.map((l) => l[0]), ["demo-lock"], "one shared lock");
    }
  });
}
