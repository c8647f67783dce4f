import t from "tap";
import { equal, union, type Range } from "../../src/shard/range.ts";
import { startChurn } from "../support/cluster.ts";
import { clusterClock } from "../support/wait.ts";
import { TIMINGS, until } from "./harness.ts";
import { FULL_KEYSPACE, ReplicaRing, type Snapshot } from "./replicas.ts";

// The ring with the real proxy and real client-node informers instead of
// stub proxies: the handoff can only complete if the proxy reports each
// generation applied after its relists. Slot coverage is asserted at every
// sample; objects missing from every cache are measured and printed (see the
// comment at the end), and the final caches are checked object by object.
// The exclusive-mode counterpart is test/ring/proxy-exclusive.test.ts; the
// replica and sampler plumbing both use is test/ring/replicas.ts.

const NAMESPACES = ["team-a", "team-b", "team-c"];

t.test("real proxies and informers: 1→2→3→4→3→2 under churn, then a SIGKILL, never leaves a slot outside every member's proxy ranges and ends with exact caches", async (t) => {
  const ring = await ReplicaRing.start(t, { ring: "pods", pods: 5_000, namespaces: NAMESPACES });
  const { env, replicas } = ring;

  // Objects that existed at the previous sample and still exist should be in
  // some cache; and the members' active proxy ranges must cover every slot.
  const missing: string[] = [];
  let uncoveredSamples = 0;
  let previous: ReadonlySet<string> = new Set<string>();
  const sample = ({ store: now, caches, covered }: Snapshot): void => {
    const cached = new Set<string>();
    for (const c of caches.values()) for (const k of c) cached.add(k);
    for (const k of previous) if (now.has(k) && !cached.has(k)) missing.push(k);
    previous = now;
    if (!equal(covered, FULL_KEYSPACE)) uncoveredSamples++;
  };

  await ring.add("web-0");
  await ring.settled(["web-0"]);
  const churn = startChurn(t, env.api, { ratePerSec: 50, namespaces: NAMESPACES });
  const churnStart = clusterClock.now();
  const stopSampling = ring.sampleEvery(100, sample);
  const lists: string[] = [];
  const scaleOutLists: number[] = [];
  for (const [step, act, want] of [
    ["1→2", () => ring.add("web-1"), ["web-0", "web-1"]],
    ["2→3", () => ring.add("web-2"), ["web-0", "web-1", "web-2"]],
    ["3→4", () => ring.add("web-3"), ["web-0", "web-1", "web-2", "web-3"]],
    ["4→3", () => ring.leave("web-3"), ["web-0", "web-1", "web-2"]],
    ["3→2", () => ring.leave("web-2"), ["web-0", "web-1"]],
  ] as const) {
    const before = ring.podLists();
    await act();
    await ring.settled([...want]);
    const n = ring.podLists() - before;
    if (step === "1→2" || step === "2→3" || step === "3→4") scaleOutLists.push(n);
    lists.push(`${step}: ${n} lists, ${missing.length} misses so far`);
  }
  const gracefulMisses = missing.length;
  const gracefulUncovered = uncoveredSamples;
  // SIGKILL: the member stops renewing and its proxy vanishes, with no goodbye.
  const killedAt = clusterClock.now();
  await ring.kill("web-1");
  await ring.settled(["web-0"]);
  const recoveredMs = clusterClock.now() - killedAt;
  stopSampling();
  t.comment(`after SIGKILL of web-1 the survivor owned the keyspace again after ${Math.round(recoveredMs)} ms (lease ${TIMINGS.leaseDurationSeconds} s + one relist)`);
  // "One relist" of 2,500 pods through a proxy takes well under a second on an
  // idle machine but several on a loaded 2-core CI box running other suites:
  // the bound allows 10 s for it, and the figure itself is printed above.
  t.ok(recoveredMs <= TIMINGS.leaseDurationSeconds * 1000 + 10_000, "the crash gap is bounded by the lease duration plus a relist");
  t.comment(`pod LISTs at devapi per step (every member's forced relists, the newcomer's first list included): ${lists.join(", ")}`);
  // P7: a scale-out by one costs the joiner's first LIST and nothing else:
  // the members that lose slots narrow with synthetic DELETEDs, and the
  // joiner's proxy holds that LIST until it has slots.
  t.same(scaleOutLists, [1, 1, 1], "P7: each scale-out by one made exactly one LIST (the new member's first)");
  const ops = await churn.stop();
  const churnSeconds = (clusterClock.now() - churnStart) / 1000;
  // client-node's informer may wait (1 s, doubling) between a relist and its
  // next watch after a 410: the caches converge, but not at once.
  await until("exact caches", () => ring.cachesExact(), 15_000).catch(() => undefined);

  t.comment(`${ops} writes during the run (${(ops / churnSeconds).toFixed(0)}/s over ${churnSeconds.toFixed(1)} s)`);
  // Gap-free graceful steps rely on the proxy's side of the contract
  // (docs/rings.md): relist only when the ranges change, count a relist once
  // the watch resumes from a list of the current ranges, and answer 410 to a
  // watch resuming from a list made under older ranges.
  t.comment(`objects missing from every cache at some 100 ms sample: ${missing.length}`);
  t.equal(gracefulUncovered, 0, "overlap mode: no graceful step left a slot outside every member's active proxy ranges");
  // Object level, measured rather than asserted: members that only lose
  // slots narrow in place, but a gainer's relist (scale-in) is counted once
  // its watch resumes, and client-node may pause between the two.
  t.comment(`object-level misses during graceful steps: ${gracefulMisses} (object, sample) pairs, e.g. ${missing.slice(0, 2).join(", ")}`);
  let all: Range[] = [];
  for (const [name, { member }] of replicas) {
    const { extra, missing: lacking } = ring.cacheDiff(name);
    t.same(extra, [], `${name} holds nothing outside its ranges`);
    t.same(lacking, [], `${name} holds everything in its ranges`);
    all = union(all, member.current().ranges);
  }
  t.same(all, [{ start: 0n, end: 1n << 64n }], "the members' ranges cover the keyspace");
});
