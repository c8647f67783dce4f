/**
 * `shardcar proxy --shards ring` as a process: it joins the ring with its
 * own identity (a kubeconfig's token, or the pod's service-account token
 * file) over verified TLS, reports ready once it holds its member Lease, and
 * never loads `@kubernetes/client-node` for it (P6: idle RSS).
 */
import t, { type Test } from "tap";
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { get } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { LEASES, startDevApi, type DevApi } from "../../src/devapi/index.ts";
import { createLocalCa } from "../../src/pki/ca.ts";
import { until } from "../support/wait.ts";

const CHILD = fileURLToPath(new URL("../support/proxy-child.ts", import.meta.url));
const TOKEN = "sidecar-own-token";

interface Env {
  readonly api: DevApi;
  readonly dir: string;
  readonly caFile: string;
}

async function tlsApi(t: Test, token = TOKEN): Promise<Env> {
  const now = new Date();
  const ca = await createLocalCa("proxy-ring-test", now, 3600_000);
  const leaf = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1"], now, validityMs: 3600_000 });
  const api = await startDevApi({ tls: leaf, requireToken: token });
  const dir = mkdtempSync(join(tmpdir(), "shardcar-proxy-ring-"));
  t.teardown(async () => {
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const caFile = join(dir, "ca.crt");
  writeFileSync(caFile, ca.certPem);
  writeFileSync(join(dir, "token"), `${token}\n`);
  return { api, dir, caFile };
}

function readyz(port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = get({ host: "127.0.0.1", port, path: "/readyz", timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", () => resolve(0));
    req.on("timeout", () => req.destroy());
  });
}

/** Runs the proxy child until /readyz answers 200, calls `whileReady`, then stops it; returns what it reported. */
async function runUntilReady(t: Test, args: string[], env: NodeJS.ProcessEnv, whileReady: (output: string) => unknown = () => {}): Promise<{ code: number; clientNode: string[]; output: string }> {
  const lines: string[] = [];
  const child: ChildProcess = fork(CHILD, args, { env, stdio: ["ignore", "pipe", "pipe", "ipc"] });
  for (const s of [child.stdout, child.stderr]) s?.on("data", (b: Buffer) => lines.push(b.toString()));
  t.teardown(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  const done = new Promise<{ code: number; clientNode: string[] }>((resolve, reject) => {
    child.on("message", (m: { type?: string; code: number; clientNode: string[] }) => m.type === "done" && resolve(m));
    child.once("exit", (code) => reject(new Error(`proxy exited (${code}) without reporting:\n${lines.join("")}`)));
  });
  void done.catch(() => {});
  // A process start under load: generous guards, which only name what never happened.
  const adminPort = (): number | undefined => {
    const m = /"admin":"http:\/\/127\.0\.0\.1:(\d+)"/.exec(lines.join(""));
    return m === null ? undefined : Number(m[1]);
  };
  const withOutput = (e: unknown): never => {
    throw new Error(`${e instanceof Error ? e.message : String(e)}:\n${lines.join("")}`);
  };
  await until(`a "proxy ready" line`, () => adminPort() !== undefined || child.exitCode !== null, 120_000).catch(withOutput);
  const admin = adminPort();
  if (admin === undefined) withOutput("the proxy exited before it was ready");
  else await until("readiness", async () => (await readyz(admin)) === 200, 120_000, 50).catch(withOutput);
  await whileReady(lines.join(""));
  child.send({ type: "stop" });
  return { ...(await done), output: lines.join("") };
}

const COMMON = ["--resources", "pods", "--shards", "ring", "--ring", "r", "--pod-namespace", "ns", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"];

function leaseHolders(api: DevApi): string[] {
  return api.store.list(LEASES, { namespace: "ns" }).map((l) => String((l["spec"] as { holderIdentity?: string } | undefined)?.holderIdentity));
}

t.test("--kubeconfig (YAML, CA file and token file): ready once the Lease is held, with the kubeconfig's token, and client-node never loads", async (t) => {
  const e = await tlsApi(t);
  const kubeconfig = join(e.dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    `apiVersion: v1
kind: Config
current-context: sidecar
contexts:
- name: sidecar
  context: {cluster: devapi, user: sidecar}
clusters:
- name: devapi
  cluster:
    server: ${e.api.url}
    certificate-authority: ca.crt
users:
- name: sidecar
  user:
    tokenFile: token
`,
  );
  const seenHolders: string[] = [];
  const r = await runUntilReady(t, ["--kubeconfig", kubeconfig, "--pod-name", "p-0", ...COMMON], { ...process.env, KUBECONFIG: undefined }, () => seenHolders.push(...leaseHolders(e.api)));
  t.equal(r.code, 0, "exits cleanly when stopped");
  t.same(r.clientNode, [], "@kubernetes/client-node was never resolved");
  t.match(seenHolders, [/^p-0\//], "it held its member Lease while ready");
  const own = e.api.stats.requests.filter((q) => q.url.includes("/leases"));
  t.ok(own.length >= 2, "it read and wrote its Lease");
  t.ok(
    own.every((q) => q.authorization === `Bearer ${TOKEN}`),
    "every Lease call carried the sidecar's own token",
  );
  t.notMatch(r.output, new RegExp(TOKEN), "the token is in no log line");
  t.same(leaseHolders(e.api), [], "and it deleted the Lease when it left");
});

t.test("in a pod without --kubeconfig: the service-account CA and token file, against KUBERNETES_SERVICE_HOST", async (t) => {
  const e = await tlsApi(t);
  const port = new URL(e.api.url).port;
  const r = await runUntilReady(t, ["--real-sa-dir", e.dir, "--pod-name", "p-1", ...COMMON], { ...process.env, KUBECONFIG: undefined, KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: port });
  t.equal(r.code, 0);
  t.same(r.clientNode, [], "@kubernetes/client-node was never resolved");
  t.ok(
    e.api.stats.requests.filter((q) => q.url.includes("/leases")).every((q) => q.authorization === `Bearer ${TOKEN}`),
    "the Lease calls carried the service-account token",
  );
});

t.test("a kubeconfig whose user needs an exec plugin falls back to client-node for the member's credentials", async (t) => {
  const e = await tlsApi(t);
  // A stand-in credential plugin: prints an ExecCredential with the token.
  const plugin = join(e.dir, "plugin.mjs");
  writeFileSync(plugin, `process.stdout.write(JSON.stringify({ apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status: { token: ${JSON.stringify(TOKEN)} } }));\n`);
  const kubeconfig = join(e.dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      "current-context": "c",
      contexts: [{ name: "c", context: { cluster: "devapi", user: "exec" } }],
      clusters: [{ name: "devapi", cluster: { server: e.api.url, "certificate-authority": "ca.crt" } }],
      users: [{ name: "exec", user: { exec: { apiVersion: "client.authentication.k8s.io/v1", command: process.execPath, args: [plugin], interactiveMode: "Never" } } }],
    }),
  );
  const r = await runUntilReady(t, ["--kubeconfig", kubeconfig, "--pod-name", "p-2", ...COMMON], { ...process.env, KUBECONFIG: undefined });
  t.equal(r.code, 0);
  t.ok(r.clientNode.length > 0, "client-node was loaded, since only it runs exec plugins");
  t.match(r.output, /needs client-node/, "and the log says why");
});

t.test("in a pod that sets KUBECONFIG, the upstream and the ring credentials both come from the kubeconfig, never one from in-cluster config", async (t) => {
  // The kubeconfig names cluster A; the in-cluster environment and a real
  // service-account directory (token, ca.crt) name cluster B.
  const a = await tlsApi(t);
  const b = await tlsApi(t, "in-cluster-token");
  const kubeconfig = join(a.dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      "current-context": "a",
      contexts: [{ name: "a", context: { cluster: "a", user: "sidecar" } }],
      clusters: [{ name: "a", cluster: { server: a.api.url, "certificate-authority": "ca.crt" } }],
      users: [{ name: "sidecar", user: { tokenFile: "token" } }],
    }),
  );
  let forwarded = 0;
  const r = await runUntilReady(
    t,
    ["--real-sa-dir", b.dir, "--pod-name", "p-3", ...COMMON],
    { ...process.env, KUBECONFIG: kubeconfig, KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: new URL(b.api.url).port },
    async (output) => {
      // A controller's request through the proxy, with its own token.
      const url = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(output)?.[1] ?? "";
      forwarded = (await fetch(`${url}/api/v1/namespaces/ns/configmaps`, { headers: { authorization: `Bearer ${TOKEN}` } })).status;
    },
  );
  t.equal(r.code, 0);
  t.equal(forwarded, 200, "the controller's request was answered");
  t.ok(a.api.stats.requests.some((q) => q.url.startsWith("/api/v1/namespaces/ns/configmaps")), "the upstream is the kubeconfig's cluster");
  t.ok(a.api.stats.requests.filter((q) => q.url.includes("/leases")).length >= 2, "the member Lease is on the same cluster");
  t.same(b.api.stats.requests.map((q) => q.url), [], "the in-cluster apiserver was never called, for either");
});
