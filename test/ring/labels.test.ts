/**
 * Ring mode in labels mode, gate off: real RingMembers driven by the real
 * coordinator, each followed by its proxy in labels mode (the slot count
 * read from the member, as `shardcar proxy --filter labels` does) and a
 * client-node informer. A ShardRing with 64 slots, not the default 256, so
 * a proxy that assumed the default would be seen. On 1→2 the first member
 * only loses slots and narrows in place; on 2→1 it gains them and relists.
 * Every cache ends exactly its member's share of the labelled pods.
 */
import t from "tap";
import { seedPods } from "../../src/devapi/index.ts";
import { formatSlot, slotLabelKey, slotOfValue, slotsOfRanges } from "../../src/shard/slots.ts";
import { until } from "./harness.ts";
import { ReplicaRing } from "./replicas.ts";

const SLOTS = 64;
const LABEL = slotLabelKey("labelled");

t.test("ring members in labels mode ask for their slots by label, narrow when they only lose slots, relist when they gain", async (t) => {
  const ring = await ReplicaRing.start(t, {
    ring: "labelled",
    pods: 0,
    namespaces: [],
    handoff: "overlap",
    slots: SLOTS,
    filtering: (member) => ({ mode: "labels", labelKey: LABEL, slotCount: () => member.slotCount }),
  });
  const api = ring.env.api;
  api.gate = "off";
  seedPods(api, { count: 2000, namespaces: ["web", "api"] });
  for (const p of api.store.list("pods")) api.store.patch("pods", p.metadata?.namespace, p.metadata?.name ?? "", { metadata: { labels: { [LABEL]: formatSlot(slotOfValue(p.metadata?.uid ?? "", SLOTS)) } } });
  const stats = (name: string) => ring.replicas.get(name)?.replica.proxy.proxy.stats().get("pods");

  await ring.add("web-0");
  await ring.settled(["web-0"]);
  await until("web-0 caches every labelled pod", () => ring.cachesExact(), 15_000);
  const sent = api.stats.requests.filter((q) => q.url.startsWith("/api/v1/pods?") && !q.url.includes("watch=")).map((q) => new URL(q.url, "http://x").searchParams.get("labelSelector"));
  t.equal(sent[sent.length - 1], `${LABEL} in (${Array.from({ length: SLOTS }, (_, i) => i).join(",")})`, "its last LIST asked for all 64 slots of the ring, by label");

  const before = { ...stats("web-0") };
  await ring.add("web-1");
  await ring.settled(["web-0", "web-1"]);
  await until("exact caches after 1→2", () => ring.cachesExact(), 15_000);
  const after = stats("web-0");
  t.same([after?.narrowedWatches, after?.forcedRelists, after?.lists], [(before.narrowedWatches ?? 0) + 1, before.forcedRelists, before.lists], "web-0 only lost slots: it narrowed in place, without a relist");
  const held = slotsOfRanges(ring.replicas.get("web-1")?.member.current().ranges ?? [], SLOTS);
  t.ok(held.length > 0 && held.length < SLOTS, `web-1 holds ${held.length} of ${SLOTS} slots`);

  const before2 = { ...stats("web-0") };
  await ring.leave("web-1");
  await ring.settled(["web-0"]);
  await until("exact caches after 2→1", () => ring.cachesExact(), 15_000);
  const after2 = stats("web-0");
  t.ok((after2?.forcedRelists ?? 0) > (before2.forcedRelists ?? 0) && (after2?.lists ?? 0) > (before2.lists ?? 0), "web-0 gained slots: it relisted under the new label selector");
});
