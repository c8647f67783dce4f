/**
 * S1, the ring at the size people shard: M members over P pods (full: 64 ×
 * 200,000; quick: 16 × 20,000) on a devapi process (gate on, shardSelector
 * mode), under the real coordinator: a `shardcar manager` process (its
 * webhook serving the bench certificate, cert-manager mode), whose leader
 * runs `runCoordinator`; its CPU and memory are read from /proc.
 *
 * What runs where, exactly:
 * - every member is a real `shardcar proxy --shards ring` process (its ring
 *   member, Lease, handoff ledger, filters and synthetic DELETEs are the
 *   sidecar's own, with the CLI's default timings);
 * - the controllers behind them are not 64 informer processes (64 × ~100 MiB
 *   and a core-second each to start do not fit beside 64 proxies on 2 cores):
 *   they are client-node's reflector (`ListWatch` + `Watch`, the code a
 *   client-node informer runs) in one process, keeping each pod's identity
 *   only and reading LISTs as a stream (bench/children/reflector-fleet.ts).
 *
 * - members and the fleet run at niceness 10 below devapi and the manager
 *   (bench/lib/proc.ts, WORKLOAD_NICENESS): on a cluster the apiserver has
 *   nodes of its own, and here 64 members starving it made Lease answers
 *   time out, so the members fenced themselves because of the machine.
 *   The rig is bench/lib/ring-rig.ts, shared with S5.
 *
 * Steps: start (M members spawned at once, as a Deployment of M replicas
 * under a running manager), scale M → M+1, one member leaves (SIGTERM: the
 * proxy leaves the ring, then exits), one crashes (SIGKILL: no goodbye; the
 * leader waits for its Lease to expire, fences it, hands its slots on).
 * For each step, from the action until exact coverage (the committed table
 * holds exactly the live members, nothing pending, every proxy enforces its
 * committed slots at the committed generation, every cache holds exactly
 * the pods of its slots, so every pod is held once):
 * - time to exact coverage;
 * - pod LISTs devapi served, next to the gaining members of the step's
 *   handoffs (target: one LIST per gain), and per proxy; and next to the
 *   LISTs the reflectors made (a miss unless they are equal);
 * - the relist budget (`spec.relistBudget`, default 1 keyspace): the most
 *   keyspace the gainers of one pending table relist between them (graceful
 *   steps: target ≤ budget; a crash is exempt: coverage beats the budget),
 *   and the most LIST answers streaming at once, reported;
 * - the start against one unsharded replica's start (design.md, S1): exact
 *   coverage within lease duration + one full list, pods listed ≤ 1.25 × the
 *   pods, and no member ever given more than twice its final share of slots
 *   in any table the ring published;
 * - the coordinator's CPU and peak RSS (/proc);
 * - the ShardRing's size (the whole object, as the watch delivers it).
 * And, computed rather than run: the ShardRing's size for growing member
 * counts (bench/lib/ring-status-size.ts) and the largest that fits
 * under etcd's 1.5 MiB.
 *
 * Usage: node bench/macro/s1-ring-scale.ts [--quick]
 *   S1_MEMBERS, S1_PODS override the sizes.
 */
import { DEFAULT_MEMBER_TIMINGS } from "../../src/ring/member.ts";
import { relistCost } from "../../src/ring/handoff.ts";
import { DEFAULT_RELIST_BUDGET } from "../../src/ring/table.ts";
import { slotsOf } from "../../src/shard/table.ts";
import type { Bench, BenchResult } from "../lib/bench.ts";
import { s1ListAgreement } from "../lib/gates.ts";
import { MemorySampler, procMemory } from "../lib/memory.ts";
import { cpuMsOf, httpGet, sleep } from "../lib/proc.ts";
import type { ListRecord } from "../children/reflector-fleet.ts";
import { epoch, gainersOf, maxConcurrent, pool, RingRig, type Replica } from "../lib/ring-rig.ts";
import { ETCD_OBJECT_LIMIT, largestFitting, ringObjectBytes } from "../lib/ring-status-size.ts";

const MiB = 1024 * 1024;

