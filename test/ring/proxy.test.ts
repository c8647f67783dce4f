import t from "tap";
import { seedPods } from "../../src/devapi/index.ts";
import { startPodReplica, type Replica } from "../../src/demo/replica.ts";
import { silentLogger } from "../../src/log.ts";
import { equal, union, type Range } from "../../src/shard/range.ts";
import { slotsToRanges } from "../../src/shard/table.ts";
import { parseSlots } from "../../src/ring/table.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { RingMember } from "../../src/ring/member.ts";
import { cacheContents, expectedShard, startChurn } from "../support/cluster.ts";
import { NS, RingEnv, TIMINGS, until } from "./harness.ts";

// The ring with the real proxy and real client-node informers instead of
// stub proxies: the handoff can only complete if the proxy reports each
// generation applied after its relists. Slot coverage is asserted at every
// sample; objects missing from every cache are measured and printed (see the
// comment at the end), and the final caches are checked object by object.

const NAMESPACES = ["team-a", "team-b", "team-c"];

t.test("real proxies and informers: 1→2→3→4→3→2 under churn, then a SIGKILL, never leaves a slot outside every member's proxy ranges and ends with exact caches", async (t) => {
  const env = await RingEnv.start("pods");
  const replicas = new Map<string, { member: RingMember; replica: Replica }>();
  t.teardown(async () => {
    for (const { member, replica } of replicas.values()) {
      member.halt();
      await replica.stop();
    }
    await env.stop();
  });
  seedPods(env.api, { count: 5_000, namespaces: NAMESPACES });
  env.startCoordinator();
  const resources = parseResources("pods");

  const add = async (name: string): Promise<void> => {
    const member = new RingMember({ kubeConfig: env.kc, namespace: NS, ring: env.ring, member: name, timings: TIMINGS, log: silentLogger() });
    const replica = await startPodReplica({ name, upstreamUrl: env.api.url, resources, ownership: member, logger: silentLogger() });
    replicas.set(name, { member, replica });
    await member.start();
  };
  const settled = async (names: string[]): Promise<void> => {
    await until(
      `members [${names.join(",")}] with exact caches`,
      () => {
        const st = env.ringStatus();
        if (st?.committed === undefined || st.pending !== undefined) return false;
        if (st.committed.members.map((m) => m.name).sort().join(",") !== [...names].sort().join(",")) return false;
        const slotCount = st.slotCount ?? 256;
        return names.every((n) => {
          const entry = st.committed?.members.find((m) => m.name === n);
          const slots = entry === undefined ? undefined : parseSlots(entry.slots, slotCount);
          const cur = replicas.get(n)?.member.current();
          return slots?.ok === true && cur !== undefined && cur.generation === st.committed?.generation && equal(cur.ranges, slotsToRanges(slots.value, slotCount));
        });
      },
      15_000,
    );
  };

  // Objects that existed at the previous sample and still exist should be in
  // some cache; and the members' active proxy ranges must cover every slot.
  const missing: string[] = [];
  let uncoveredSamples = 0;
  let previous = new Set<string>();
  let sampling = false;
  const sampler = setInterval(() => {
    if (!sampling) return;
    const now = new Set(env.api.store.list({ group: "", version: "v1", resource: "pods" }).map((o) => `${o.metadata?.namespace}/${o.metadata?.name}@${o.metadata?.uid}`));
    const cached = new Set<string>();
    for (const { replica } of replicas.values()) for (const k of cacheContents(replica)) cached.add(k);
    for (const k of previous) if (now.has(k) && !cached.has(k)) missing.push(k);
    previous = now;
    let covered: Range[] = [];
    for (const { member } of replicas.values()) covered = union(covered, member.current().ranges);
    if (!equal(covered, [{ start: 0n, end: 1n << 64n }])) uncoveredSamples++;
  }, 100);
  t.teardown(() => clearInterval(sampler));

  const leave = async (name: string): Promise<void> => {
    const leaving = replicas.get(name);
    await leaving?.member.leave();
    await leaving?.replica.stop();
    replicas.delete(name);
  };
  const podLists = (): number => env.api.stats.lists.get("pods") ?? 0;
  await add("web-0");
  await settled(["web-0"]);
  const churn = startChurn(env.api, { ratePerSec: 50, namespaces: NAMESPACES });
  sampling = true;
  const lists: string[] = [];
  for (const [step, act, want] of [
    ["1→2", () => add("web-1"), ["web-0", "web-1"]],
    ["2→3", () => add("web-2"), ["web-0", "web-1", "web-2"]],
    ["3→4", () => add("web-3"), ["web-0", "web-1", "web-2", "web-3"]],
    ["4→3", () => leave("web-3"), ["web-0", "web-1", "web-2"]],
    ["3→2", () => leave("web-2"), ["web-0", "web-1"]],
  ] as const) {
    const before = podLists();
    await act();
    await settled([...want]);
    lists.push(`${step}: ${podLists() - before} lists, ${missing.length} misses so far`);
  }
  const gracefulMisses = missing.length;
  const gracefulUncovered = uncoveredSamples;
  // SIGKILL: the member stops renewing and its proxy vanishes, with no goodbye.
  const killed = replicas.get("web-1");
  const killedAt = Date.now();
  killed?.member.halt();
  await killed?.replica.stop();
  replicas.delete("web-1");
  await settled(["web-0"]);
  const recoveredMs = Date.now() - killedAt;
  sampling = false;
  t.comment(`after SIGKILL of web-1 the survivor owned the keyspace again after ${recoveredMs} ms (lease ${TIMINGS.leaseDurationSeconds} s + one relist)`);
  // "One relist" of 2,500 pods through a proxy takes well under a second on an
  // idle machine but several on a loaded 2-core CI box running other suites:
  // the bound allows 10 s for it, and the figure itself is printed above.
  t.ok(recoveredMs <= TIMINGS.leaseDurationSeconds * 1000 + 10_000, "the crash gap is bounded by the lease duration plus a relist");
  t.comment(`pod LISTs at devapi per step (every member's forced relists, the newcomer's first list included): ${lists.join(", ")}`);
  const ops = await churn.stop();
  // client-node's informer may wait (1 s, doubling) between a relist and its
  // next watch after a 410: the caches converge, but not at once.
  await until(
    "exact caches",
    () => [...replicas.values()].every(({ member, replica }) => {
      const want = expectedShard(env.api, member.current().ranges, "uid");
      const got = cacheContents(replica);
      return want.size === got.size && [...want].every((k) => got.has(k));
    }),
    15_000,
  ).catch(() => undefined);

  t.comment(`${ops} writes during the run`);
  // Gap-free graceful steps rely on the proxy's side of the contract
  // (docs/rings.md): relist only when the ranges change, count a relist once
  // the watch resumes from a list of the current ranges, and answer 410 to a
  // watch resuming from a list made under older ranges.
  t.comment(`objects missing from every cache at some 100 ms sample: ${missing.length}`);
  t.equal(gracefulUncovered, 0, "overlap mode: no graceful step left a slot outside every member's active proxy ranges");
  // Object level, measured rather than asserted: a member that narrows
  // relists (its watch ends with 410), and until that relist is through, new
  // objects in the ranges it keeps reach no cache. The synthetic-DELETE path
  // (docs/rings.md) would remove this window; it is not built yet.
  t.comment(`object-level misses during graceful steps: ${gracefulMisses} (object, sample) pairs, e.g. ${missing.slice(0, 2).join(", ")}`);
  let all: Range[] = [];
  for (const [name, { member, replica }] of replicas) {
    const want = expectedShard(env.api, member.current().ranges, "uid");
    const got = cacheContents(replica);
    t.same([...got].filter((k) => !want.has(k)), [], `${name} holds nothing outside its ranges`);
    t.same([...want].filter((k) => !got.has(k)), [], `${name} holds everything in its ranges`);
    all = union(all, member.current().ranges);
  }
  t.same(all, [{ start: 0n, end: 1n << 64n }], "the members' ranges cover the keyspace");
});
