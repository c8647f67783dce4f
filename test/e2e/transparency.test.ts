/**
 * Issue 4, the transparency e2e: an unmodified in-cluster client, wired only
 * by what the webhook's patch writes, sees exactly its shard.
 *
 * The pod spec is patched by the real webhook code; the sidecar runs as its
 * own process with the args and env the patch produces (the kubelet's part,
 * resolving the downward API and setting the real service address, is played
 * by this test); the files the patch mounts are laid out in a temp dir; and a
 * real @kubernetes/client-node client does `loadFromCluster(<that dir>)` with
 * TLS verification on. Then the token rotates, and the next client's request
 * carries the new one.
 */
import t from "tap";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CoreV1Api, KubeConfig, makeInformer, type V1Pod } from "@kubernetes/client-node";
import jsonpatch from "fast-json-patch";
import { seedPods, startDevApi } from "../../src/devapi/index.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, shardRange } from "../../src/shard/range.ts";
import { defaultInjectorConfig } from "../../src/webhook/config.ts";
import { decideInjection } from "../../src/webhook/decide.ts";
import type { JsonObject } from "../../src/webhook/json.ts";
import { buildInjectionPatch } from "../../src/webhook/patch.ts";
import { createLocalCa } from "../../src/pki/ca.ts";
import { eventually } from "../support/cluster.ts";

const BIN = fileURLToPath(new URL("../../src/cli/bin.ts", import.meta.url));
const SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath?: string } };
}
interface Container {
  name: string;
  args?: string[];
  env?: EnvVar[];
}

function atomicWrite(path: string, content: string): void {
  writeFileSync(`${path}.tmp`, content);
  renameSync(`${path}.tmp`, path);
}

