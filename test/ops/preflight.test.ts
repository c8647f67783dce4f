/**
 * `shardcar preflight` against devapi, through the CLI as an operator runs
 * it (a kubeconfig file, exit codes, text and --json): the gate on, off and
 * mixed give pass, warn and warn-"mixed" per resource, typed and custom; and
 * the RBAC, lock, webhook and label checks each find what is wrong.
 */
import t from "tap";
import { createLocalCa } from "../../src/pki/ca.ts";
import { webhookDnsNames } from "../../src/webhook/certs.ts";
import type { GateMode } from "../../src/devapi/index.ts";
import { cli, releasesCrd, startOpsCluster, type OpsCluster } from "./support.ts";

interface CheckJson {
  id: string;
  status: string;
  summary: string;
  details: string[];
}

async function preflight(c: OpsCluster, extra: string[]): Promise<{ code: number; checks: Map<string, CheckJson>; out: string; err: string }> {
  const r = await cli(["preflight", "--kubeconfig", c.kubeconfig, "--json", "--webhook", "none", ...extra]);
  const checks = new Map<string, CheckJson>();
  if (r.out !== "") for (const ch of (JSON.parse(r.out) as { checks: CheckJson[] }).checks) checks.set(ch.id, ch);
  return { ...r, checks };
}

async function withReleases(c: OpsCluster, n: number): Promise<void> {
  c.api.store.create("customresourcedefinitions", releasesCrd());
  for (let i = 0; i < n; i++) c.api.store.create({ group: "convoy.kumodo.io", version: "v1", resource: "releases" }, { apiVersion: "convoy.kumodo.io/v1", kind: "Release", metadata: { name: `r-${i}`, namespace: "shop" }, spec: {} });
}

const GATES: Array<{ gate: GateMode; status: string; summary: RegExp }> = [
  { gate: "on", status: "pass", summary: /^honoured in 4 of 4 probes/ },
  { gate: "off", status: "warn", summary: /^ignored in 4 of 4 probes/ },
  { gate: "mixed", status: "warn", summary: /^mixed: honoured in 2 of 4 probes, ignored in 2/ },
];

for (const { gate, status, summary } of GATES) {
  t.test(`gate ${gate}: typed pods and custom releases are both judged ${status}`, async (t) => {
    const c = await startOpsCluster({ gate, pods: 40 });
    t.teardown(() => c.stop());
    await withReleases(c, 5);
    const r = await preflight(c, ["--resources", "pods, releases.convoy.kumodo.io"]);
    t.equal(r.code, 0, "warnings alone still exit 0");
    const pods = r.checks.get("shard-selector/pods");
    const rel = r.checks.get("shard-selector/releases.convoy.kumodo.io");
    t.equal(pods?.status, status);
    t.match(pods?.summary, summary);
    t.match(pods?.summary, /judged by metadata.shardInfo/);
    t.equal(rel?.status, status);
    t.match(rel?.summary, summary);
    t.match(rel?.summary, /inferred from the items/);
    const text = await cli(["preflight", "--kubeconfig", c.kubeconfig, "--webhook", "none", "--resources", "pods"]);
    t.match(text.out, new RegExp(`^${status.toUpperCase()} {2}server honours shardSelector for pods: `, "m"), "the text report leads each check with its verdict");
  });
}

t.test("gate off with --require-server-filtering fails and exits 1", async (t) => {
  const c = await startOpsCluster({ gate: "off", pods: 10 });
  t.teardown(() => c.stop());
  const r = await preflight(c, ["--resources", "pods", "--require-server-filtering"]);
  t.equal(r.code, 1);
  t.equal(r.checks.get("shard-selector/pods")?.status, "fail");
});

t.test("a custom resource with no objects cannot be judged, and says why", async (t) => {
  const c = await startOpsCluster({ gate: "on" });
  t.teardown(() => c.stop());
  await withReleases(c, 0);
  const r = await preflight(c, ["--resources", "releases.convoy.kumodo.io"]);
  t.equal(r.checks.get("shard-selector/releases.convoy.kumodo.io")?.status, "warn");
  t.match(r.checks.get("shard-selector/releases.convoy.kumodo.io")?.summary, /cannot tell: there is no releases.convoy.kumodo.io object/);
});

t.test("a resource the server does not serve fails its check", async (t) => {
  const c = await startOpsCluster({ gate: "on" });
  t.teardown(() => c.stop());
  const r = await preflight(c, ["--resources", "widgets.example.com"]);
  t.equal(r.code, 1);
  t.match(r.checks.get("shard-selector/widgets.example.com")?.summary, /not served/);
});

