import t, { type Test } from "tap";
import type { V1Pod } from "@kubernetes/client-node";
import { complement, equal, ratio, union, type Range } from "../../src/shard/range.ts";
import { startChurn } from "../support/cluster.ts";
import { clusterClock } from "../support/wait.ts";
import { sleep, until } from "./harness.ts";
import { FULL_KEYSPACE, ReplicaRing, slowLink, type RingReplica, type Snapshot } from "./replicas.ts";

// Issue #5, acceptance point 2: exclusive mode with the real proxy and real
// client-node informers (each behind its own proxy, driven by the real
// coordinator and members), ~50 writes/s over ~5,000 pods, scaling
// 1→2→3→4→3→2. No object may be in two informer caches at once during the
// graceful steps. test/ring/scale.test.ts shows the same with stub proxies;
// here the handoff also depends on the proxy's side of the contract
// (docs/rings.md): narrowing filters at once and ends the watches with 410,
// and the proxy reports a generation applied only once the informer's relist
// under the narrowed ranges is in its cache (its WATCH resumed from that LIST),
// so the leader commits, and a gainer widens, only after the loser's cache
// dropped what it gave up.
//
// Two detectors, both asserted: a sampler every 100 ms compares all caches
// at one instant, and every informer ADD checks at once whether another cache
// holds the same object (a double always begins with such an ADD, so that one
// cannot miss a short one). Slot gaps, which exclusive mode allows, and
// objects missing from every cache are measured and printed, not asserted.

const NAMESPACES = ["team-a", "team-b", "team-c"];

const keyOf = (o: V1Pod): string => `${o.metadata?.namespace}/${o.metadata?.name}@${o.metadata?.uid}`;

/** Both doubles detectors, plus the measurements, for one ring. */
class Watcher {
  step = "setup";
  /** Objects an informer added while another replica's cache held it. */
  readonly addDoubles: string[] = [];
  /** (object, sample) pairs where the object was in two caches. */
  readonly doubles: string[] = [];
  /** Ownership changes whose generation did not grow (must stay empty). */
  readonly regressions: string[] = [];
  /** (object, sample) pairs where an object that existed at the previous sample and still exists was in no cache. */
  readonly missing: string[] = [];
  /** Slot gaps, timed at every change of a member's ranges while `measuring`. */
  readonly gaps: Array<{ step: string; ms: number; share: number }> = [];
  samples = 0;
  doubleSamples = 0;
  uncoveredSamples = 0;
  measuring = false;
  ring: ReplicaRing | undefined;
  #gap: { since: number; step: string; share: number } | undefined;
  #previous: ReadonlySet<string> = new Set<string>();

  /** Pass as `onReplica`: hooks the ADD check and the range-change bookkeeping. */
  readonly hook = (name: string, { member, replica }: RingReplica): void => {
    replica.informer.on("add", (obj) => {
      for (const [other, { replica: o }] of this.ring?.replicas ?? []) {
        if (other === name) continue;
        const there = o.informer.get(obj.metadata?.name ?? "", obj.metadata?.namespace);
        if (there !== undefined && there.metadata?.uid === obj.metadata?.uid) this.addDoubles.push(`${this.step}: ${keyOf(obj)} added to ${name} while in ${other}`);
      }
    });
    // The proxy tells new ranges from old by their generation: every change
    // must carry a higher one, except into and out of the fenced state (0).
    member.subscribe((next, prev) => {
      if (next.generation !== 0 && prev.generation !== 0 && next.generation <= prev.generation) this.regressions.push(`${name}: ${prev.generation} → ${next.generation}`);
      this.#noteCoverage();
    });
  };