interface StepFigures {
  readonly step: string;
  readonly members: number;
  readonly ms: number;
  /** Pod LISTs devapi served during the step. */
  readonly lists: number;
  /** LISTs by the step's reflectors: must equal `lists` (support/gates.ts, s1ListAgreement). */
  readonly clientLists: number;
  /** Gains in the step's handoffs: a member gaining slots in two handoffs counts twice. */
  readonly gains: number;
  readonly handoffs: number;
  readonly maxGainers: number;
  /** The most LIST answers streaming at once. */
  readonly maxConcurrentLists: number;
  /** The most keyspace the gainers of one pending table relist between them (`relistCost`). */
  readonly keyspaceAtOnce: number;
  /** Pods in the LIST answers the step's reflectors received. */
  readonly listedPods: number;
  /** The most slots any live member held in one table the ring published (committed ∪ pending). */
  readonly peakSlots: number;
  /** `name:lists` for every proxy that sent pod LISTs in the step (its /debug/shardcar counters). */
  readonly perMember: string;
  readonly coordinatorCpuMs: number;
  readonly coordinatorPeakMiB: number;
  readonly coordinatorRssMiB: number;
  readonly ringBytes: number;
  readonly exempt: boolean;
}

export const bench: Bench = async ({ quick }) => {
  const members = Number(process.env["S1_MEMBERS"] ?? (quick ? 16 : 64));
  const pods = Number(process.env["S1_PODS"] ?? (quick ? 20_000 : 200_000));
  const budget = DEFAULT_RELIST_BUDGET;
  const trace = process.env["S1_TRACE"] === "1";
  const benchStart = performance.now();
  const rig = new RingRig({ name: "S1", members, pods, trace });
  try {
    await rig.start();
    const { coordinator, live, seen, probe, fullProbe, metricsUrl, slotCount } = rig;
    const join = (name: string): Promise<Replica> => rig.join(name);
    const drop = (name: string): Promise<void> => rig.drop(name);
    const settle = (what: string, timeoutMs: number): Promise<void> => rig.settle(what, timeoutMs);
    const podLists = (): Promise<number> => rig.podLists();
    const proxyLists = (): Promise<Map<string, number>> => rig.proxyLists();

    const steps: StepFigures[] = [];
    /** Runs one step: `act`, then waits for exact coverage and gathers the step's figures. */
    const runStep = async (step: string, act: () => Promise<void>, timeoutMs: number, exempt = false): Promise<void> => {
      const listsBefore = await podLists();
      const perBefore = await proxyLists();
      const cpuBefore = cpuMsOf(coordinator.pid);
      const rss = new MemorySampler(coordinator.pid, 200);
      const t0 = performance.now();
      const since = epoch();
      await act();
      await settle(step, timeoutMs);
      const ms = performance.now() - t0;
      const until = epoch();
      const coordinatorCpuMs = cpuMsOf(coordinator.pid) - cpuBefore;
      const peak = rss.stop().rss;
      // Late relists still count: look again a moment later (P7 does the same).
      await sleep(quick ? 1000 : 3000);
      const lists = (await podLists()) - listsBefore;
      const perAfter = await proxyLists();
      const { lists: records } = await rig.askFleet<{ lists: ListRecord[] }>({ type: "lists", since }, "lists", 30_000);
      const window = seen.filter((s) => s.at >= since && s.at <= until);
      const pendings = new Map<number, string[]>();
      for (const s of window) if (s.tables?.pending !== undefined) pendings.set(s.tables.pending.generation, gainersOf(s.tables));
      const gains = [...pendings.values()].reduce((n, g) => n + g.length, 0);
      const keyspaceAtOnce = Math.max(0, ...window.map((w) => (w.tables?.pending === undefined ? 0 : relistCost(w.tables.committed.owners, w.tables.pending.owners))));
      const peakSlots = Math.max(
        0,
        ...window.flatMap((w) => {
          const t = w.tables;
          if (t === undefined) return [];
          return [...live.keys()].map((n) => new Set([...slotsOf(t.committed.owners, n), ...(t.pending === undefined ? [] : slotsOf(t.pending.owners, n))]).size);
        }),
      );
      steps.push({
        step,
        members: live.size,
        ms: Math.round(ms),
        lists,
        // A reflector whose proxy is gone retries against a closed port: those never reached devapi.
        clientLists: records.filter((r) => r.ok).length,
        gains,
        handoffs: pendings.size,
        maxGainers: Math.max(0, ...[...pendings.values()].map((g) => g.length)),
        maxConcurrentLists: maxConcurrent(records.filter((r) => r.ok && Number.isFinite(r.start)).map((r) => [r.start, r.end] as const)),
        keyspaceAtOnce,
        listedPods: records.filter((r) => r.ok).reduce((n, r) => n + r.items, 0),
        peakSlots,
        perMember: [...perAfter]
          .map(([n, v]) => [n, v - (perBefore.get(n) ?? 0)] as const)
          .filter(([, v]) => v > 0)
          .map(([n, v]) => `${n}:${v}`)
          .join(" "),
        coordinatorCpuMs,
        coordinatorPeakMiB: Math.round((peak / MiB) * 10) / 10,
        coordinatorRssMiB: Math.round((procMemory(coordinator.pid).rss / MiB) * 10) / 10,
        ringBytes: Math.max(0, ...window.map((s) => s.bytes)),
        exempt,
      });
    };

    // --- start: M members at once, as a Deployment's pods start: every
    // process spawned together. On this machine's 2 cores, M Node starts take
    // many seconds of CPU between them (a cluster starts them on M nodes), so
    // the start's time is judged from the moment the last member was up, and
    // the spawn time is reported beside it.
    const names = Array.from({ length: members }, (_, i) => `web-${i}`);
    let spawnedMs = 0;
    await runStep(
      `start ${members}`,
      async () => {
        const t0 = performance.now();
        await pool(names, members, (n) => join(n));
        spawnedMs = performance.now() - t0;
      },
      quick ? 240_000 : 900_000,
    );

    // Idle: every member renewing its Lease, nothing to hand over.
    const idleCpu0 = cpuMsOf(coordinator.pid);
    const idleT0 = performance.now();
    await sleep(quick ? 10_000 : 20_000);
    const idleCpuPerSec = ((cpuMsOf(coordinator.pid) - idleCpu0) / (performance.now() - idleT0)) * 1000;

    await runStep(`scale ${members} → ${members + 1}`, async () => void (await join(`web-${members}`)), quick ? 60_000 : 180_000);
    const leaver = live.get(`web-${Math.floor(members / 3)}`);
    await runStep(
      `leave (${members + 1} → ${members})`,
      async () => {
        if (leaver === undefined) return;
        // SIGTERM: the proxy leaves the ring (serving until its slots are handed on), then exits.
        leaver.proxy.proc.kill("SIGTERM");
        await leaver.proxy.exited;
        await drop(leaver.name);
      },
      quick ? 120_000 : 300_000,
    );
    const victim = live.get(`web-${Math.floor((2 * members) / 3)}`);
    await runStep(
      `crash (${members} → ${members - 1})`,
      async () => {
        if (victim === undefined) return;
        victim.proxy.proc.kill("SIGKILL");
        await victim.proxy.exited;
        await drop(victim.name);
      },
      quick ? 120_000 : 300_000,
      true,
    );
    const metrics = (await httpGet(metricsUrl, 10_000)).body;
    const crashUncoveredS = Number(/^shardcar_ring_crash_uncovered_seconds_sum\{[^}]*\} (\S+)$/m.exec(metrics)?.[1] ?? Number.NaN);
    const proxyRss = [...live.values()].map((r) => procMemory(r.proxy.pid).rss / MiB).sort((a, b) => a - b);
    const ringObjectMeasured = Math.max(0, ...seen.map((s) => s.bytes));

    // --- the status for growing N, computed
    const fit256 = largestFitting(slotCount, "long", "interleaved", 4096);
    const fit1024 = largestFitting(1024, "long", "interleaved", 4096);
    const bytesAt = (n: number, s: number): number => ringObjectBytes(n, s, "long", "interleaved");

    const leaseMs = DEFAULT_MEMBER_TIMINGS.leaseDurationSeconds * 1000;
    // P7's bound for a graceful step. A crash adds the leader's reaction: the
    // takeover counts from the last renewal it saw, then it fences (one write),
    // publishes, and the gainers report on their next Lease write: a retry period.
    const bound = leaseMs + probe.ms;
    // The start's bound (design.md, S1): what one unsharded replica pays to start.
    const startBound = leaseMs + fullProbe.ms;
    const crashBound = bound + DEFAULT_MEMBER_TIMINGS.retryPeriodMs;
    const common = { members, pods, slots: slotCount, relistBudget: budget };
    const results: BenchResult[] = [];
    for (const s of steps) {
      const base = { ...common, step: s.step };
      const isStart = s.step.startsWith("start");
      const graceful = !s.exempt && !isStart;
      const stepBound = isStart ? startBound : s.exempt ? crashBound : bound;
      results.push({
        id: "S1",
        name: `${members} members, ${pods} pods, ${s.step}: time to exact coverage`,
        candidate: isStart ? { label: "last member up to exact coverage", value: Math.round(s.ms - spawnedMs), unit: "ms" } : { label: "action to exact coverage", value: s.ms, unit: "ms" },
        baseline: { label: isStart ? "lease duration + one full list" : s.exempt ? "lease duration + retry period + one member's list" : "lease duration + one member's list", value: Math.round(stepBound), unit: "ms" },
        ratio: stepBound / Math.max(1, isStart ? s.ms - spawnedMs : s.ms),
        target: 1,
        extra: {
          ...base,
          metric: "coverage",
          handoffs: s.handoffs,
          leaseDurationMs: leaseMs,
          oneListMs: Math.round(probe.ms),
          oneListPods: probe.items,
          ...(isStart ? { fullListMs: Math.round(fullProbe.ms), fullListPods: fullProbe.items, spawnMs: Math.round(spawnedMs), firstSpawnToExactMs: s.ms } : {}),
          ...(s.exempt ? { crashUncoveredMs: Math.round(crashUncoveredS * 1000) } : {}),
        },
      });
      results.push({
        id: "S1",
        name: `${members} members, ${pods} pods, ${s.step}: pod LISTs`,
        candidate: { label: "LISTs devapi served", value: s.lists, unit: "lists" },
        baseline: isStart ? { label: "members (one LIST each)", value: members, unit: "lists" } : { label: "gains (one LIST per gaining member per handoff)", value: s.gains, unit: "lists" },
        ratio: (isStart ? members : s.gains) / Math.max(1, s.lists),
        extra: { ...base, metric: "lists", targetMax: isStart ? members : s.gains, clientLists: s.clientLists, proxiesListing: s.perMember.split(" ").filter((x) => x !== "").length, ...(s.perMember.length <= 200 ? { perProxy: s.perMember } : {}) },
      });
      results.push(s1ListAgreement(`${members} members, ${pods} pods, ${s.step}`, s.lists, s.clientLists, base));
      results.push({
        id: "S1",
        name: `${members} members, ${pods} pods, ${s.step}: relist budget`,
        candidate: { label: "most keyspace one pending table relists", value: Math.round(s.keyspaceAtOnce * 1000) / 1000, unit: "keyspaces" },
        baseline: { label: "spec.relistBudget", value: budget, unit: "keyspaces" },
        ratio: budget / Math.max(0.001, s.keyspaceAtOnce),
        extra: { ...base, metric: "budget", maxGainersPerHandoff: s.maxGainers, maxConcurrentLists: s.maxConcurrentLists, ...(graceful ? { targetMax: budget } : { exempt: s.exempt ? "crash: coverage beats the budget" : "start: the first table of an empty ring" }) },
      });
      if (isStart) {
        results.push({
          id: "S1",
          name: `${members} members, ${pods} pods, ${s.step}: pods listed`,
          candidate: { label: "pods in the members' LIST answers", value: s.listedPods, unit: "pods" },
          baseline: { label: "pods (one unsharded replica's start)", value: pods, unit: "pods" },
          ratio: pods / Math.max(1, s.listedPods),
          extra: { ...base, metric: "listed", targetMax: Math.round(1.25 * pods) },
        });
        const share = Math.ceil(slotCount / members);
        results.push({
          id: "S1",
          name: `${members} members, ${pods} pods, ${s.step}: largest share given`,
          candidate: { label: "most slots a member held in one published table", value: s.peakSlots, unit: "slots" },
          baseline: { label: "final share", value: share, unit: "slots" },
          ratio: share / Math.max(1, s.peakSlots),
          extra: { ...base, metric: "share", targetMax: 2 * share },
        });
      }
      results.push({
        id: "S1",
        name: `${members} members, ${pods} pods, ${s.step}: coordinator`,
        candidate: { label: "coordinator CPU", value: s.coordinatorCpuMs, unit: "ms" },
        baseline: { label: "step duration", value: s.ms, unit: "ms" },
        ratio: s.ms / Math.max(1, s.coordinatorCpuMs),
        extra: { ...base, metric: "coordinator", cpuShareOfOneCore: Math.round((s.coordinatorCpuMs / s.ms) * 1000) / 1000, peakRssMiB: s.coordinatorPeakMiB, rssMiB: s.coordinatorRssMiB, ringBytes: s.ringBytes },
      });
    }
    results.push({
      id: "S1",
      name: `${members} members: coordinator CPU while idle (every member renewing)`,
      candidate: { label: "coordinator CPU", value: Math.round(idleCpuPerSec * 10) / 10, unit: "ms/s" },
      baseline: { label: "one core", value: 1000, unit: "ms/s" },
      ratio: 1000 / Math.max(0.1, idleCpuPerSec),
      extra: { ...common, metric: "idle", renewalsPerSecond: Math.round((members / (DEFAULT_MEMBER_TIMINGS.retryPeriodMs / 1000)) * 10) / 10 },
    });
    results.push({
      id: "S1",
      name: `${members} members: largest ShardRing seen`,
      candidate: { label: "ShardRing object", value: ringObjectMeasured, unit: "bytes" },
      baseline: { label: "etcd's object limit", value: ETCD_OBJECT_LIMIT, unit: "bytes" },
      ratio: ETCD_OBJECT_LIMIT / Math.max(1, ringObjectMeasured),
      extra: { ...common, metric: "ring-size", targetMax: ETCD_OBJECT_LIMIT },
    });
    for (const [s, fit] of [
      [slotCount, fit256],
      [1024, fit1024],
    ] as const) {
      results.push({
        id: "S1",
        name: `ShardRing size, ${s} slots, worst case (253-character names, every slot its own run, a handoff in flight)`,
        candidate: { label: `at N = ${s} and beyond`, value: fit.bytesAtMax, unit: "bytes" },
        baseline: { label: "etcd's object limit", value: ETCD_OBJECT_LIMIT, unit: "bytes" },
        ratio: ETCD_OBJECT_LIMIT / fit.bytesAtMax,
        extra: { metric: "ring-size-projection", slots: s, targetMax: ETCD_OBJECT_LIMIT, largestFittingMembers: fit.fitsAll ? "every N" : fit.largest, at64: bytesAt(64, s), at256: bytesAt(256, s) },
      });
    }
    results.push({
      id: "S1",
      name: `${members} members: proxy RSS at the end`,
      candidate: { label: "largest proxy", value: Math.round((proxyRss[proxyRss.length - 1] ?? 0) * 10) / 10, unit: "MiB" },
      baseline: { label: "median proxy", value: Math.round((proxyRss[Math.floor(proxyRss.length / 2)] ?? 0) * 10) / 10, unit: "MiB" },
      ratio: (proxyRss[Math.floor(proxyRss.length / 2)] ?? 1) / (proxyRss[proxyRss.length - 1] ?? 1),
      extra: { ...common, metric: "proxy-rss", totalMiB: Math.round(proxyRss.reduce((a, b) => a + b, 0)), benchSeconds: Math.round((performance.now() - benchStart) / 1000) },
    });
    return results;
  } finally {
    await rig.close();
  }
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