t.test("RBAC: a named ServiceAccount is checked with SubjectAccessReview, and each missing permission is named", async (t) => {
  const c = await startOpsCluster({ gate: "on", pods: 5 });
  t.teardown(() => c.stop());
  c.policy = (spec) => !(spec.resourceAttributes?.resource === "configmaps" && spec.resourceAttributes.verb === "watch") && !(spec.resourceAttributes?.resource === "shardrings");
  const r = await preflight(c, ["--resources", "pods, configmaps=namespace", "--service-account", "web"]);
  t.equal(r.code, 1);
  const rbac = r.checks.get("rbac");
  t.equal(rbac?.status, "fail");
  t.match(rbac?.summary, /^4 of \d+ permissions missing/);
  t.ok(rbac?.details.some((d) => /missing: watch configmaps \(cluster-wide\)/.test(d)), "the informer's watch is named");
  t.ok(rbac?.details.some((d) => /missing: get shardrings.shardcar.io in shop — the sidecar follows its ShardRing/.test(d)), "the ring's read is named, in the context's namespace");
  t.ok(c.reviews.length > 0 && c.reviews.every((v) => v.kind === "SubjectAccessReview" && v.spec.user === "system:serviceaccount:shop:web"), "asked about the ServiceAccount, not the operator");
});

t.test("RBAC: without --service-account it asks as the kubeconfig's user; static shards need no Lease rights", async (t) => {
  const c = await startOpsCluster({ gate: "on", pods: 5 });
  t.teardown(() => c.stop());
  const r = await preflight(c, ["--resources", "pods", "--shards", "0/2"]);
  t.equal(r.checks.get("rbac")?.status, "pass");
  t.ok(c.reviews.every((v) => v.kind === "SelfSubjectAccessReview"));
  t.notOk(c.reviews.some((v) => v.spec.resourceAttributes?.resource === "leases"), "no Lease permission is asked for with static shards and no lock");
});

t.test("RBAC: a lock restricted by resourceNames to the original name fails for the renamed per-shard locks", async (t) => {
  const c = await startOpsCluster({ gate: "on", pods: 5 });
  t.teardown(() => c.stop());
  c.policy = (spec) => spec.resourceAttributes?.resource !== "leases" || spec.resourceAttributes.name === undefined || spec.resourceAttributes.name === "web-controller";
  const r = await preflight(c, ["--resources", "pods", "--shards", "ordinal/2", "--leader-election", "leases/web-controller"]);
  const rbac = r.checks.get("rbac");
  t.equal(rbac?.status, "fail");
  t.ok(rbac?.details.some((d) => /update leases.coordination.k8s.io\/web-controller-1 in shop/.test(d)), "the lock of shard 1 is named");
});

t.test("the leader-election lock: present, absent, and of another kind", async (t) => {
  const c = await startOpsCluster({ gate: "on", pods: 5 });
  t.teardown(() => c.stop());
  const lock = async (spec: string): Promise<CheckJson | undefined> => (await preflight(c, ["--resources", "pods", "--leader-election", spec])).checks.get("leader-election-lock");
  const absent = await lock("leases/web-controller");
  t.equal(absent?.status, "warn");
  t.match(absent?.summary, /no Lease of that name/);
  c.api.store.create("leases.coordination.k8s.io", { metadata: { name: "web-controller", namespace: "shop" }, spec: { holderIdentity: "web-7d9f" } });
  const present = await lock("leases/web-controller");
  t.equal(present?.status, "pass");
  t.match(present?.summary, /exists, kind Lease, held by web-7d9f/);
  c.api.store.create("configmaps", { metadata: { name: "old-controller", namespace: "shop", annotations: { "control-plane.alpha.kubernetes.io/leader": '{"holderIdentity":"old-0"}' } } });
  const wrongKind = await lock("leases/old-controller");
  t.equal(wrongKind?.status, "fail");
  t.match(wrongKind?.summary, /but a ConfigMap exists/);
  const cm = await lock("configmaps/old-controller");
  t.equal(cm?.status, "pass");
  t.match(cm?.summary, /kind ConfigMap, held by old-0/);
});

async function installWebhook(c: OpsCluster, opts: { caBundle?: string; servingCa?: "same" | "other"; service?: boolean; caNow?: Date; caValidityMs?: number }): Promise<void> {
  const ca = await createLocalCa("shardcar-webhook-ca", opts.caNow ?? new Date(), opts.caValidityMs ?? 365 * 24 * 3600_000);
  const other = await createLocalCa("someone-else", new Date(), 365 * 24 * 3600_000);
  const leaf = await (opts.servingCa === "other" ? other : ca).issue({ commonName: "shardcar-webhook", names: webhookDnsNames("shardcar-webhook", "shardcar-system"), now: new Date(), validityMs: 30 * 24 * 3600_000 });
  const bundle = opts.caBundle ?? Buffer.from(ca.certPem).toString("base64");
  const hook = (name: string): Record<string, unknown> => ({ name, clientConfig: { caBundle: bundle, service: { name: "shardcar-webhook", namespace: "shardcar-system", path: "/mutate-pods", port: 443 } } });
  c.api.store.create("mutatingwebhookconfigurations.admissionregistration.k8s.io", { metadata: { name: "shardcar" }, webhooks: [hook("label.inject.shardcar.io"), hook("annotation.inject.shardcar.io")] });
  if (opts.service !== false) c.api.store.create("services", { metadata: { name: "shardcar-webhook", namespace: "shardcar-system" }, spec: { ports: [{ port: 443 }] } });
  c.api.store.create("secrets", { metadata: { name: "shardcar-webhook-tls", namespace: "shardcar-system" }, type: "kubernetes.io/tls", data: { "tls.crt": Buffer.from(leaf.cert).toString("base64"), "tls.key": Buffer.from(leaf.key).toString("base64") } });
}