  #noteCoverage(): void {
    if (!this.measuring || this.ring === undefined) return;
    const share = ratio(complement(this.ring.covered()));
    const gap = this.#gap;
    if (share > 0 && gap === undefined) this.#gap = { since: clusterClock.now(), step: this.step, share };
    else if (share > 0 && gap !== undefined) gap.share = Math.max(gap.share, share);
    else if (share === 0 && gap !== undefined) {
      this.gaps.push({ step: gap.step, ms: clusterClock.now() - gap.since, share: gap.share });
      this.#gap = undefined;
    }
  }

  /** The 100 ms sampler's check: one synchronous snapshot of every cache. */
  readonly sample = ({ store, caches, covered }: Snapshot): void => {
    this.samples++;
    const holder = new Map<string, string>();
    let doubled = false;
    for (const [name, cache] of caches) {
      for (const k of cache) {
        const first = holder.get(k);
        if (first === undefined) holder.set(k, name);
        else {
          doubled = true;
          this.doubles.push(`${this.step}: ${k} in ${first} and ${name}`);
        }
      }
    }
    if (doubled) this.doubleSamples++;
    if (!equal(covered, FULL_KEYSPACE)) this.uncoveredSamples++;
    for (const k of this.#previous) if (store.has(k) && !holder.has(k)) this.missing.push(`${this.step}: ${k}`);
    this.#previous = store;
  };

  report(t: Test): void {
    const gapMs = this.gaps.reduce((a, g) => a + g.ms, 0);
    const longest = this.gaps.reduce((a, g) => Math.max(a, g.ms), 0);
    t.comment(
      `slot gaps (measured; exclusive mode allows them): ${this.gaps.length} gaps, ${gapMs} ms in all, longest ${longest} ms${this.#gap === undefined ? "" : " (one still open)"}; ${this.uncoveredSamples} of ${this.samples} samples saw one` +
        (this.gaps.length === 0 ? "" : `: ${this.gaps.map((g) => `${g.step} ${g.ms} ms (${(g.share * 100).toFixed(1)}% of the keyspace)`).join(", ")}`),
    );
    t.comment(`objects missing from every cache at some sample (measured): ${this.missing.length} (object, sample) pairs, e.g. ${this.missing.slice(0, 2).join(", ")}`);
    t.comment(`objects in two caches: ${this.doubles.length} (object, sample) pairs in ${this.doubleSamples} samples; ${this.addDoubles.length} informer ADDs of an object another cache held`);
  }

  /** `todo`: a known failure, reported (with what was found) but not failing the run. */
  assertNoDoubles(t: Test, todo?: string): void {
    const extra = todo === undefined ? {} : { todo };
    t.ok(this.samples >= 10, "the 100 ms sampler took samples throughout");
    t.same(this.doubles.slice(0, 10), [], "exclusive mode: no 100 ms sample saw an object in two replicas' caches (first 10 shown)", extra);
    t.same(this.addDoubles.slice(0, 10), [], "exclusive mode: no informer added an object while another replica's cache held it (first 10 shown)", extra);
    t.same(this.regressions, [], "every change of a member's ranges carried a higher generation");
  }
}

/** Every live cache holds exactly its member's ranges, and the ranges cover the keyspace. */
function assertExact(t: Test, ring: ReplicaRing): void {
  let all: Range[] = [];
  for (const [name, { member }] of ring.replicas) {
    const { extra, missing } = ring.cacheDiff(name);
    t.same(extra, [], `${name} holds nothing outside its ranges`);
    t.same(missing, [], `${name} holds everything in its ranges`);
    all = union(all, member.current().ranges);
  }
  t.same(all, FULL_KEYSPACE, "the members' ranges cover the keyspace");
}

