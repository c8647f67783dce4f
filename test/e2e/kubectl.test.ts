/**
 * Issue 2, acceptance (b): the real kubectl, through a proxy, shows only that
 * proxy's shard — `get pods -A` (a Table list) and `--watch` (Table watch
 * events, one row each, columnDefinitions only on the first).
 */
import t from "tap";
import { execFile, spawn, spawnSync } from "node:child_process";
import { promisify } from "node:util";
import { startDevApi, seedPods } from "../../src/devapi/index.ts";
import { silentLogger } from "../../src/log.ts";
import { StaticOwnership } from "../../src/shard/ownership.ts";
import { startProxy } from "../../src/proxy/run.ts";
import { makeUpstream } from "../../src/proxy/serving/upstream.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, shardRange } from "../../src/shard/range.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { eventually } from "../support/cluster.ts";

const KUBECTL = spawnSync("sh", ["-c", "command -v kubectl"]).stdout.toString().trim();

async function setup(t: { teardown(fn: () => Promise<void>): void }, gate: "on" | "off") {
  const api = await startDevApi({ gate });
  seedPods(api, { count: 400, namespaces: 4 });
  const mine = [shardRange(1, 3)];
  const proxy = await startProxy({
    listen: { host: "127.0.0.1", port: 0 },
    upstream: makeUpstream(api.url),
    resources: parseResources("pods"),
    ownership: new StaticOwnership(mine),
    fallback: "filter",
    logger: silentLogger(),
  });
  t.teardown(async () => {
    await proxy.close();
    await api.close();
  });
  const inShard = (ns: string, name: string): boolean => {
    const o = api.store.get("pods", ns, name);
    return o !== undefined && contains(mine, fnv1a64(o.metadata?.uid ?? ""));
  };
  const expected = api.store.list("pods").filter((o) => contains(mine, fnv1a64(o.metadata?.uid ?? ""))).map((o) => `${o.metadata?.namespace}/${o.metadata?.name}`).sort();
  const args = ["--kubeconfig", "/dev/null", "--server", proxy.url, "--token", "kubectl-token"];
  return { api, proxy, inShard, expected, args };
}

for (const gate of ["on", "off"] as const) {
  t.test(`kubectl get pods -A shows exactly the proxy's shard (gate ${gate})`, { skip: KUBECTL === "" ? "kubectl not installed" : false }, async (t) => {
    const { expected, args, api } = await setup(t, gate);
    // Async: the proxy and devapi run in this process and must keep serving.
    const r = await promisify(execFile)(KUBECTL, [...args, "get", "pods", "-A", "--no-headers"], { encoding: "utf8" });
    const shown = r.stdout.trim().split("\n").map((l) => l.trim().split(/\s+/).slice(0, 2).join("/")).sort();
    t.same(shown, expected, `${expected.length} of ${api.store.count("pods")} pods`);
    const table = api.stats.requests.find((q) => q.url.startsWith("/api/v1/pods?"));
    t.match(table?.url ?? "", /shardSelector=/, "the proxy added the selector to kubectl's list");
  });

  t.test(`kubectl get pods -A --watch shows only in-shard pods as they change (gate ${gate})`, { skip: KUBECTL === "" ? "kubectl not installed" : false }, async (t) => {
    const { api, args, inShard, expected } = await setup(t, gate);
    const child = spawn(KUBECTL, [...args, "get", "pods", "-A", "--watch", "--no-headers"], { stdio: ["ignore", "pipe", "pipe"] });
    t.teardown(() => child.kill("SIGKILL"));
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    const lines = (): string[][] => out.trim().split("\n").filter((l) => l.trim() !== "").map((l) => l.trim().split(/\s+/));
    t.ok(await eventually(() => lines().length >= expected.length), "initial list arrived");
    const created: string[] = [];
    for (let i = 0; i < 40; i++) {
      const o = api.store.create("pods", { metadata: { name: `late-${i}`, namespace: "ns-0" }, spec: { containers: [{ name: "c", image: "x" }] } });
      created.push(`${o.metadata?.namespace}/${o.metadata?.name}`);
    }
    const wantNew = created.filter((k) => inShard(...(k.split("/") as [string, string])));
    t.ok(wantNew.length > 0 && wantNew.length < created.length, "some new pods are in the shard and some are not");
    // Then in-shard sentinels until one lands: kubectl prints events in
    // order, so once the last sentinel shows, every earlier event has been
    // printed or dropped, out-of-shard ones included.
    let sentinel = "";
    for (let i = 0; sentinel === "" || !inShard(...(sentinel.split("/") as [string, string])); i++) {
      const o = api.store.create("pods", { metadata: { name: `sentinel-${i}`, namespace: "ns-0" }, spec: { containers: [{ name: "c", image: "x" }] } });
      sentinel = `${o.metadata?.namespace}/${o.metadata?.name}`;
    }
    const seen = (): Set<string> => new Set(lines().map((c) => `${c[0]}/${c[1]}`));
    t.ok(await eventually(() => seen().has(sentinel)), "the sentinel appeared");
    t.same(wantNew.filter((k) => !seen().has(k)), [], "every new in-shard pod appeared before it");
    const outside = [...seen()].filter((k) => !inShard(...(k.split("/") as [string, string])));
    t.same(outside, [], "no out-of-shard pod was ever shown");
  });
}
