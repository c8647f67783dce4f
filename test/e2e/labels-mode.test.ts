/**
 * Issue 13 §2, the proxy's half of labels mode, against devapi with the
 * gate off: each proxy asks for `shard.shardcar.io/<ring> in (<its slots>)`,
 * so the upstream bytes per proxy fall to about 1/N where shardselector
 * mode reads everything; every cache is exactly the objects labelled with
 * its slots; unlabelled objects reach none. With ownership that changes, as
 * in ring mode: a member that only loses slots narrows in place (synthetic
 * DELETEDs, no relist), one that gains slots relists under the new selector.
 * Objects are labelled directly, with the slot src/shard/slots.ts computes.
 */
import t from "tap";
import { startDevApi, type DevApi } from "../../src/devapi/index.ts";
import type { ProxyFiltering } from "../../src/proxy/request/filtering.ts";
import { MutableOwnership, StaticOwnership } from "../../src/shard/ownership.ts";
import { formatSlot, parseSlot, slotLabelKey, slotOfValue, slotsOfRanges } from "../../src/shard/slots.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { slotsToRanges } from "../../src/shard/table.ts";
import { eventually } from "../support/cluster.ts";
import { objectId, startInformedReplica, type InformedReplica } from "../support/informed-replica.ts";
import { uuid } from "../support/proto/pods.ts";
import { rng } from "../support/rng.ts";

const LABEL = slotLabelKey("web");
const SLOTS = 256;
const N = 4;
const PODS = 4000;
const LABELS: ProxyFiltering = { mode: "labels", labelKey: LABEL, slotCount: () => SLOTS };
const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);

function createPod(api: DevApi, random: () => number, name: string, label?: string): void {
  const uid = uuid(random);
  const labels: Record<string, string> = { app: "web" };
  const slot = label ?? formatSlot(slotOfValue(uid, SLOTS));
  if (slot !== "") labels[LABEL] = slot;
  // The same size for every pod, so bytes are proportional to objects.
  api.store.create("pods", { metadata: { name, namespace: "web", uid, labels, annotations: { pad: "x".repeat(600) } }, spec: { containers: [{ name: "c", image: "x" }] } });
}

/** The pods a cache must hold for `slots`: those labelled with one of them. */
function expectedFor(api: DevApi, slots: readonly number[]): Set<string> {
  const own = new Set(slots);
  return new Set(
    api.store
      .list("pods")
      .filter((p) => {
        const s = parseSlot(p.metadata?.labels?.[LABEL] ?? "", SLOTS);
        return s !== undefined && own.has(s);
      })
      .map((p) => objectId(p)),
  );
}

function same(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}