t.test("exclusive, real proxies and informers: 1→2→3→4→3→2 under churn never puts an object in two caches and ends with exact caches", async (t) => {
  const w = new Watcher();
  const ring = await ReplicaRing.start(t, { ring: "pods-exclusive", pods: 5_000, namespaces: NAMESPACES, handoff: "exclusive", onReplica: w.hook });
  w.ring = ring;

  await ring.add("web-0");
  await ring.settled(["web-0"]);
  const churn = startChurn(t, ring.env.api, { ratePerSec: 50, namespaces: NAMESPACES });
  w.measuring = true;
  const stopSampling = ring.sampleEvery(100, w.sample);
  const startedAt = clusterClock.now();
  const perStep: string[] = [];
  for (const [name, act, want] of [
    ["1→2", () => ring.add("web-1"), ["web-0", "web-1"]],
    ["2→3", () => ring.add("web-2"), ["web-0", "web-1", "web-2"]],
    ["3→4", () => ring.add("web-3"), ["web-0", "web-1", "web-2", "web-3"]],
    ["4→3", () => ring.leave("web-3"), ["web-0", "web-1", "web-2"]],
    ["3→2", () => ring.leave("web-2"), ["web-0", "web-1"]],
  ] as const) {
    w.step = name;
    const t0 = clusterClock.now();
    const lists0 = ring.podLists();
    await act();
    await ring.settled([...want]);
    perStep.push(`${name}: ${clusterClock.now() - t0} ms, ${ring.podLists() - lists0} pod LISTs`);
  }
  // settled() waits for the members' ranges, not for their informers: the
  // last step's gainers may still be relisting. Keep sampling until every
  // cache is exact (or 15 s), then stop.
  w.step = "after 3→2";
  await until("exact caches", () => ring.cachesExact(), 15_000).catch(() => undefined);
  stopSampling();
  w.measuring = false;
  const gracefulMs = clusterClock.now() - startedAt;
  const ops = await churn.stop();
  await until("exact caches", () => ring.cachesExact(), 15_000).catch(() => undefined);

  t.comment(`steps (action to the committed table enforced by every member): ${perStep.join("; ")}`);
  t.comment(`${ops} writes in ${gracefulMs} ms of graceful steps; ${w.samples} samples every 100 ms`);
  w.report(t);
  w.assertNoDoubles(t);
  assertExact(t, ring);
});

// A quick 2→3→2 where the newcomer's proxy reaches the apiserver over a slow
// link (responses 1 s late): it leaves while the LIST of its widening is still
// in flight, and its process lingers a few seconds after leaving (a pod's
// termination), as a controller's does. Exclusive mode must still never put
// an object in two caches: the leaver may acknowledge its narrowing only once
// its informer relisted under the narrowed ranges. (Two survivors, so the
// leave has two gainers and fits one handoff under any relist budget ≥ 2.)
//
// Failed at 470f028 (about 1,600 double ADDs): RingMember acknowledged a
// generation by itself when its ranges equalled the last ones the proxy
// marked applied, even if the ranges had changed in between and the proxy's
// relist for them was still in flight. The leaver (∅ → its slots → ∅)
// acknowledged its narrowing at once, the leader committed, the gainers
// relisted, and then the leaver's LIST of its slots landed in its cache.
// The member now forgets the applied ranges whenever it publishes others.
const SLOW_MS = 1_000;
const LINGER_MS = 3_000;
t.test(
  "exclusive, real proxies and informers: a member that leaves while its widening LIST is in flight (slow link) never shares an object with another cache",
  async (t) => {
    const w = new Watcher();
    const ring = await ReplicaRing.start(t, { ring: "slow-leaver", pods: 5_000, namespaces: NAMESPACES, handoff: "exclusive", onReplica: w.hook });
    w.ring = ring;
    for (const n of ["web-0", "web-1"]) await ring.add(n);
    await ring.settled(["web-0", "web-1"]);
    await until("exact caches before the join", () => ring.cachesExact(), 15_000);
    const churn = startChurn(t, ring.env.api, { ratePerSec: 50, namespaces: NAMESPACES });
    w.measuring = true;
    const stopSampling = ring.sampleEvery(100, w.sample);

    w.step = "2→3";
    await ring.add("web-2", { upstreamUrl: await slowLink(t, ring.env.api.url, SLOW_MS) });
    await ring.settled(["web-0", "web-1", "web-2"]);
    w.step = "3→2";
    const leaver = ring.replicas.get("web-2");
    await leaver?.member.leave();
    await ring.settled(["web-0", "web-1"]);
    await sleep(LINGER_MS);
    w.step = "after 3→2";
    await ring.kill("web-2"); // its process exits (it enforces nothing already)
    stopSampling();
    w.measuring = false;
    await churn.stop();
    await until("exact caches", () => ring.cachesExact(), 15_000).catch(() => undefined);

    t.comment(`web-2's proxy behind a link ${SLOW_MS} ms slow; its process lingered ${LINGER_MS} ms after leaving`);
    w.report(t);
    w.assertNoDoubles(t);
    assertExact(t, ring);
  },
);
