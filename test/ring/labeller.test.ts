/**
 * Label slots end to end against devapi: the manager's pieces as
 * `shardcar manager` wires them — the ShardRing watch, the stamping webhook
 * (`/label-slots` on the real HTTPS server, called by devapi's mutating
 * admission), and the leader's labeller running inside the ring coordinator
 * — with parents (`gadgets`, keyed by uid) and their children (`widgets`,
 * keyed by owner) as an unmodified controller would write them.
 *
 * Every expected slot is computed here by scanning slot ranges, not by the
 * code under test.
 */
import t from "tap";
import { Registry } from "prom-client";
import { startDevApi, type DevApi, type KubeObject } from "../../src/devapi/index.ts";
import { runCoordinator } from "../../src/ring/coordinator.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, shardRange } from "../../src/shard/range.ts";
import { createLocalCa, type LocalCa } from "../../src/pki/ca.ts";
import { clusterClock } from "../support/wait.ts";
import { kubeConfig, SHARDRING_REF, TIMINGS, until } from "./harness.ts";
import { startLabelSlotPieces, type LabelSlotPieces } from "../support/label-slot-manager.ts";

const NS = "shop";
const LABEL = "shard.shardcar.io/web";
const SLOTS = 64;
const GADGETS = { group: "example.com", version: "v1", resource: "gadgets" } as const;
const WIDGETS = { group: "example.com", version: "v1", resource: "widgets" } as const;

function scanSlot(value: string): string {
  const h = fnv1a64(value);
  for (let s = 0; s < SLOTS; s++) if (contains([shardRange(s, SLOTS)], h)) return String(s);
  throw new Error("unreachable");
}

/** The slot each object must carry: its own uid for a gadget, its controller's uid for a widget. */
function expectedSlot(o: KubeObject): string {
  const refs = (o.metadata?.["ownerReferences"] ?? []) as Array<{ uid?: string; controller?: boolean }>;
  const owner = refs.find((r) => r.controller === true);
  return scanSlot(owner?.uid ?? o.metadata?.uid ?? "");
}

type Manager = Pick<LabelSlotPieces, "webhook" | "registry" | "hook" | "stop">;

/** The manager's label-slot pieces, with the labeller in the elected coordinator, as `shardcar manager` runs them. */
async function startManager(api: DevApi, ca: LocalCa, port: number): Promise<Manager> {
  const pieces = await startLabelSlotPieces(kubeConfig(api.url), { ca, port });
  const abort = new AbortController();
  const coordinator = runCoordinator({ kubeConfig: kubeConfig(api.url), namespace: "shardcar-system", identity: "mgr", election: TIMINGS, clock: clusterClock, tasks: [pieces.labeller] }, abort.signal);
  return {
    webhook: pieces.webhook,
    registry: pieces.registry,
    hook: pieces.hook,
    async stop() {
      abort.abort();
      await coordinator;
      await pieces.stop();
    },
  };
}

async function metric(registry: Registry, name: string, labels: Record<string, string>): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = m?.values.find((x) => Object.entries(labels).every(([k, val]) => x.labels[k] === val));
  return v?.value ?? 0;
}

const gadget = (name: string): KubeObject => ({ apiVersion: "example.com/v1", kind: "Gadget", metadata: { name, namespace: NS }, spec: {} });
const widget = (parent: KubeObject): KubeObject => ({
  apiVersion: "example.com/v1",
  kind: "Widget",
  metadata: { generateName: `${parent.metadata?.name ?? ""}-`, namespace: NS, ownerReferences: [{ apiVersion: "example.com/v1", kind: "Gadget", name: parent.metadata?.name ?? "", uid: parent.metadata?.uid ?? "", controller: true }] },
  spec: {},
});

