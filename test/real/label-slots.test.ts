/**
 * Label slots through the real apiserver's MutatingAdmissionWebhook plugin.
 * The real `shardcar manager` (in this process, self-managed certificates)
 * serves the webhook on the loopback port the kit maps the service
 * shardcar-system/shardcar-webhook:443 to (SHARDCAR_REAL_WEBHOOK_PORT, set by
 * run.sh), so the plugin verifies the caBundle the manager patched in and the
 * TLS name shardcar-webhook.shardcar-system.svc, as a cluster does. The
 * webhook configuration is the one the manifests render
 * (test/manifests/compose/label-slots: its matchConditions are compiled and
 * evaluated by the plugin).
 *
 * Covered: the golden cases that a real server can reproduce, a full update
 * that drops the label, an unlabelled object counted by the metric and by
 * `shardcar audit`, a manager outage (writes go through unlabelled; the
 * backfill labels them), `preflight --filter labels`, and bad annotations and
 * bad ring specs refused with a message that names the value.
 *
 * The gate does not matter here (labels work on every server): run with the
 * gate off only.
 */
import t from "tap";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { readFileSync } from "node:fs";
import { load, loadAll } from "js-yaml";
import { main } from "../../src/cli/main.ts";
import { captureIo, runCli } from "../support/cli.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, shardRange } from "../../src/shard/range.ts";
import { ensure, installCrd } from "./support/dataset.ts";
import { call, callJson, eventually, realApiEnv, waitUntil, type KubeObject, type Target } from "./support/realapi.ts";

const env = realApiEnv();
const server: Target = { url: env.url, caPem: env.caPem, token: env.token };
const PORT = Number(process.env["SHARDCAR_REAL_WEBHOOK_PORT"] ?? "");
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const NS = "slots-real";
const RING = "web";
const LABEL = `shard.shardcar.io/${RING}`;
const SLOTS = 64;
const GROUP = "slots.example.com";
// Parents by their own uid, children by their controller's: each child shares its parent's slot.
const RESOURCES = `gadgets.${GROUP}, widgets.${GROUP}=owner`;
const SPEC = { filter: "labels", slots: SLOTS, resources: RESOURCES };
const path = (plural: string, name = ""): string => `/apis/${GROUP}/v1/namespaces/${NS}/${plural}${name === "" ? "" : `/${name}`}`;
const RINGS = `/apis/shardcar.io/v1alpha1/namespaces/${NS}/shardrings`;
const MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";

const skip = env.gate === "on" ? "labels mode does not depend on the gate: run once, with the gate off" : !Number.isInteger(PORT) || PORT <= 0 ? "SHARDCAR_REAL_WEBHOOK_PORT is not set (run through test/real/run.sh)" : false;

function scanSlot(value: string): string {
  const h = fnv1a64(value);
  for (let s = 0; s < SLOTS; s++) if (contains([shardRange(s, SLOTS)], h)) return String(s);
  throw new Error("unreachable");
}

function crd(plural: string, kind: string): KubeObject {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      names: { plural, kind, singular: kind.toLowerCase(), listKind: `${kind}List` },
      scope: "Namespaced",
      versions: [{ name: "v1", served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: { type: "object", properties: { spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true }, status: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } } } }],
    },
  };
}

const gadget = (name: string, labels?: Record<string, string>): KubeObject => ({ apiVersion: `${GROUP}/v1`, kind: "Gadget", metadata: { name, ...(labels === undefined ? {} : { labels }) }, spec: { size: 1 } });
const widget = (parent: KubeObject): KubeObject => ({
  apiVersion: `${GROUP}/v1`,
  kind: "Widget",
  metadata: { generateName: `${parent.metadata?.name ?? ""}-`, ownerReferences: [{ apiVersion: `${GROUP}/v1`, kind: "Gadget", name: parent.metadata?.name ?? "", uid: parent.metadata?.uid ?? "", controller: true }] },
  spec: {},
});
const get = (plural: string, name: string): Promise<KubeObject> => callJson(server, "GET", path(plural, name));
/** The slot `o` must carry: its own uid's for a gadget, its controller's (the parent's) for a widget. */
function want(o: KubeObject, plural: string): string {
  const owner = plural === "widgets" ? o.metadata?.ownerReferences?.find((r) => r.controller === true)?.uid : undefined;
  return scanSlot(owner ?? o.metadata?.uid ?? "");
}