const WEBHOOKS: Array<{ name: string; setup?: Parameters<typeof installWebhook>[1]; status: string; re: RegExp }> = [
  { name: "not installed", status: "fail", re: /^not installed/ },
  { name: "installed with a valid CA that signed the serving certificate", setup: {}, status: "pass", re: /2 webhooks with a valid CA bundle/ },
  { name: "an empty caBundle", setup: { caBundle: "" }, status: "fail", re: /2 problems/ },
  { name: "an expired CA", setup: { caNow: new Date(Date.now() - 400 * 24 * 3600_000), caValidityMs: 30 * 24 * 3600_000 }, status: "fail", re: /problems/ },
  { name: "a CA that did not sign the serving certificate", setup: { servingCa: "other" }, status: "fail", re: /problems/ },
  { name: "a missing Service", setup: { service: false }, status: "fail", re: /problems/ },
  { name: "a CA that expires within two weeks", setup: { caValidityMs: 3 * 24 * 3600_000 }, status: "warn", re: /problems/ },
];

for (const w of WEBHOOKS) {
  t.test(`webhook: ${w.name} → ${w.status}`, async (t) => {
    const c = await startOpsCluster({ gate: "on", pods: 3 });
    t.teardown(() => c.stop());
    if (w.setup !== undefined) await installWebhook(c, w.setup);
    const r = await cli(["preflight", "--kubeconfig", c.kubeconfig, "--json", "--resources", "pods"]);
    const check = (JSON.parse(r.out) as { checks: CheckJson[] }).checks.find((x) => x.id === "webhook");
    t.equal(check?.status, w.status, check?.details.join("; ") ?? "");
    t.match(check?.summary, w.re);
  });
}

t.test("label-based setups: objects without the shard label are counted and named", async (t) => {
  const c = await startOpsCluster({ gate: "on" });
  t.teardown(() => c.stop());
  await withReleases(c, 0);
  const ref = { group: "convoy.kumodo.io", version: "v1", resource: "releases" };
  for (let i = 0; i < 7; i++) c.api.store.create(ref, { apiVersion: "convoy.kumodo.io/v1", kind: "Release", metadata: { name: `labelled-${i}`, namespace: "shop", labels: { "convoy.kumodo.io/shard": String(i % 3) } } });
  for (let i = 0; i < 2; i++) c.api.store.create(ref, { apiVersion: "convoy.kumodo.io/v1", kind: "Release", metadata: { name: `bare-${i}`, namespace: "shop" } });
  const r = await preflight(c, ["--resources", "releases.convoy.kumodo.io", "--shard-label", "convoy.kumodo.io/shard"]);
  const check = r.checks.get("shard-label/releases.convoy.kumodo.io");
  t.equal(check?.status, "fail");
  t.match(check?.summary, /^2 of 9 objects lack it/);
  t.match(check?.details[0], /shop\/bare-0, shop\/bare-1/);
  t.equal(r.code, 1);
});

t.test("bad flags exit 2 naming the flag", async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [["preflight"], /--resources is required/],
    [["preflight", "--resources", "Pods"], /--resources "Pods"/],
    [["preflight", "--resources", "pods", "--shards", "4/3"], /--shards "4\/3"/],
    [["preflight", "--resources", "pods", "--probes", "0"], /--probes "0"/],
    [["preflight", "--resources", "pods", "--leader-election", "locks/x"], /--leader-election "locks\/x"/],
    [["preflight", "--resources", "pods", "--webhook-secret", "nope"], /--webhook-secret "nope"/],
    [["preflight", "--resources", "pods", "--shard-label", "bad key"], /--shard-label "bad key"/],
    [["preflight", "--resources", "pods", "--kubeconfig", "/nonexistent/kubeconfig"], /--kubeconfig|kubeconfig/],
    [["preflight", "--bogus"], /--bogus/],
  ];
  for (const [argv, re] of cases) {
    const r = await cli(argv);
    t.equal(r.code, 2, argv.join(" "));
    t.match(r.err, re);
  }
});
