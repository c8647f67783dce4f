/**
 * Issue 8 (b): the real kubectl through a proxy in front of the real server:
 * `get pods -A` (a Table list) shows exactly the proxy's shard, and `--watch`
 * (one-row Table events, columnDefinitions only on the first) shows only
 * in-shard pods as real writes happen — and every one of them.
 */
import t, { type Test } from "tap";
import { execFile, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { shardRange, type Range } from "../../src/shard/range.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { pod } from "./support/dataset.ts";
import { kubeConfigFor, startRealProxy } from "./support/proxies.ts";
import { callJson, eventually, inShard, listAll, realApiEnv, type KubeObject } from "./support/realapi.ts";

const env = realApiEnv();
const server = { url: env.url, caPem: env.caPem, token: env.token };
const KUBECTL = spawnSync("sh", ["-c", "command -v kubectl"]).stdout.toString().trim();
const skip = KUBECTL === "" ? "kubectl not installed" : false;
const MINE: Range[] = [shardRange(1, 3)];

async function setup(t: Test) {
  // TLS to the proxy too: kubectl sends no bearer token over plain HTTP.
  const lane = await startRealProxy(env, { resources: parseResources("pods"), ranges: MINE, tls: true });
  t.teardown(() => lane.proxy.close());
  const dir = mkdtempSync(join(tmpdir(), "shardcar-kubectl-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(kubeconfig, kubeConfigFor(lane.proxy.url, env.token, lane.target.caPem ?? "").exportConfig(), { mode: 0o600 });
  return { lane, args: ["--kubeconfig", kubeconfig] };
}

const nsName = (o: KubeObject): string => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;

t.test(`gate ${env.gate}: kubectl get pods -A through the proxy shows exactly the proxy's shard`, { skip }, async (t) => {
  const { args, lane } = await setup(t);
  const { items } = await listAll(server, "/api/v1/pods");
  const expected = items.filter((o) => inShard(o, MINE, "uid")).map(nsName).sort();
  const r = await promisify(execFile)(KUBECTL, [...args, "get", "pods", "-A", "--no-headers"], { encoding: "utf8", maxBuffer: 64 << 20 });
  const shown = r.stdout.trim().split("\n").filter((l) => l.trim() !== "").map((l) => l.trim().split(/\s+/).slice(0, 2).join("/")).sort();
  t.same(shown, expected, `${expected.length} of ${items.length} pods, exactly the shard`);
  t.ok(expected.length > 50 && expected.length < items.length, "the shard is a real, proper subset");
  const st = lane.proxy.proxy.stats().get("pods");
  t.equal(st?.lists, 1, "kubectl's list went through the sharded path");
  // A Table never carries shardInfo, so the proxy always scans it.
  t.equal(st?.lastVerdict, env.gate === "on" ? "inferred" : "no", `verdict for a Table list with the gate ${env.gate}`);
});

t.test(`gate ${env.gate}: kubectl get pods -A --watch through the proxy shows only in-shard pods as they change, and all of them`, { skip }, async (t) => {
  const { args } = await setup(t);
  const { items } = await listAll(server, "/api/v1/pods");
  const initial = items.filter((o) => inShard(o, MINE, "uid")).map(nsName);
  const child = spawn(KUBECTL, [...args, "get", "pods", "-A", "--watch", "--no-headers"], { stdio: ["ignore", "pipe", "pipe"] });
  t.teardown(() => {
    child.kill("SIGKILL");
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr.on("data", (b: Buffer) => (err += b.toString()));
  const rows = (): string[] => out.split("\n").filter((l) => l.trim() !== "").map((l) => l.trim().split(/\s+/).slice(0, 2).join("/"));
  t.ok(await eventually(() => initial.every((k) => rows().includes(k)), 15_000), `the initial list arrived (${initial.length} pods)`);
  const tag = Date.now().toString(36);
  const created: KubeObject[] = [];
  for (let i = 0; i < 40; i++) {
    const ns = i % 2 === 0 ? "alpha" : "beta";
    created.push(await callJson(server, "POST", `/api/v1/namespaces/${ns}/pods`, pod(`watch-${tag}-${i}`, ns, i)));
  }
  const inNew = created.filter((o) => inShard(o, MINE, "uid")).map(nsName);
  t.ok(inNew.length > 0 && inNew.length < created.length, `some new pods are in the shard (${inNew.length}/${created.length}) and some are not`);
  t.ok(await eventually(() => inNew.every((k) => rows().includes(k)), 15_000), "every new in-shard pod appeared");
  const before = rows().length;
  for (const o of created) await callJson(server, "DELETE", `/api/v1/namespaces/${o.metadata?.namespace ?? ""}/pods/${o.metadata?.name ?? ""}`);
  t.ok(await eventually(() => rows().length >= before + inNew.length, 15_000), "every in-shard deletion was shown");
  // Then sentinels until one is in the shard: kubectl prints events in
  // order, so once it shows, every earlier event was printed or dropped,
  // out-of-shard ones included (not a 500 ms sleep hoping so).
  const sentinels: KubeObject[] = [];
  t.teardown(async () => {
    for (const o of sentinels) await callJson(server, "DELETE", `/api/v1/namespaces/${o.metadata?.namespace ?? ""}/pods/${o.metadata?.name ?? ""}`).catch(() => undefined);
  });
  while (!sentinels.some((o) => inShard(o, MINE, "uid"))) sentinels.push(await callJson(server, "POST", "/api/v1/namespaces/alpha/pods", pod(`sentinel-${tag}-${sentinels.length}`, "alpha", sentinels.length)));
  const sentinel = nsName(sentinels[sentinels.length - 1] as KubeObject);
  t.ok(await eventually(() => rows().includes(sentinel), 15_000), "the sentinel appeared");
  const inShardNames = new Set([...items, ...created, ...sentinels].filter((o) => inShard(o, MINE, "uid")).map(nsName));
  const outside = rows().filter((k) => !inShardNames.has(k));
  t.same(outside, [], "no out-of-shard pod was ever shown");
  t.equal(err.trim(), "", "kubectl wrote no error");
});
