/**
 * The real kubectl against devapi: legacy discovery, server-side Table
 * printing and Table watches must be good enough for `kubectl get`.
 * Skipped when /usr/bin/kubectl is not installed.
 */
import t, { type Test } from "tap";
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { seedPods, type DevApi } from "../../src/devapi/index.ts";
import { withApi } from "./helpers.ts";
import { eventually } from "../support/wait.ts";

const KUBECTL = "/usr/bin/kubectl";

// HTTPS, because kubectl sends a bearer token only over TLS.
const TLS = {
  key: readFileSync(new URL("./testdata/devapi-key.pem", import.meta.url), "utf8"),
  cert: readFileSync(new URL("./testdata/devapi-cert.pem", import.meta.url), "utf8"),
};

function kubeconfig(t: Test, api: DevApi): string {
  const dir = mkdtempSync(join(tmpdir(), "devapi-kubectl-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "config");
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
clusters: [{name: dev, cluster: {server: "${api.url}", insecure-skip-tls-verify: true}}]
users: [{name: dev, user: {token: kubectl-token}}]
contexts: [{name: dev, context: {cluster: dev, user: dev}}]
current-context: dev
`,
  );
  // A private discovery cache, so one run never reads another server's.
  return `--kubeconfig=${file} --cache-dir=${join(dir, "cache")}`;
}

function kubectl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(KUBECTL, args, { timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === "number" ? err.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

t.test("kubectl get against devapi", { skip: existsSync(KUBECTL) ? false : `${KUBECTL} not installed` }, async (t) => {
  const api = await withApi(t, { tls: TLS });
  seedPods(api, { count: 12, namespaces: ["alpha", "beta"] });
  api.store.create("leases", { metadata: { name: "leader", namespace: "alpha" }, spec: { holderIdentity: "me" } });
  api.store.create("shardrings", { apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name: "ring", namespace: "alpha" }, spec: { slots: 256 } });
  const cfg = kubeconfig(t, api).split(" ");

  const pods = await kubectl([...cfg, "get", "pods", "-A"]);
  t.equal(pods.code, 0, pods.stderr);
  const lines = pods.stdout.trim().split("\n");
  t.match(lines[0], /^NAMESPACE\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE/);
  t.equal(lines.length, 13, "a header and the 12 pods");
  t.match(pods.stdout, /beta\s+pod-00001\s+0\/1\s+Pending/);
  t.ok((api.stats.lists.get("pods") ?? 0) >= 1, "kubectl LISTed pods");
  t.ok(
    api.stats.requests.some((r) => r.url.startsWith("/api/v1/pods") && r.authorization === "Bearer kubectl-token"),
    "kubectl's token was recorded",
  );

  const leases = await kubectl([...cfg, "get", "leases", "-A"]);
  t.equal(leases.code, 0, leases.stderr);
  t.match(leases.stdout, /alpha\s+leader\s+me/);
  const rings = await kubectl([...cfg, "get", "shardrings", "-A"]);
  t.equal(rings.code, 0, rings.stderr);
  t.match(rings.stdout, /alpha\s+ring/);
  const one = await kubectl([...cfg, "get", "pod", "-n", "alpha", "pod-00000", "-o", "json"]);
  t.equal(one.code, 0, one.stderr);
  t.equal((JSON.parse(one.stdout) as { metadata: { name: string } }).metadata.name, "pod-00000");
});

t.test("kubectl apply of the shipped ShardRing CRD serves shardrings with its printer columns", { skip: existsSync(KUBECTL) ? false : `${KUBECTL} not installed` }, async (t) => {
  const api = await withApi(t, { tls: TLS, builtins: true });
  const crdFile = new URL("../../manifests/base/crds/shardrings.shardcar.io.yaml", import.meta.url).pathname;
  const cfg = kubeconfig(t, api).split(" ");
  // devapi serves no OpenAPI, so client-side validation is off.
  const applied = await kubectl([...cfg, "apply", "--validate=false", "-f", crdFile]);
  t.equal(applied.code, 0, applied.stderr);
  api.store.create("shardrings", { apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name: "ring", namespace: "alpha" }, spec: {}, status: { members: 3 } });
  const got = await kubectl([...cfg, "get", "shardrings", "-n", "alpha"]);
  t.equal(got.code, 0, got.stderr);
  t.match(got.stdout, /^NAME\s+GENERATION\s+PENDING\s+MEMBERS\s+READY\s+FILTER\s+UNLABELLED\s+AGE/);
  // Missing values are null cells, which kubectl prints blank, as for a real CR.
  t.match(got.stdout, /\nring\s+3\s/);
});

t.test("kubectl get pods -A --watch sees new pods", { skip: existsSync(KUBECTL) ? false : `${KUBECTL} not installed` }, async (t) => {
  const api = await withApi(t, { tls: TLS });
  seedPods(api, { count: 3, namespaces: ["alpha"] });
  const cfg = kubeconfig(t, api).split(" ");
  const child = spawn(KUBECTL, [...cfg, "get", "pods", "-A", "--watch"]);
  t.teardown(() => child.kill("SIGKILL"));
  let out = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr.on("data", (c: Buffer) => (out += c.toString()));
  const wait = (re: RegExp): Promise<boolean> => eventually(() => re.test(out), 120_000);
  t.ok(await wait(/pod-00002/), "the initial list");
  t.ok(await eventually(() => api.stats.openWatches > 0), "kubectl's watch opened");
  t.equal(api.stats.openWatches, 1, "one watch");
  api.store.create("pods", { metadata: { name: "late-arrival", namespace: "alpha" }, spec: { containers: [{ name: "c", image: "x" }] } });
  t.ok(await wait(/alpha\s+late-arrival\s+0\/1/), `the watched pod is printed:\n${out}`);
  child.kill("SIGKILL");
});
