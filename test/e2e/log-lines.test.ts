/**
 * Every log record the manager and the proxy print is one JSON object with
 * no key twice: some log pipelines refuse or mangle a record whose key
 * repeats (`"component":"ring-coordinator","component":"ring-coordinator"`
 * was one), and JSON.parse hides it by keeping the last. A representative
 * run at debug level: the real `shardcar manager` (webhook, ring
 * coordinator) and `shardcar proxy --shards ring` processes, each with a
 * client-node controller behind it, through a join, a two-member ring and a
 * leave. Every other suite that runs proxy processes has their records
 * checked the same way when they stop (test/support/proxy-process.ts).
 */
import t from "tap";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../src/cli/main.ts";
import { seedPods } from "../../src/devapi/index.ts";
import { issueWebhookCertificates, webhookDnsNames } from "../../src/webhook/certs.ts";
import { NS, RingEnv } from "../ring/harness.ts";
import { captureIo } from "../support/cli.ts";
import { startController, type Controller } from "../support/controller.ts";
import { eventually } from "../support/wait.ts";
import { duplicateKeys, LogLines } from "../support/log-lines.ts";
import { ProxyProcess } from "../support/proxy-process.ts";

t.test("the scan sees what JSON.parse hides: a key twice in one object, and a record that does not parse", async (t) => {
  const line = '{"level":30,"component":"ring-coordinator","ring":{"name":"web","name":"web"},"component":"ring-coordinator","msg":"x"}';
  t.same(Object.keys(JSON.parse(line) as object), ["level", "component", "ring", "msg"], "JSON.parse keeps one of each");
  t.same(duplicateKeys(line), ["ring.name", "component"]);
  t.same(duplicateKeys('{"a":[{"b":1},{"b":2}],"s":"\\"a\\":1,\\"a\\":2"}'), [], "equal keys in sibling objects, and keys inside strings, are fine");
  const logs = new LogLines();
  logs.add('shardcar proxy listening on http://127.0.0.1:1\n{"a":1,"a":2}\n{"a":');
  logs.end();
  t.equal(logs.records, 2, "the human line is not a record");
  t.match(logs.problems(), [/^duplicate key "a"/, /^not JSON/]);
});

t.test("the manager and ring-mode proxies print no record with a repeated key, through a join, a ring of two and a leave", async (t) => {
  const env = await RingEnv.start("logs");
  t.teardown(() => env.api.close());
  seedPods(env.api, { count: 300, namespaces: ["alpha", "beta"] });
  const dir = mkdtempSync(join(tmpdir(), "shardcar-log-lines-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(kubeconfig, JSON.stringify({ "current-context": "c", contexts: [{ name: "c", context: { cluster: "devapi", user: "u" } }], clusters: [{ name: "devapi", cluster: { server: env.api.url } }], users: [{ name: "u", user: { token: "ring-test" } }] }));
  const certs = await issueWebhookCertificates(undefined, [...webhookDnsNames("shardcar-webhook", "shardcar-system"), "localhost"], new Date());
  writeFileSync(join(dir, "tls.crt"), certs["tls.crt"]);
  writeFileSync(join(dir, "tls.key"), certs["tls.key"]);

  const stopManager = new AbortController();
  const io = captureIo(stopManager.signal, { KUBECONFIG: kubeconfig, HOME: dir });
  const managerLogs = new LogLines();
  managerLogs.count(/"component":"ring-coordinator"/);
  io.io.stdout.on("data", (b: Buffer) => managerLogs.add(b));
  const manager = main(
    ["manager", "--image", "example.invalid/shardcar:test", "--cert-mode", "cert-manager", "--cert-dir", dir, "--webhook-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--namespace", NS, "--log-level", "debug"],
    io.io,
  );

  const members = new Map<string, { proxy: ProxyProcess; controller: Controller }>();
  const join_ = async (name: string): Promise<void> => {
    const proxy = await ProxyProcess.start({ name, upstream: env.api.url, resources: "pods", shards: "ring", args: ["--ring", env.ring, "--pod-name", name, "--pod-namespace", NS, "--kubeconfig", kubeconfig, "--log-level", "debug"] });
    const controller = await startController({ name, server: proxy.url, caPem: proxy.caPem, token: `controller-${name}`, awaitStart: false });
    members.set(name, { proxy, controller });
  };
  const committed = (names: string[]): boolean => {
    const st = env.ringStatus();
    return st?.pending === undefined && (st?.committed?.members ?? []).map((m) => m.name).sort().join(",") === names.join(",");
  };
  const records: Array<[string, ProxyProcess]> = [];
  const leave = async (name: string): Promise<void> => {
    const m = members.get(name);
    if (m === undefined) return;
    members.delete(name);
    records.push([name, m.proxy]);
    // stop() throws for a bad record; the assertions below say which.
    await m.proxy.stop().catch(() => undefined);
    await m.controller.stop();
  };
  t.teardown(async () => {
    for (const name of [...members.keys()]) await leave(name);
    stopManager.abort();
    await manager;
  });

  await join_("m-0");
  t.ok(await eventually(() => committed(["m-0"]), 60_000), "m-0 alone holds the ring");
  await join_("m-1");
  t.ok(await eventually(() => committed(["m-0", "m-1"]), 60_000), "the ring committed both members");
  t.ok(await eventually(() => [...members.values()].every((m) => m.controller.informer.list().length > 0), 60_000), "both controllers hold their shard");
  await leave("m-1");
  t.ok(await eventually(() => committed(["m-0"]), 60_000), "m-1 left the ring");
  await leave("m-0");
  stopManager.abort();
  t.equal(await manager, 0, "the manager stopped cleanly");
  managerLogs.end();

  t.same(managerLogs.problems(), [], `every manager record is JSON with each key once (${managerLogs.records} records)`);
  t.ok(managerLogs.matched(/"component":"ring-coordinator"/) > 0, "the ring coordinator's records are among them");
  for (const [name, proxy] of records) {
    t.same(proxy.logProblems(), [], `every record of proxy ${name} is JSON with each key once (${proxy.logRecords()} records)`);
    t.ok(proxy.logRecords() > 0, `proxy ${name} printed records`);
  }
});