interface Manager {
  readonly metrics: string;
  out(): string;
  stop(): Promise<void>;
}

/** `shardcar manager` as the Deployment runs it, until `stop`; resolves once the plugin's calls reach it. */
async function startManager(rate: number): Promise<Manager> {
  const abort = new AbortController();
  // Its credentials as in a pod's environment (the manager has no --kubeconfig).
  const c = captureIo(abort.signal, { KUBECONFIG: env.kubeconfig });
  const out = (): string => c.out() + c.err();
  const exit = main(
    ["manager", "--image", "ghcr.io/shardcar/shardcar:test", "--webhook-listen", `127.0.0.1:${PORT}`, "--metrics-listen", "127.0.0.1:0", "--namespace", "shardcar-system", "--label-rate", String(rate), "--label-burst", "1", "--log-level", "warn"],
    c.io,
  );
  let metrics = "";
  await waitUntil("the manager serves metrics", () => {
    metrics = /serving metrics on (http:\/\/\S+)/.exec(out())?.[1] ?? "";
    return metrics !== "";
  }, 30_000);
  // A server-side dry run shows when the plugin calls it with a caBundle it trusts.
  await waitUntil("the plugin calls the webhook", async () => {
    // A child (its slot is known at CREATE) of a parent that need not exist: a dry run stores nothing.
    const child = widget({ ...gadget("probe"), metadata: { name: "probe", uid: "00000000-0000-4000-8000-000000000000" } });
    const probe = await callJson(server, "POST", `${path("widgets")}?dryRun=All`, { ...child, metadata: { ...child.metadata, name: "probe", generateName: undefined } }).catch(() => undefined);
    return probe?.metadata?.labels?.[LABEL] !== undefined;
  }, 30_000);
  return {
    metrics,
    out,
    async stop() {
      abort.abort();
      await exit;
    },
  };
}