t.test("labels mode, gate off: each proxy reads about 1/N of the bytes, caches exactly its slots, and narrows or relists as its slots change", async (t) => {
  const api = await startDevApi({ gate: "off" });
  api.store.create("namespaces", { metadata: { name: "web" } });
  const random = rng(8);
  for (let i = 0; i < PODS; i++) createPod(api, random, `pod-${i}`);
  // In no shard: never labelled, or labelled with something that is not a slot.
  for (let i = 0; i < 20; i++) createPod(api, random, `unlabelled-${i}`, "");
  for (let i = 0; i < 10; i++) createPod(api, random, `malformed-${i}`, "007");
  const total = (await (await fetch(`${api.url}/api/v1/pods`)).arrayBuffer()).byteLength;

  const slotsOf = Array.from({ length: N }, (_, i) => range((i * SLOTS) / N, ((i + 1) * SLOTS) / N));
  const owners = slotsOf.map((s) => new MutableOwnership({ generation: 1, ranges: slotsToRanges(s, SLOTS) }));
  const replicas: InformedReplica[] = [];
  t.teardown(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await api.close();
  });
  const resources = parseResources("pods");
  for (let i = 0; i < N; i++) replicas.push(await startInformedReplica({ name: `r${i}`, upstreamUrl: api.url, resources, ownership: owners[i] as MutableOwnership, filtering: LABELS, informed: ["pods"] }));
  // The same controller in shardselector mode, gate off: the figure labels mode replaces.
  replicas.push(await startInformedReplica({ name: "sel", upstreamUrl: api.url, resources, ownership: new StaticOwnership(slotsToRanges(slotsOf[0] ?? [], SLOTS)), informed: ["pods"] }));
  const current = (): number[][] => owners.map((o) => slotsOfRanges(o.current().ranges, SLOTS));
  const exact = (): boolean => replicas.slice(0, N).every((r, i) => same(r.cache("pods"), expectedFor(api, current()[i] ?? [])));
  t.ok(await eventually(exact, 20_000), "every cache holds exactly the pods labelled with its slots");

  const upstream = replicas.map((r) => r.proxy.proxy.stats().get("pods")?.upstreamBytes ?? 0);
  t.comment(`one unsharded LIST: ${total} bytes; upstream bytes per proxy: ${upstream.slice(0, N).join(", ")}; shardselector mode, gate off: ${upstream[N] ?? 0}`);
  t.ok(
    upstream.slice(0, N).every((b) => b <= (1.1 * total) / N),
    `labels mode: every proxy read at most 1.1·total/N (${Math.round((1.1 * total) / N)} bytes)`,
  );
  t.ok((upstream[N] ?? 0) >= 0.9 * total, "premise: in shardselector mode with the gate off the proxy reads everything");
  const requests = api.stats.requests.filter((q) => q.url.startsWith("/api/v1/pods?") && q.url.includes("labelSelector"));
  t.ok(
    requests.length >= N && requests.every((q) => !q.url.includes("shardSelector") && decodeURIComponent(q.url.replace(/\+/g, " ")).includes(`${LABEL} in (`)),
    "every sharded LIST and WATCH asked for the slot label, and for no shardSelector",
  );
  const union = new Set(replicas.slice(0, N).flatMap((r) => [...r.cache("pods")]));
  t.equal(union.size, PODS, "the caches together hold every labelled pod, and no other");
  t.ok([...union].every((id) => !id.includes("/unlabelled-") && !id.includes("/malformed-")), "unlabelled and malformed pods are in no cache");

  // A pod in a slot r0 is about to give up, delivered to r0 by a watch event.
  const deliveredBy = async (r: InformedReplica, uid: string): Promise<boolean | undefined> =>
    ((await (await fetch(`${r.proxy.adminUrl ?? ""}/debug/shardcar?key=${uid}`)).json()) as { delivered?: { pods?: boolean } }).delivered?.pods;
  let movingUid = uuid(random);
  while (slotOfValue(movingUid, SLOTS) < 32 || slotOfValue(movingUid, SLOTS) >= 64) movingUid = uuid(random);
  api.store.create("pods", { metadata: { name: "moving", namespace: "web", uid: movingUid, labels: { app: "web", [LABEL]: formatSlot(slotOfValue(movingUid, SLOTS)) } }, spec: { containers: [{ name: "c", image: "x" }] } });
  t.ok(await eventually(async () => (await deliveredBy(replicas[0] as InformedReplica, movingUid)) === true, 10_000), "r0's watch delivered a pod of slot 32..63, and says so");

  // r0 loses slots 32..63 to r1: r0 only shrinks, r1 grows.
  const before = replicas.map((r) => ({ ...r.proxy.proxy.stats().get("pods") }));
  owners[0]?.set({ generation: 2, ranges: slotsToRanges(range(0, 32), SLOTS) });
  owners[1]?.set({ generation: 2, ranges: slotsToRanges(range(32, 128), SLOTS) });
  for (let i = 0; i < 200; i++) createPod(api, random, `late-${i}`);
  t.ok(await eventually(exact, 20_000), "after the change, every cache is exactly its new slots, new pods included");
  const after = replicas.map((r) => r.proxy.proxy.stats().get("pods"));
  t.same(
    [after[0]?.narrowedWatches, after[0]?.forcedRelists, after[0]?.lists],
    [(before[0]?.narrowedWatches ?? 0) + 1, before[0]?.forcedRelists, before[0]?.lists],
    "the shrinking member narrowed its watch in place, without a relist",
  );
  t.ok((after[0]?.syntheticDeletes ?? 0) > 0, `it sent synthetic DELETEDs for the slots it gave up (${after[0]?.syntheticDeletes ?? 0})`);
  t.ok((after[1]?.forcedRelists ?? 0) > (before[1]?.forcedRelists ?? 0) && (after[1]?.lists ?? 0) > (before[1]?.lists ?? 0), "the growing member relisted under its new slots");
  t.ok(await eventually(() => owners[0]?.applied.includes(2) === true && owners[1]?.applied.includes(2) === true, 10_000), "both report generation 2 applied");
  // Many objects share a slot: one r0 gave up must not vouch for an object its new owner is asked about (audit --canary).
  t.equal(await deliveredBy(replicas[0] as InformedReplica, movingUid), false, "after the handoff r0 no longer claims delivery in the slot it gave up");
  // The canary's question (`/debug/shardcar?key=<uid>`), answered by slot in labels mode.
  createPod(api, random, "canary");
  const uid = api.store.list("pods").find((p) => p.metadata?.name === "canary")?.metadata?.uid ?? "";
  const slot = slotOfValue(uid, SLOTS);
  const owner = current().findIndex((s) => s.includes(slot));
  t.ok(await eventually(() => [...(replicas[owner]?.cache("pods") ?? [])].some((id) => id.endsWith(`@${uid}`)), 10_000), "the canary reached its owner's cache by a watch event");
  const asked = await Promise.all(replicas.slice(0, N).map(async (r) => ((await (await fetch(`${r.proxy.adminUrl ?? ""}/debug/shardcar?key=${uid}`)).json()) as { delivered?: { pods?: boolean } }).delivered?.pods));
  t.same(
    asked,
    asked.map((_, i) => i === owner),
    `only the owner of slot ${slot} (r${owner}) says its watch delivered the new pod`,
  );
  const unlabelled = await Promise.all(replicas.map(async (r) => (await (await fetch(`${r.proxy.adminUrl ?? ""}/metrics`)).text()).match(/^shardcar_proxy_unlabelled_total\{[^}]*\} (\d+)/m)?.[1] ?? "0"));
  t.same(unlabelled, replicas.map(() => "0"), "no unlabelled object reached a proxy: the server left them out");
});
