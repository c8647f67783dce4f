import t, { type Test } from "tap";
import { clusterClock } from "../support/wait.ts";
import { RingEnv, sleep, TIMINGS, RELIST_MS } from "./harness.ts";

// The acceptance run of the ring, without controllers: a real coordinator and
// real members against devapi, each member behind a stub proxy that relists
// in RELIST_MS. The checker samples every 100 ms what the caches deliver.

async function scaleRun(t: Test, env: RingEnv): Promise<void> {
  await env.addMember("web-0");
  await env.settled(["web-0"]);
  // Sampling starts once the first table is committed: before that there is
  // nothing to cover (a new ring starts empty).
  env.phase = "graceful";
  env.startSampling();
  const steps: Array<[string, () => Promise<unknown>, string[]]> = [
    ["1→2", () => env.addMember("web-1"), ["web-0", "web-1"]],
    ["2→3", () => env.addMember("web-2"), ["web-0", "web-1", "web-2"]],
    ["3→4", () => env.addMember("web-3"), ["web-0", "web-1", "web-2", "web-3"]],
    ["4→3", () => env.leave("web-3"), ["web-0", "web-1", "web-2"]],
    ["3→2", () => env.leave("web-2"), ["web-0", "web-1"]],
  ];
  for (const [name, act, want] of steps) {
    const t0 = clusterClock.now();
    await act();
    await env.settled(want);
    env.sample();
    t.comment(`${name}: settled in ${clusterClock.now() - t0} ms`);
  }
  env.phase = "done";
}

t.test("overlap: scaling 1→2→3→4→3→2 never leaves a slot uncovered at any 100 ms sample", async (t) => {
  const env = await RingEnv.start("web");
  t.teardown(() => env.stop());
  env.createRing({ handoff: "overlap", slots: 256 });
  env.startCoordinator();
  await scaleRun(t, env);
  const graceful = env.samples.filter((s) => s.phase === "graceful");
  const gaps = graceful.filter((s) => s.uncovered > 0);
  const maxOverlap = Math.max(...graceful.map((s) => s.doubled));
  t.comment(`${graceful.length} samples (${graceful.filter((s) => s.periodic).length} periodic); max share in two caches at once: ${maxOverlap.toFixed(3)} (overlap mode duplicates, never gaps)`);
  t.ok(graceful.filter((s) => s.periodic).length >= 10, "the 100 ms checker took samples throughout");
  t.same(gaps, [], "no sample saw an uncovered slot");
  t.same(env.generationRegressions, [], "every change of a member's ranges carried a higher generation");
  t.ok(maxOverlap > 0, "the handoffs really overlapped (the checker sees both owners)");
});

t.test("exclusive: scaling 1→2→3→4→3→2 never puts a slot in two caches at any 100 ms sample", async (t) => {
  const env = await RingEnv.start("api");
  t.teardown(() => env.stop());
  env.createRing({ handoff: "exclusive", slots: 256 });
  const { registry } = env.startCoordinator();
  await scaleRun(t, env);
  const graceful = env.samples.filter((s) => s.phase === "graceful");
  const doubles = graceful.filter((s) => s.doubled > 0);
  const gapSamples = graceful.filter((s) => s.uncovered > 0).length;
  // Time with some slot uncovered, from the event-driven samples (each lasts until the next).
  let gapMs = 0;
  let longest = 0;
  let run = 0;
  for (let i = 0; i + 1 < graceful.length; i++) {
    const s = graceful[i];
    const next = graceful[i + 1];
    if (s === undefined || next === undefined) continue;
    if (s.uncovered > 0) {
      gapMs += next.at - s.at;
      run += next.at - s.at;
      longest = Math.max(longest, run);
    } else run = 0;
  }
  t.comment(`${graceful.length} samples (${graceful.filter((s) => s.periodic).length} periodic); ${gapSamples} saw a (bounded) gap, as exclusive mode allows: ${gapMs} ms in all over 5 steps, longest ${longest} ms`);
  t.ok(graceful.filter((s) => s.periodic).length >= 10, "the 100 ms checker took samples throughout");
  t.same(doubles, [], "no sample saw a slot in two caches");
  // The leader exports the gaps it left, one per gaining member of each step.
  const h = (await registry.getSingleMetricAsString("shardcar_ring_exclusive_gap_seconds")).split("\n");
  const count = Number(h.find((l) => l.startsWith("shardcar_ring_exclusive_gap_seconds_count"))?.split(" ").pop());
  const sum = Number(h.find((l) => l.startsWith("shardcar_ring_exclusive_gap_seconds_sum"))?.split(" ").pop());
  t.comment(`leader's account: ${count} gaps, ${(sum * 1000).toFixed(0)} ms in all; the sampler saw ${gapMs} ms`);
  t.ok(count >= 5, `a gap for each gainer of the 5 steps (${count})`);
  t.ok(sum > 0, "the exported gaps are not empty");
  t.same(env.generationRegressions, [], "every change of a member's ranges carried a higher generation");
});

t.test("a member killed without cleanup leaves a gap no longer than one lease duration plus one relist", async (t) => {
  const env = await RingEnv.start("crash");
  t.teardown(() => env.stop());
  const { registry } = env.startCoordinator();
  for (const n of ["web-0", "web-1", "web-2"]) await env.addMember(n);
  await env.settled(["web-0", "web-1", "web-2"]);
  t.equal(env.uncovered(), 0, "fully covered before the kill");

  // Timed on the members' and the leader's clock (test/support/quiet-clock.ts):
  // what the bound is about is the protocol's waits, not this machine's load.
  const killedAt = clusterClock.now();
  env.kill("web-1");
  let firstGap = 0;
  while (clusterClock.now() - killedAt < 10_000) {
    const u = env.uncovered();
    if (u > 0 && firstGap === 0) firstGap = clusterClock.now();
    if (u === 0 && firstGap !== 0) break;
    await sleep(10);
  }
  const uncoveredMs = clusterClock.now() - killedAt;
  const bound = TIMINGS.leaseDurationSeconds * 1000 + RELIST_MS;
  t.comment(`SIGKILL of web-1: keyspace uncovered for ${uncoveredMs} ms (bound: lease ${TIMINGS.leaseDurationSeconds * 1000} ms + relist ${RELIST_MS} ms = ${bound} ms, plus 500 ms for the leader's reaction)`);
  t.ok(firstGap > 0, "the kill did open a gap (the checker can see one)");
  t.ok(uncoveredMs <= bound + 500, `gap ${uncoveredMs} ms within ${bound} + 500 ms`);
  await env.settled(["web-0", "web-2"]);

  // The leader measured the same gap from its side, from web-1's last renewal.
  const h = (await registry.getSingleMetricAsString("shardcar_ring_crash_uncovered_seconds")).split("\n");
  const count = Number(h.find((l) => l.startsWith("shardcar_ring_crash_uncovered_seconds_count"))?.split(" ").pop());
  const sum = Number(h.find((l) => l.startsWith("shardcar_ring_crash_uncovered_seconds_sum"))?.split(" ").pop());
  t.equal(count, 1, "one crash recorded");
  t.comment(`leader's account of the crash: ${(sum * 1000).toFixed(0)} ms uncovered (from the last observed renewal)`);
  t.ok(sum > 0 && sum * 1000 <= bound + TIMINGS.retryPeriodMs + 500, "the exported uncovered time is in the same range");
  const fences = (await registry.getSingleMetricAsString("shardcar_ring_fences_total")).split("\n").find((l) => l.startsWith("shardcar_ring_fences_total{"));
  t.match(fences ?? "", / 1$/, "the dead member was fenced exactly once before its slots moved");
});
