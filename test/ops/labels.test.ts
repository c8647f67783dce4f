/**
 * Label slots in the operator tools, through the CLI against devapi:
 * `shardcar audit --ring` counts and names unlabelled and mislabelled
 * objects of a labels-mode ring (never silent: exit 1), and `shardcar
 * preflight --filter labels` refuses the switch while any object lacks its
 * slot, says how many and which, and checks the ShardRing and the stamping
 * webhook's rules. Expected slots are computed here by scanning slot ranges.
 */
import t from "tap";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, shardRange } from "../../src/shard/range.ts";
import { cli, releasesCrd, startOpsCluster, type OpsCluster } from "./support.ts";

const RELEASES = { group: "convoy.kumodo.io", version: "v1", resource: "releases" };
const LABEL = "shard.shardcar.io/web";
const SLOTS = 32;

function scanSlot(value: string): string {
  const h = fnv1a64(value);
  for (let s = 0; s < SLOTS; s++) if (contains([shardRange(s, SLOTS)], h)) return String(s);
  throw new Error("unreachable");
}

interface CheckJson {
  id: string;
  status: string;
  summary: string;
  details: string[];
}
interface LabelJson {
  resource: string;
  total: number;
  labelled: number;
  unlabelled: { count: number; examples: string[] };
  mislabelled: { count: number; examples: { id: string; have: string; want: string }[] };
  ok: boolean;
}

/** 10 releases: 6 labelled right, 3 without the label, 1 with another slot; configmaps keyed by namespace, all right. */
async function cluster(t: { teardown(fn: () => unknown): void }, spec: Record<string, unknown> = { filter: "labels", slots: SLOTS, resources: "releases.convoy.kumodo.io, configmaps=namespace" }): Promise<OpsCluster> {
  const c = await startOpsCluster({ gate: "off" });
  t.teardown(() => c.stop());
  c.api.store.create("customresourcedefinitions", releasesCrd());
  for (let i = 0; i < 10; i++) {
    const r = c.api.store.create(RELEASES, { apiVersion: "convoy.kumodo.io/v1", kind: "Release", metadata: { name: `r-${i}`, namespace: "shop" }, spec: {} });
    const uid = r.metadata?.uid ?? "";
    const right = scanSlot(uid);
    const labels = i < 6 ? { [LABEL]: right } : i < 9 ? {} : { [LABEL]: String((Number(right) + 1) % SLOTS) };
    c.api.store.patch(RELEASES, "shop", `r-${i}`, { metadata: { labels } });
  }
  c.api.store.create("configmaps", { metadata: { name: "cm", namespace: "shop", labels: { [LABEL]: scanSlot("shop") } } });
  c.api.store.create({ group: "shardcar.io", version: "v1alpha1", resource: "shardrings" }, { apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name: "web", namespace: "shop" }, spec, status: { slotCount: SLOTS, conditions: [{ type: "Labelled", status: "False", reason: "Backfilling", message: "4 of 11 objects lack the right shard.shardcar.io/web" }] } });
  return c;
}

t.test("audit --ring: counts per resource, names the unlabelled and the mislabelled, exits 1", async (t) => {
  const c = await cluster(t);
  const r = await cli(["audit", "--kubeconfig", c.kubeconfig, "--namespace", "shop", "--ring", "web", "--json"]);
  t.equal(r.code, 1, r.err);
  const { labels } = JSON.parse(r.out) as { labels: LabelJson[] };
  t.same(labels.map((l) => [l.resource, l.total, l.labelled, l.unlabelled.count, l.mislabelled.count, l.ok]), [
    ["releases.convoy.kumodo.io", 10, 6, 3, 1, false],
    ["configmaps", 1, 1, 0, 0, true],
  ]);
  t.same(labels[0]?.unlabelled.examples, ["shop/r-6", "shop/r-7", "shop/r-8"]);
  t.match(labels[0]?.mislabelled.examples, [{ id: "shop/r-9" }]);
  const text = await cli(["audit", "--kubeconfig", c.kubeconfig, "--namespace", "shop", "--ring", "web"]);
  t.match(text.out, /UNLABELLED: 3 objects have no shard.shardcar.io\/web and are in no cache/);
  t.match(text.out, /MISLABELLED: 1 object carries a slot that is not its/);
  t.match(text.out, /shop\/r-9 {2}has "\d+", wants "\d+"/);
  t.match(text.out, /NOT OK: 4 object\(s\) in no cache/);
});

t.test("audit --ring --resource: the range audit and the label audit of that resource, both in the exit status", async (t) => {
  const c = await cluster(t);
  const r = await cli(["audit", "--kubeconfig", c.kubeconfig, "--namespace", "shop", "--ring", "web", "--resource", "configmaps=namespace", "--json"]);
  const report = JSON.parse(r.out) as { labels?: LabelJson[]; total: number };
  t.same(report.labels?.map((l) => l.resource), ["configmaps"], "only the audited resource's labels");
  t.equal(report.total, 1);
});

t.test("audit --ring of a ring that is not in labels mode needs --resource, and says why", async (t) => {
  const c = await cluster(t, { resources: "releases.convoy.kumodo.io" });
  const r = await cli(["audit", "--kubeconfig", c.kubeconfig, "--namespace", "shop", "--ring", "web"]);
  t.equal(r.code, 1);
  t.match(r.err, /--resource is required: ShardRing shop\/web is not in labels mode \(spec.filter is "shardselector"\)/);
});