async function metric(m: Manager, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const r = await fetch(m.metrics);
  const text = await r.text();
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

/** The Status message of a write the server refused; "(not refused)" when it was accepted. */
async function refusal(method: string, at: string, body: unknown): Promise<string> {
  const r = await call(server, at, { method, headers: { "content-type": "application/json", accept: "application/json" }, body: JSON.stringify(body) });
  if (r.status >= 200 && r.status < 300) return "(not refused)";
  return (JSON.parse(r.body.toString("utf8")) as { message?: string }).message ?? "";
}

interface LabelJson {
  resource: string;
  total: number;
  unlabelled: { count: number; examples: string[] };
  mislabelled: { count: number };
  ok: boolean;
}

const cli = (argv: string[]): Promise<{ code: number; out: string; err: string }> => runCli([...argv, "--kubeconfig", env.kubeconfig]);

async function audit(): Promise<{ code: number; labels: LabelJson[] }> {
  const r = await cli(["audit", "--namespace", NS, "--ring", RING, "--json"]);
  return { code: r.code, labels: r.out === "" ? [] : (JSON.parse(r.out) as { labels: LabelJson[] }).labels };
}

type Condition = { type: string; status: string; reason: string; message: string };
const condition = async (name = RING): Promise<Condition | undefined> => (await callJson<{ status?: { conditions?: Condition[] } }>(server, "GET", `${RINGS}/${name}`)).status?.conditions?.find((c) => c.type === "Labelled");

async function wrong(plural: string): Promise<string[]> {
  const list = await callJson<{ items: KubeObject[] }>(server, "GET", path(plural));
  return list.items.filter((o) => o.metadata?.labels?.[LABEL] !== want(o, plural)).map((o) => o.metadata?.name ?? "");
}

t.test("label slots through the real MutatingAdmissionWebhook plugin", { skip }, async (t) => {
  await ensure(server, "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } });
  await ensure(server, "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "shardcar-system" } });
  await installCrd(server, crd("gadgets", "Gadget"), path("gadgets"));
  await installCrd(server, crd("widgets", "Widget"), path("widgets"));
  // js-yaml, not client-node's loadYaml: that one goes through the typed
  // model, whose JSON spells `enum` and `x-kubernetes-validations` as
  // TypeScript properties the server ignores. An older copy (from another
  // suite) is replaced, so the schema under test is the shipped one.
  const ringCrd = load(readFileSync(new URL("../../manifests/base/crds/shardrings.shardcar.io.yaml", import.meta.url), "utf8")) as KubeObject;
  const CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  if (!(await ensure(server, CRDS, ringCrd))) {
    const cur = await callJson(server, "GET", `${CRDS}/shardrings.shardcar.io`);
    await callJson(server, "PUT", `${CRDS}/shardrings.shardcar.io`, { ...ringCrd, metadata: { ...ringCrd.metadata, resourceVersion: cur.metadata?.resourceVersion } });
  }
  await installCrd(server, ringCrd, RINGS);

  // The cluster before the switch: ten parents without labels.
  const before = await Promise.all(Array.from({ length: 10 }, (_, i) => callJson(server, "POST", path("gadgets"), gadget(`old-${i}`))));
  await ensure(server, RINGS, { apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name: RING, namespace: NS }, spec: SPEC });
  // The webhook configuration exactly as the manifests render it.
  const { stdout } = await promisify(execFile)("kubectl", ["kustomize", "test/manifests/compose/label-slots"], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
  const mwc = (loadAll(stdout) as KubeObject[]).find((o) => o !== null && o.kind === "MutatingWebhookConfiguration");
  if (mwc === undefined) throw new Error("no MutatingWebhookConfiguration rendered");
  await call(server, `${MWC}/shardcar`, { method: "DELETE" });
  await callJson(server, "POST", MWC, mwc);
  t.teardown(async () => {
    await call(server, `${MWC}/shardcar`, { method: "DELETE" });
  });

  await t.test("an object without its label is counted by shardcar audit, and by the metric until the backfill labels it", async (t) => {
    const a = await audit();
    t.equal(a.code, 1, "audit exits 1");
    t.match(a.labels.find((l) => l.resource === `gadgets.${GROUP}`), { total: 10, unlabelled: { count: 10 }, ok: false });
    t.same(a.labels.find((l) => l.resource === `gadgets.${GROUP}`)?.unlabelled.examples.sort(), before.map((o) => `${NS}/${o.metadata?.name ?? ""}`).sort(), "it names them");
    const manager = await startManager(2);
    t.teardown(() => manager.stop());
    let seen = 0;
    await waitUntil("the metric counts unlabelled gadgets", async () => {
      seen = (await metric(manager, "shardcar_ring_unlabelled_objects", { ring: RING, resource: `gadgets.${GROUP}` })) ?? 0;
      return seen > 0;
    }, 30_000, 50);
    t.ok(seen > 0 && seen <= 10, `shardcar_ring_unlabelled_objects counted ${seen}`);
    await waitUntil("the backfill labelled them", async () => (await wrong("gadgets")).length === 0, 60_000);
    await waitUntil("the metric is back to 0", async () => (await metric(manager, "shardcar_ring_unlabelled_objects", { ring: RING, resource: `gadgets.${GROUP}` })) === 0, 30_000);
    await waitUntil("Labelled is True", async () => (await condition())?.status === "True", 30_000);
    t.match(await condition(), { reason: "AllLabelled" });
    t.equal((await audit()).code, 0, "audit exits 0");
    await manager.stop();
  });

  const manager = await startManager(20);
  t.teardown(() => manager.stop());

  await t.test("golden cases, through the plugin", async (t) => {
    const parent = await callJson(server, "POST", path("gadgets"), gadget("fresh", { app: "shop" }));
    t.same(parent.metadata?.labels, { app: "shop" }, "create-uid-keyed-is-deferred: no slot before the uid exists");
    const created = performance.now();
    await waitUntil("the labeller labels it", async () => (await get("gadgets", "fresh")).metadata?.labels?.[LABEL] === want(parent, "gadgets"), 30_000, 5);
    // The cost of a uid key in labels mode: this long in no cache (docs/label-slots.md).
    t.comment(`uid-keyed create → labelled by the labeller: ${Math.round(performance.now() - created)} ms (polled every 5 ms)`);
    const copied = await callJson(server, "POST", path("gadgets"), gadget("copied", { app: "shop", [LABEL]: "17" }));
    t.same(copied.metadata?.labels, { app: "shop" }, "create-uid-keyed-copied-label-is-removed: a copied slot is removed, other labels kept");
    await waitUntil("then labelled right", async () => (await get("gadgets", "copied")).metadata?.labels?.[LABEL] === want(copied, "gadgets"), 30_000);
    const child = await callJson(server, "POST", path("widgets"), widget(parent));
    t.equal(child.metadata?.labels?.[LABEL], want(child, "widgets"), "create-owner-child-with-generate-name: a child created with generateName is stored with its slot");
    t.equal(child.metadata?.labels?.[LABEL], scanSlot(parent.metadata?.uid ?? ""), "the parent's slot: parent and child share a shard");
    const dry = await callJson(server, "POST", `${path("widgets")}?dryRun=All`, widget(parent));
    t.equal(dry.metadata?.labels?.[LABEL], want(child, "widgets"), "create-dry-run-is-stamped-too");
    const cm = await callJson(server, "POST", `/api/v1/namespaces/${NS}/configmaps`, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "not-sharded" }, data: {} });
    t.same(cm.metadata?.labels, undefined, "create-resource-no-labels-ring-shards-is-skipped: configmaps reach the webhook (its rules) but no ring labels them");
  });

  await t.test("a full update that drops the label gets it back; updates that cannot move it are not sent", async (t) => {
    const reviews = async (result: string): Promise<number> => (await metric(manager, "shardcar_label_webhook_reviews_total", { result })) ?? 0;
    const cur = await get("gadgets", "old-0");
    const slot = cur.metadata?.labels?.[LABEL];
    t.equal(slot, want(cur, "gadgets"));
    const sent = (await reviews("stamped")) + (await reviews("unchanged"));
    const spec = await callJson(server, "PUT", path("gadgets", "old-0"), { ...cur, spec: { size: 2 } });
    t.equal(spec.metadata?.labels?.[LABEL], slot);
    t.equal((await reviews("stamped")) + (await reviews("unchanged")), sent, "a spec-only update is not sent (matchConditions)");
    const dropped = await callJson(server, "PUT", path("gadgets", "old-0"), { ...spec, metadata: { ...spec.metadata, labels: { app: "x" } } });
    t.same(dropped.metadata?.labels, { app: "x", [LABEL]: slot }, "update-full-update-drops-the-labels-map: restored in the same write");
    const changed = await callJson(server, "PUT", path("gadgets", "old-0"), { ...dropped, metadata: { ...dropped.metadata, labels: { [LABEL]: String((Number(slot) + 1) % SLOTS) } } });
    t.same(changed.metadata?.labels, { [LABEL]: slot }, "update-changed-label-is-restored");
    const patched = await callJson(server, "PATCH", path("gadgets", "old-0"), { metadata: { labels: { [LABEL]: null } } }, "application/merge-patch+json");
    t.equal(patched.metadata?.labels?.[LABEL], slot, "a merge patch that removes it too");
    const status = await callJson(server, "PUT", `${path("gadgets", "old-0")}/status`, { ...patched, status: { ok: true } });
    t.equal(status.metadata?.labels?.[LABEL], slot, "update-status-subresource-is-skipped: the label is untouched");
  });

  await t.test("a manager outage: writes go through unlabelled and are counted; the backfill labels them once it is back", async (t) => {
    await manager.stop();
    const p = await callJson(server, "POST", path("gadgets"), gadget("during-outage"));
    const c = await callJson(server, "POST", path("widgets"), widget(p));
    t.equal(c.metadata?.labels?.[LABEL], undefined, "failurePolicy Ignore: the child went through, unlabelled");
    const a = await audit();
    t.equal(a.code, 1);
    t.match(a.labels.find((l) => l.resource === `gadgets.${GROUP}`)?.unlabelled, { count: 1, examples: [`${NS}/during-outage`] });
    t.match(a.labels.find((l) => l.resource === `widgets.${GROUP}`)?.unlabelled, { count: 1, examples: [`${NS}/${c.metadata?.name ?? ""}`] });
    const back = await startManager(20);
    t.teardown(() => back.stop());
    await waitUntil("both labelled", async () => (await wrong("gadgets")).length === 0 && (await wrong("widgets")).length === 0, 60_000);
    t.equal((await audit()).code, 0);
    await t.test("preflight --filter labels passes the label checks now", async (t) => {
      const r = await cli(["preflight", "--namespace", NS, "--resources", RESOURCES, "--filter", "labels", "--ring", RING, "--json"]);
      const checks = (JSON.parse(r.out) as { checks: Array<{ id: string; status: string; summary: string }> }).checks;
      for (const id of [`slot-label/gadgets.${GROUP}`, `slot-label/widgets.${GROUP}`, "label-webhook"]) t.equal(checks.find((c) => c.id === id)?.status, "pass", id);
      t.notOk(checks.some((c) => c.id === "label-ring" && c.status === "fail"), "the ring is in labels mode and labels both");
    });

    await t.test("bad annotations are refused by the injection webhook with a message that names the value", async (t) => {
      const pod = (annotations: Record<string, string>): KubeObject => ({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: `bad-${Object.values(annotations).join("-").replace(/[^a-z0-9-]/g, "")}`, labels: { "shardcar.io/inject": "true" }, annotations: { "shardcar.io/resources": `gadgets.${GROUP}`, ...annotations } },
        spec: { containers: [{ name: "ctl", image: "ctl" }] },
      });
      for (const [annotations, message] of [
        [{ "shardcar.io/filter": "label" }, 'admission webhook "label.inject.shardcar.io" denied the request: invalid shardcar.io/filter "label": allowed values are "shardselector" and "labels"'],
        [{ "shardcar.io/filter": "labels", "shardcar.io/shards": "0/2" }, 'shardcar.io/filter "labels" with shardcar.io/shards "0/2" needs shardcar.io/ring'],
      ] as const) {
        t.match(await refusal("POST", `/api/v1/namespaces/${NS}/pods`, pod(annotations)), message, "the message names the value");
      }
    });

    await t.test("bad ring specs are refused with a message that names the value", async (t) => {
      const ring = (name: string, spec: unknown): KubeObject => ({ apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name, namespace: NS }, spec });
      t.match(await refusal("POST", RINGS, ring("typo-filter", { filter: "label", resources: `gadgets.${GROUP}` })), /spec.filter: Unsupported value: "label": supported values: "shardselector", "labels"/);
      t.match(await refusal("POST", RINGS, ring("no-resources", { filter: "labels" })), /spec.filter "labels" needs spec.resources/);
      await callJson(server, "POST", RINGS, ring("typo-resources", { filter: "labels", resources: "Gadgets.slots.example.com" }));
      t.teardown(async () => {
        await call(server, `${RINGS}/typo-resources`, { method: "DELETE" });
      });
      await waitUntil("the manager refuses it", async () => (await condition("typo-resources")) !== undefined, 30_000);
      t.match(await condition("typo-resources"), { status: "False", reason: "SpecInvalid", message: /invalid spec.resources "Gadgets.slots.example.com": .*"Gadgets" is not a lowercase plural resource name/ });
      const events = async (): Promise<Array<{ reason?: string; type?: string; involvedObject?: { name?: string } }>> => (await callJson<{ items: Array<{ reason?: string; type?: string; involvedObject?: { name?: string } }> }>(server, "GET", `/api/v1/namespaces/${NS}/events`)).items;
      t.ok(await eventually(async () => (await events()).some((e) => e.reason === "SpecInvalid" && e.type === "Warning" && e.involvedObject?.name === "typo-resources"), 15_000), "a Warning Event names the ring");
      t.equal((await condition())?.status, "True", "the good ring is unaffected");
    });
    await back.stop();
  });
});