t.test("an unmodified in-cluster client behind the injected sidecar sees exactly its shard, and picks up a rotated token", async (t) => {
  const now = new Date();
  const clusterCa = await createLocalCa("cluster CA", now, 3600_000);
  const apiTls = await clusterCa.issue({ commonName: "apiserver", names: ["127.0.0.1", "localhost"], now, validityMs: 3600_000 });
  const api = await startDevApi({ gate: "off", tls: apiTls, requireToken: true });
  t.teardown(() => api.close());
  seedPods(api, { count: 600, namespaces: ["alpha", "beta", "gamma"] });

  // 1. The webhook patches a real-looking pod.
  const proxyPort = await freePort();
  const adminPort = await freePort();
  const pod: JsonObject = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "ctrl-1", namespace: "team-a", labels: { "shardcar.io/inject": "true" }, annotations: { "shardcar.io/resources": "pods", "shardcar.io/shards": "1/3" } },
    spec: {
      serviceAccountName: "ctrl",
      containers: [{ name: "manager", image: "example.invalid/ctrl:1", args: ["--leader-elect=false"] }],
    },
  };
  const config = { ...defaultInjectorConfig("shardcar:test"), proxyPort, adminPort };
  const decision = decideInjection(pod, config, { namespace: "team-a" });
  if (!("inject" in decision) || !decision.inject) {
    t.fail(`the pod was not injected: ${JSON.stringify(decision)}`);
    return;
  }
  const patched = jsonpatch.applyPatch(structuredClone(pod), buildInjectionPatch(pod, decision.plan), true, false).newDocument as unknown as {
    spec: { initContainers: Container[]; containers: Container[] };
  };
  const sidecar = patched.spec.initContainers.find((c) => c.name === "shardcar-proxy");
  const app = patched.spec.containers.find((c) => c.name === "manager");
  t.ok(sidecar !== undefined && app !== undefined, "the patch adds the sidecar and keeps the app");
  if (sidecar === undefined || app === undefined) return;

  // 2. The kubelet's part: the real SA files for the sidecar, the emptyDir for
  // the app (at the path the patch mounts it), the downward API, and the real
  // service address in the sidecar's environment.
  const root = mkdtempSync(join(tmpdir(), "shardcar-transparency-"));
  const realSa = join(root, "sidecar-sa");
  const appRoot = join(root, "app");
  const shared = join(appRoot, SA_PATH);
  mkdirSync(realSa, { recursive: true });
  mkdirSync(shared, { recursive: true });
  atomicWrite(join(realSa, "token"), "sa-token-1");
  atomicWrite(join(realSa, "namespace"), "team-a");
  atomicWrite(join(realSa, "ca.crt"), clusterCa.certPem);
  const args = [...(sidecar.args ?? [])];
  const saAt = args.indexOf("--sa-dir");
  t.ok(saAt >= 0, "the sidecar is told where the emptyDir is");
  args[saAt + 1] = shared;
  args.push("--real-sa-dir", realSa, "--log-level", "warn");
  const fieldValues: Record<string, string> = { "metadata.name": "ctrl-1", "metadata.namespace": "team-a" };
  const sidecarEnv: Record<string, string> = { PATH: process.env.PATH ?? "", KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: String(api.port) };
  for (const e of sidecar.env ?? []) sidecarEnv[e.name] = e.value ?? fieldValues[e.valueFrom?.fieldRef?.fieldPath ?? ""] ?? "";
  t.equal(sidecarEnv.POD_NAMESPACE, "team-a", "POD_NAMESPACE comes from the downward API");

  const child = spawn(process.execPath, [BIN, ...args], { env: sidecarEnv, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  t.teardown(() => {
    child.kill("SIGTERM");
  });
  // A process start under load: the guard is generous, it only names what never happened.
  const ready = await eventually(async () => (await fetch(`http://127.0.0.1:${adminPort}/readyz`).then((r) => r.status, () => 0)) === 200, 120_000, 100);
  t.ok(ready, `the sidecar reports ready once the files exist ${stderr}`);
  t.equal(readFileSync(join(shared, "token"), "utf8"), "sa-token-1", "the app's token is the real one");
  t.match(readFileSync(join(shared, "ca.crt"), "utf8"), clusterCa.certPem.trim(), "ca.crt bundles the cluster CA (after the pod CA)");

  // 3. The app: nothing but in-cluster config, with the env the patch set.
  const appEnv = Object.fromEntries((app.env ?? []).map((e) => [e.name, e.value ?? ""]));
  t.same(appEnv, { KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: String(proxyPort) }, "the app is pointed at the loopback proxy");
  const loadInCluster = (): KubeConfig => {
    const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
    Object.assign(process.env, appEnv);
    try {
      const kc = new KubeConfig();
      kc.loadFromCluster(appRoot);
      return kc;
    } finally {
      if (saved.host === undefined) delete process.env.KUBERNETES_SERVICE_HOST;
      else process.env.KUBERNETES_SERVICE_HOST = saved.host;
      if (saved.port === undefined) delete process.env.KUBERNETES_SERVICE_PORT;
      else process.env.KUBERNETES_SERVICE_PORT = saved.port;
    }
  };
  const kc = loadInCluster();
  t.equal(kc.getCurrentCluster()?.skipTLSVerify, false, "TLS verification stays on");
  t.equal(kc.getCurrentCluster()?.server, `https://127.0.0.1:${proxyPort}`);
  const core = kc.makeApiClient(CoreV1Api);
  const informer = makeInformer<V1Pod>(kc, "/api/v1/pods", () => core.listPodForAllNamespaces());
  const informerErrors: unknown[] = [];
  informer.on("error", (e) => informerErrors.push(e));
  await informer.start();
  t.teardown(() => informer.stop());
  const mine = [shardRange(1, 3)];
  const want = new Set(api.store.list("pods").filter((o) => contains(mine, fnv1a64(o.metadata?.uid ?? ""))).map((o) => o.metadata?.uid));
  const exact = (): boolean => {
    const got = informer.list().map((o) => o.metadata?.uid);
    return got.length === want.size && got.every((u) => want.has(u));
  };
  t.ok(await eventually(exact, 10_000), `the informer holds exactly shard 1/3 (${want.size} of ${api.store.count("pods")} pods); errors: ${informerErrors.map(String).join("; ")}`);
  t.ok(api.stats.requests.some((r) => r.url.startsWith("/api/v1/pods") && r.authorization === "Bearer sa-token-1"), "the apiserver saw the pod's own token, forwarded");

  // 4. The kubelet rotates the projected token.
  atomicWrite(join(realSa, "token"), "sa-token-2");
  t.ok(await eventually(() => readFileSync(join(shared, "token"), "utf8") === "sa-token-2", 5000), "the sidecar refreshed the app's token file");
  const before = api.stats.requests.length;
  const fresh = loadInCluster().makeApiClient(CoreV1Api);
  const list = await fresh.listNamespacedPod({ namespace: "alpha" });
  t.ok(list.items.length > 0, "the next request succeeds");
  const next = api.stats.requests.slice(before).find((r) => r.url.startsWith("/api/v1/namespaces/alpha/pods"));
  t.equal(next?.authorization, "Bearer sa-token-2", "and carries the rotated token");
});