async function preflight(c: OpsCluster, extra: string[]): Promise<{ code: number; checks: Map<string, CheckJson> }> {
  const r = await cli(["preflight", "--kubeconfig", c.kubeconfig, "--json", "--namespace", "shop", ...extra]);
  const checks = new Map<string, CheckJson>();
  if (r.out !== "") for (const ch of (JSON.parse(r.out) as { checks: CheckJson[] }).checks) checks.set(ch.id, ch);
  return { code: r.code, checks };
}

function installLabelWebhook(c: OpsCluster, rules: unknown[], failurePolicy = "Ignore"): void {
  c.api.store.create("mutatingwebhookconfigurations.admissionregistration.k8s.io", {
    metadata: { name: "shardcar" },
    webhooks: [
      { name: "label.inject.shardcar.io", clientConfig: { service: { name: "shardcar-webhook", namespace: "shardcar-system", path: "/mutate-pods" } }, rules: [{ apiGroups: [""], resources: ["pods"], operations: ["CREATE"] }] },
      { name: "slots.shardcar.io", failurePolicy, clientConfig: { service: { name: "shardcar-webhook", namespace: "shardcar-system", path: "/label-slots" } }, rules },
    ],
  });
}

t.test("preflight --filter labels refuses while objects lack their slot, naming how many and which", async (t) => {
  const c = await cluster(t);
  installLabelWebhook(c, [{ apiGroups: ["convoy.kumodo.io", ""], resources: ["releases", "configmaps"], operations: ["CREATE", "UPDATE"] }]);
  const r = await preflight(c, ["--resources", "releases.convoy.kumodo.io, configmaps=namespace", "--filter", "labels", "--ring", "web"]);
  t.equal(r.code, 1);
  const rel = r.checks.get("slot-label/releases.convoy.kumodo.io");
  t.equal(rel?.status, "fail");
  t.match(rel?.summary, /^4 of 10 objects lack it \(3 unlabelled, 1 mislabelled\): switching the pods to labels now would leave them in no cache/);
  t.match(rel?.details[0], /^first 4: shop\/r-6, shop\/r-7, shop\/r-8, shop\/r-9 \(has "\d+", wants "\d+"\)/);
  t.equal(r.checks.get("slot-label/configmaps")?.status, "pass");
  t.match(r.checks.get("label-ring"), { status: "warn", summary: /Labelled is False \(Backfilling\)/ });
  t.equal(r.checks.get("label-webhook")?.status, "pass");
  t.notOk([...r.checks.keys()].some((k) => k.startsWith("shard-selector/")), "no shardSelector probes: labels mode filters by label");
  // The backfill finishes: every object right.
  for (let i = 6; i < 10; i++) {
    const uid = c.api.store.get(RELEASES, "shop", `r-${i}`)?.metadata?.uid ?? "";
    c.api.store.patch(RELEASES, "shop", `r-${i}`, { metadata: { labels: { [LABEL]: scanSlot(uid) } } });
  }
  const ok = await preflight(c, ["--resources", "releases.convoy.kumodo.io, configmaps=namespace", "--filter", "labels", "--ring", "web"]);
  t.equal(ok.checks.get("slot-label/releases.convoy.kumodo.io")?.status, "pass");
  const labelChecks = [...ok.checks.values()].filter((ch) => ch.id.startsWith("slot-label/") || ch.id.startsWith("label-"));
  t.same(labelChecks.filter((ch) => ch.status === "fail").map((ch) => ch.id), [], "no label check fails any more");
});

t.test("preflight --filter labels checks the ShardRing and the stamping webhook's rules", async (t) => {
  const c = await cluster(t, { filter: "labels", slots: SLOTS, resources: "releases.convoy.kumodo.io" });
  installLabelWebhook(c, [{ apiGroups: ["convoy.kumodo.io"], resources: ["releases"], operations: ["CREATE"] }], "Fail");
  const r = await preflight(c, ["--resources", "releases.convoy.kumodo.io, configmaps=namespace", "--filter", "labels", "--ring", "web"]);
  t.match(r.checks.get("label-ring"), { status: "fail", details: ['configmaps=namespace is not in spec.resources: nothing labels it'] });
  const w = r.checks.get("label-webhook");
  t.equal(w?.status, "fail");
  t.match(w?.details.join("\n"), /UPDATE of releases.convoy.kumodo.io is not sent: add apiGroups \["convoy.kumodo.io"\], resources \["releases"\], operations \[CREATE, UPDATE\] to the rules of slots.shardcar.io/);
  t.match(w?.details.join("\n"), /CREATE of configmaps is not sent/);
  t.match(w?.details.join("\n"), /slots.shardcar.io has failurePolicy Fail: a manager outage would block every write/);
  const none = await cluster(t, { resources: "releases.convoy.kumodo.io" });
  const n = await preflight(none, ["--resources", "releases.convoy.kumodo.io", "--filter", "labels", "--ring", "web"]);
  t.match(n.checks.get("label-ring"), { status: "fail", summary: /not in labels mode \(spec.filter is "shardselector"\)/ });
  t.match(n.checks.get("label-webhook"), { status: "fail", summary: "not installed" });
  const missing = await preflight(none, ["--resources", "releases.convoy.kumodo.io", "--filter", "labels", "--ring", "nope"]);
  t.match(missing.checks.get("label-ring"), { status: "fail", summary: "no such ShardRing" });
});

t.test("preflight flags for labels mode: a bad --filter or a missing --ring exit 2 naming them", async (t) => {
  const bad = await cli(["preflight", "--resources", "pods", "--filter", "label"]);
  t.equal(bad.code, 2);
  t.match(bad.err, /invalid --filter "label": allowed values are "shardselector" and "labels"/);
  const noRing = await cli(["preflight", "--resources", "pods", "--filter", "labels"]);
  t.equal(noRing.code, 2);
  t.match(noRing.err, /--filter labels needs --ring NAME/);
});