async function post(api: DevApi, path: string, body: unknown): Promise<KubeObject> {
  const r = await fetch(`${api.url}${path}`, { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer x" }, body: JSON.stringify(body) });
  if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as KubeObject;
}

function wrongly(api: DevApi): string[] {
  const out: string[] = [];
  for (const ref of [GADGETS, WIDGETS]) {
    for (const o of api.store.list(ref, { namespace: NS })) {
      if (o.metadata?.labels?.[LABEL] !== expectedSlot(o)) out.push(`${ref.resource}/${o.metadata?.name ?? ""}=${o.metadata?.labels?.[LABEL] ?? "(none)"}`);
    }
  }
  return out;
}

interface RingStatus {
  labelling?: { unlabelled: number; resources: Array<{ resource: string; objects: number; labelled: number; unlabelled: number; mislabelled: number }> };
  conditions?: Array<{ type: string; status: string; reason: string; message: string }>;
}
const ringStatus = (api: DevApi, name = "web"): RingStatus => (api.store.get(SHARDRING_REF, NS, name)?.["status"] ?? {});
const labelled = (api: DevApi, name = "web"): { status: string; reason: string; message: string } | undefined => ringStatus(api, name).conditions?.find((c) => c.type === "Labelled");

t.test("label slots on devapi: backfill, stamping at CREATE and UPDATE, an outage, and a bad spec", async (t) => {
  const api = await startDevApi({});
  t.teardown(() => api.close());
  for (const ref of [GADGETS, WIDGETS]) api.registerResource({ ...ref, kind: ref.resource === "gadgets" ? "Gadget" : "Widget", namespaced: true, encoding: "unstructured" });
  api.registerResource({ group: "", version: "v1", resource: "events", kind: "Event", namespaced: true });
  const ca = await createLocalCa("labeller test CA", new Date(), 3600_000);

  // Before the switch: parents and children without labels.
  const parents = Array.from({ length: 30 }, (_, i) => api.store.create(GADGETS, gadget(`g${i}`)));
  for (const p of parents) api.store.create(WIDGETS, { ...widget(p), metadata: { ...widget(p).metadata, name: `${p.metadata?.name ?? ""}-child` } });
  t.equal(wrongly(api).length, 60, "60 objects start without a slot label");
  api.store.create(SHARDRING_REF, { apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name: "web", namespace: NS }, spec: { filter: "labels", slots: SLOTS, resources: "gadgets.example.com, widgets.example.com=owner" } });

  let manager = await startManager(api, ca, 0);
  const port = manager.webhook.port;
  api.setMutatingWebhooks([
    manager.hook([
      { group: "example.com", resource: "gadgets", operations: ["CREATE", "UPDATE"] },
      { group: "example.com", resource: "widgets", operations: ["CREATE", "UPDATE"] },
    ]),
  ]);

  await t.test("the backfill labels every existing object with its slot; children get their parent's", async (t) => {
    await until("every object labelled", () => wrongly(api).length === 0, 20_000);
    await until("the ring reports it", () => labelled(api)?.status === "True");
    t.match(labelled(api), { reason: "AllLabelled", message: /gadgets.example.com 30, widgets.example.com 30/ });
    t.match(ringStatus(api).labelling, { unlabelled: 0, resources: [{ resource: "gadgets.example.com", objects: 30, labelled: 30 }, { resource: "widgets.example.com", objects: 30, labelled: 30 }] });
    for (const p of parents) {
      const child = api.store.get(WIDGETS, NS, `${p.metadata?.name ?? ""}-child`);
      t.equal(child?.metadata?.labels?.[LABEL], api.store.get(GADGETS, NS, p.metadata?.name ?? "")?.metadata?.labels?.[LABEL], `${p.metadata?.name ?? ""}: parent and child share a slot`);
    }
    t.equal(await metric(manager.registry, "shardcar_labeller_patches_total", { resource: "gadgets.example.com", outcome: "labelled" }), 30);
    t.equal(await metric(manager.registry, "shardcar_ring_unlabelled_objects", { ring: "web", resource: "widgets.example.com" }), 0);
  });

  await t.test("a child created with generateName is labelled by the webhook at CREATE; a parent right after, by the labeller", async (t) => {
    const before = await metric(manager.registry, "shardcar_labeller_patches_total", { resource: "widgets.example.com", outcome: "labelled" });
    const parent = await post(api, `/apis/example.com/v1/namespaces/${NS}/gadgets`, gadget("fresh"));
    t.equal(parent.metadata?.labels?.[LABEL], undefined, "a uid-keyed parent cannot be labelled before it has a uid");
    const child = await post(api, `/apis/example.com/v1/namespaces/${NS}/widgets`, widget(parent));
    t.equal(child.metadata?.labels?.[LABEL], expectedSlot(child), "the child is stored with its slot already");
    await until("the parent labelled", () => api.store.get(GADGETS, NS, "fresh")?.metadata?.labels?.[LABEL] === expectedSlot(parent));
    t.equal(await metric(manager.registry, "shardcar_labeller_patches_total", { resource: "widgets.example.com", outcome: "labelled" }), before, "no PATCH for the child");
    const delays = (await manager.registry.getMetricsAsJSON()).find((m) => m.name === "shardcar_labeller_delay_seconds");
    t.ok(delays?.values.some((v) => (v as { metricName?: string }).metricName === "shardcar_labeller_delay_seconds_count" && v.labels["resource"] === "gadgets.example.com" && v.value >= 1), "the labelling delay is measured");
  });

  await t.test("a full update that drops the label gets it back from the webhook", async (t) => {
    const cur = api.store.get(GADGETS, NS, "g0");
    const want = cur?.metadata?.labels?.[LABEL];
    const r = await fetch(`${api.url}/apis/example.com/v1/namespaces/${NS}/gadgets/g0`, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...cur, metadata: { ...cur?.metadata, labels: { app: "x" } } }) });
    t.equal(r.status, 200);
    const stored = (await r.json()) as KubeObject;
    t.same(stored.metadata?.labels, { app: "x", [LABEL]: want }, "restored in the same write: the object never left its shard");
  });

  await t.test("with the manager down, new objects stay unlabelled; when it is back, the backfill labels them", async (t) => {
    await manager.stop();
    const p = await post(api, `/apis/example.com/v1/namespaces/${NS}/gadgets`, gadget("during-outage"));
    const c = await post(api, `/apis/example.com/v1/namespaces/${NS}/widgets`, widget(p));
    t.equal(c.metadata?.labels?.[LABEL], undefined, "failurePolicy Ignore: the write went through, unlabelled");
    t.same(wrongly(api).sort(), [`gadgets/during-outage=(none)`, `widgets/${c.metadata?.name ?? ""}=(none)`]);
    manager = await startManager(api, ca, port);
    await until("both labelled", () => wrongly(api).length === 0, 20_000);
    // 30 seeded + "fresh" + "during-outage": the new leader's own count.
    await until("the new leader reports it", () => ringStatus(api).labelling?.resources[0]?.objects === 32 && ringStatus(api).labelling?.unlabelled === 0);
    t.equal(labelled(api)?.status, "True");
  });

  await t.test("a bad ring spec is refused in the Labelled condition, with a message that names the value", async (t) => {
    api.store.create(SHARDRING_REF, { apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name: "typo", namespace: NS }, spec: { filter: "labels", resources: "Gadgets.example.com" } });
    await until("the refusal is reported", () => labelled(api, "typo") !== undefined);
    t.match(labelled(api, "typo"), { status: "False", reason: "SpecInvalid", message: /invalid spec.resources "Gadgets.example.com": .*"Gadgets" is not a lowercase plural resource name/ });
    await until("a Warning Event", () => api.store.list({ group: "", version: "v1", resource: "events" }, { namespace: NS }).some((e) => e["reason"] === "SpecInvalid"));
    t.equal(labelled(api)?.status, "True", "the other ring is unaffected");
  });

  await manager.stop();
});
