/**
 * A client-go 0.36 informer controller (test/support/client-go/, built
 * offline with the kit's Go toolchain) behind a shardcar proxy over verified
 * TLS, with client-go's own defaults: protobuf for built-in kinds, watch-list
 * (the proxy sees a watch and no LIST), the dynamic client for a custom
 * resource. Its cache must hold exactly the proxy's shard, computed here
 * from the server's unsharded list, before and after real churn; with the
 * gate off the proxy is what makes it so.
 */
import t from "tap";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { shardRange, type Range } from "../../src/shard/range.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { buildClientGoController, startClientGoController, writeKubeconfig, type ClientGoController } from "../support/client-go-controller.ts";
import { WIDGET, WIDGETS_PATH } from "./support/dataset.ts";
import { churnPods, startRealProxy, type LaneProxy } from "./support/proxies.ts";
import { eventually, expectedShard, realApiEnv, setDiff, setsEqual } from "./support/realapi.ts";

const env = realApiEnv();
const server = { url: env.url, caPem: env.caPem, token: env.token };
const MINE: Range[] = [shardRange(1, 3)];

const built = await buildClientGoController();
// A missing toolchain skips, with the reason; it never passes.
const skip = built.ok ? false : `client-go controller not built: ${built.reason}`;
const binary = built.ok ? built.binary : "";
const dir = mkdtempSync(join(tmpdir(), "shardcar-client-go-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** The proxy in front of one controller, and the controller's kubeconfig for it. */
const behindProxy = async (resources: string, name: string): Promise<{ lane: LaneProxy; kubeconfig: string }> => {
  const lane = await startRealProxy(env, { resources: parseResources(resources), ranges: MINE, tls: true });
  const caFile = join(dir, `${name}-ca.pem`);
  writeFileSync(caFile, lane.target.caPem ?? "");
  return { lane, kubeconfig: writeKubeconfig(dir, lane.proxy.url, caFile, env.token, `${name}.kubeconfig`) };
};
const cacheOf = async (c: ClientGoController): Promise<Set<string>> => new Set((await c.objects()).items.map((o) => `${o.key}@${o.uid}`));

const cases = [
  { resource: "pods", path: "/api/v1/pods", proxied: "pods", churn: true },
  { resource: "configmaps", path: "/api/v1/configmaps", proxied: "configmaps", churn: false },
  { resource: `${WIDGET.group}/${WIDGET.version}/${WIDGET.plural}`, path: WIDGETS_PATH, proxied: `${WIDGET.plural}.${WIDGET.group}`, churn: false },
] as const;

for (const c of cases) {
  t.test(`gate ${env.gate}: a client-go informer for ${c.resource} behind a 1/3 proxy caches exactly its shard`, { skip }, async (t) => {
    const { lane, kubeconfig } = await behindProxy(c.proxied, c.resource.replaceAll("/", "-"));
    t.teardown(() => lane.proxy.close());
    const ctl = await startClientGoController({ binary, kubeconfig, resource: c.resource });
    t.teardown(() => ctl.stop());
    const synced = await eventually(async () => (await ctl.status()).synced, 30_000, 100);
    t.ok(synced, `the informer synced through the proxy${synced ? "" : `; stderr:\n${ctl.stderr()}`}`);
    if (c.churn) {
      const churn = await churnPods(server, { ms: 2000, seed: 23, concurrency: 4 });
      t.equal(churn.errors, 0, `every churn write succeeded (${churn.ops})`);
    }
    const want = await expectedShard(server, c.path, MINE, "uid");
    t.ok(want.size >= 20, `the shard is a real share of the ${c.resource} (${want.size})`);
    await eventually(async () => setsEqual(await cacheOf(ctl), want), 20_000, 200);
    t.same(setDiff(await cacheOf(ctl), want), { missing: [], extra: [] }, `the cache holds exactly the ${want.size} objects of shard 1/3`);
    const stats = lane.proxy.proxy.stats().get(c.proxied);
    if (c.resource === "pods") {
      // client-go 0.36 defaults to watch-list for typed informers: its
      // initial state comes as watch events, not as a LIST.
      t.equal(stats?.lists, 0, "watch-list: the informer never LISTed");
      t.ok((stats?.watches ?? 0) >= 1, "it opened a watch with initial events");
      // Its watch is still open: the metrics must already count what it streamed.
      const watchSample = async (m: typeof lane.proxy.metrics.upstreamBytes): Promise<number> => (await m.get()).values.find((v) => v.labels["class"] === "watch" && v.labels["resource"] === "pods")?.value ?? 0;
      const active = (await lane.proxy.metrics.activeWatches.get()).values.reduce((n, v) => n + v.value, 0);
      t.ok(active >= 1, "the informer's watch is still open");
      const upstream = await watchSample(lane.proxy.metrics.upstreamBytes);
      const toClient = await watchSample(lane.proxy.metrics.clientBytes);
      t.ok(toClient > 0 && upstream >= toClient, `shardcar_proxy_upstream_bytes_total and client_bytes_total count the open watch-list (${upstream} and ${toClient} bytes)`);
    }
    if (env.gate === "off") t.ok((stats?.itemsDropped ?? 0) + (stats?.eventsDropped ?? 0) > 0, "gate off: the proxy dropped what is outside the shard");
  });
}
