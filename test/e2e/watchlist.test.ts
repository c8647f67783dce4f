/**
 * Watch-list (sendInitialEvents=true), the way client-go 0.36 informers start,
 * through the proxy with client-node's real Watch client: the initial events
 * are filtered, the initial-events-end bookmark always passes, no synthetic
 * bookmark comes before it, and the cache built from the stream ends exact
 * after churn — gate on, off and mixed.
 */
import t from "tap";
import { Watch } from "@kubernetes/client-node";
import { seedPods, startDevApi, type GateMode } from "../../src/devapi/index.ts";
import { kubeConfigFor } from "../../src/demo/replica.ts";
import { silentLogger } from "../../src/log.ts";
import { StaticOwnership } from "../../src/shard/ownership.ts";
import { startProxy } from "../../src/proxy/run.ts";
import { makeUpstream } from "../../src/proxy/serving/upstream.ts";
import { shardRange } from "../../src/shard/range.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { createLocalCa } from "../../src/pki/ca.ts";
import { eventually, expectedShard, startChurn } from "../support/cluster.ts";

interface Obj {
  metadata?: { uid?: string; name?: string; namespace?: string; resourceVersion?: string; annotations?: Record<string, string> };
}

for (const gate of ["on", "off", "mixed"] as GateMode[]) {
  t.test(`watch-list through the proxy (gate ${gate}): the cache built from the stream is exactly the shard`, async (t) => {
    const api = await startDevApi({ gate, bookmarkIntervalMs: 200 });
    seedPods(api, { count: 1500, namespaces: ["alpha", "beta", "gamma"] });
    const ca = await createLocalCa("t", new Date(), 3600_000);
    const tls = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1"], now: new Date(), validityMs: 3600_000 });
    const mine = [shardRange(1, 3)];
    const proxy = await startProxy({
      listen: { host: "127.0.0.1", port: 0 },
      tls,
      upstream: makeUpstream(api.url),
      resources: parseResources("pods"),
      ownership: new StaticOwnership(mine),
      fallback: "filter",
      logger: silentLogger(),
      bookmarkIntervalMs: 100,
    });
    const cache = new Map<string, string>();
    const log: Array<{ type: string; rv: number; end: boolean }> = [];
    let synced = false;
    const watch = new Watch(kubeConfigFor(proxy.url, "wl", ca.certPem));
    const ctl = await watch.watch(
      "/api/v1/pods",
      { sendInitialEvents: true, resourceVersionMatch: "NotOlderThan", allowWatchBookmarks: true },
      (type: string, obj: Obj) => {
        const m = obj.metadata ?? {};
        const end = m.annotations?.["k8s.io/initial-events-end"] === "true";
        log.push({ type, rv: Number(m.resourceVersion), end });
        if (type === "ADDED" || type === "MODIFIED") cache.set(`${m.namespace}/${m.name}`, m.uid ?? "");
        if (type === "DELETED") cache.delete(`${m.namespace}/${m.name}`);
        if (end) synced = true;
      },
      () => undefined,
    );
    t.teardown(async () => {
      ctl.abort();
      await proxy.close();
      await api.close();
    });
    t.ok(await eventually(() => synced, 10_000), "the initial-events-end bookmark arrived");
    const churn = startChurn(t, api, { ratePerSec: 150, namespaces: ["alpha", "beta", "gamma"], seed: 3 });
    await churn.reached(225);
    await churn.stop();
    const want = (): Set<string> => new Set([...expectedShard(api, mine, "uid")].map((k) => k.split("@")[0] ?? ""));
    const exact = (): boolean => {
      const w = want();
      return w.size === cache.size && [...cache.keys()].every((k) => w.has(k));
    };
    t.ok(await eventually(exact, 10_000), `the cache holds exactly the shard (${cache.size} of ${api.store.count("pods")})`);
    const endAt = log.findIndex((e) => e.end);
    t.notOk(log.slice(0, endAt).some((e) => e.type === "BOOKMARK"), "no bookmark before initial-events-end");
    const after = log.slice(endAt + 1).filter((e) => e.type === "BOOKMARK").map((e) => e.rv);
    t.ok(after.every((rv, i) => i === 0 || rv >= (after[i - 1] ?? 0)), "bookmark resourceVersions never go back");
    if (gate === "off") t.ok((proxy.proxy.stats().get("pods")?.syntheticBookmarks ?? 0) > 0, "dropped events became synthetic bookmarks");
  });
}
