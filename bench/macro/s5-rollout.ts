/**
 * S5, a rolling update of the ring (design.md): M members over P pods
 * (full: 64 × 200,000; quick: 16 × 20,000) rolled the way a Deployment with
 * maxSurge 25% and maxUnavailable 25% rolls them: a quarter of new members
 * join, then a quarter of the old ones are terminated, four times over.
 * Shardselector mode, gate on, on S1's rig (bench/lib/ring-rig.ts): real
 * `shardcar proxy --shards ring` processes, the real coordinator, client-node
 * reflectors as the controllers.
 *
 * An old member ends as the kubelet ends a pod whose proxy is a native
 * sidecar, with the grace period (30 s) counted from the start:
 * 1. the controller container's preStop hook, the `httpGet` the injector
 *    adds (`/shardcar/prestop` on the proxy's admin port): the proxy steps
 *    aside and answers once its slots are handed on;
 * 2. SIGTERM to the controller (its reflector stops: it is no longer live);
 * 3. once the controller has exited, SIGTERM to the sidecar; SIGKILL at the
 *    end of the grace period if it is still running.
 *
 * Measured over the whole rollout:
 * - pods in no live controller's cache, sampled every 250 ms (the fleet's
 *   `uncovered`): the most at once and the longest window with any
 *   (target: none beyond one relist, i.e. the longest window ≤ one member's
 *   list);
 * - time from the last new member up to exact coverage (target: lease
 *   duration + one member's list);
 * - pods in the LIST answers the controllers received (target: ≤ 2 × P);
 * - old members SIGKILLed at the end of the grace period (target: 0).
 *
 * Not yet: labels mode (gate off), and a rollout that SIGKILLs old pods.
 *
 * Usage: node bench/macro/s5-rollout.ts [--quick]
 *   S5_MEMBERS, S5_PODS override the sizes; S5_TRACE=1 copies the leader's
 *   and the members' log lines to stderr.
 */
import { DEFAULT_MEMBER_TIMINGS } from "../../src/ring/member.ts";
import type { Bench, BenchResult } from "../lib/bench.ts";
import type { ListRecord } from "../children/reflector-fleet.ts";
import { httpGet, sleep } from "../lib/proc.ts";
import { epoch, pool, RingRig, type Replica } from "../lib/ring-rig.ts";

/** The pod's terminationGracePeriodSeconds. */
const GRACE_MS = 30_000;
/** How often the caches are searched for pods in none of them. */
const SAMPLE_MS = 250;

interface Uncovered {
  /** Epoch ms. */
  readonly at: number;
  readonly pods: number;
}

/** The most pods uncovered at once, and the longest run of samples with any. */
export function uncoveredFigures(samples: readonly Uncovered[]): { most: number; longestMs: number; windows: number } {
  let most = 0;
  let longestMs = 0;
  let windows = 0;
  let since: number | undefined;
  for (const s of samples) {
    most = Math.max(most, s.pods);
    if (s.pods > 0 && since === undefined) {
      since = s.at;
      windows++;
    }
    if (s.pods === 0 && since !== undefined) {
      longestMs = Math.max(longestMs, s.at - since);
      since = undefined;
    }
  }
  const last = samples[samples.length - 1];
  if (since !== undefined && last !== undefined) longestMs = Math.max(longestMs, last.at - since);
  return { most, longestMs, windows };
}

export const bench: Bench = async ({ quick }) => {
  const members = Number(process.env["S5_MEMBERS"] ?? (quick ? 16 : 64));
  const pods = Number(process.env["S5_PODS"] ?? (quick ? 20_000 : 200_000));
  const trace = process.env["S5_TRACE"] === "1";
  const wave = Math.max(1, Math.round(members / 4));
  const rig = new RingRig({ name: "S5", members, pods, trace });
  try {
    await rig.start();
    await rig.askFleet({ type: "inventory", uids: rig.uids }, "inventory", 60_000);
    // The Deployment as it stands before the release.
    const old = Array.from({ length: members }, (_, i) => `old-${i}`);
    await pool(old, members, (n) => rig.join(n));
    await rig.settle("start", quick ? 240_000 : 900_000);

    // From here on: pods in no live controller's cache, every SAMPLE_MS.
    const samples: Uncovered[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const r = await rig.askFleet<{ pods: number }>({ type: "uncovered" }, "uncovered", 30_000);
        samples.push({ at: epoch(), pods: r.pods });
        await sleep(SAMPLE_MS);
      }
    })();

    const since = epoch();
    const t0 = performance.now();
    let killed = 0;
    let lastUpMs = 0;
    const preStopMs: number[] = [];
    /** The kubelet's end of a pod with a native sidecar, within the grace period. */
    const terminate = async (r: Replica): Promise<void> => {
      const start = performance.now();
      try {
        await httpGet(`${r.admin}/shardcar/prestop`, GRACE_MS);
      } catch {
        // The kubelet logs a failed hook and goes on.
      }
      preStopMs.push(performance.now() - start);
      await rig.drop(r.name);
      r.proxy.proc.kill("SIGTERM");
      const left = Math.max(0, GRACE_MS - (performance.now() - start));
      const exited = await Promise.race([r.proxy.exited.then(() => true), sleep(left).then(() => false)]);
      if (!exited) {
        killed++;
        r.proxy.proc.kill("SIGKILL");
        await r.proxy.exited;
      }
    };
    for (let w = 0; w * wave < members; w++) {
      const fresh = Array.from({ length: Math.min(wave, members - w * wave) }, (_, i) => `new-${w * wave + i}`);
      await pool(fresh, fresh.length, (n) => rig.join(n));
      lastUpMs = performance.now() - t0;
      const leaving = old.slice(w * wave, (w + 1) * wave).map((n) => rig.live.get(n)).filter((r): r is Replica => r !== undefined);
      await Promise.all(leaving.map((r) => terminate(r)));
    }
    await rig.settle("rollout", quick ? 240_000 : 900_000);
    const exactMs = performance.now() - t0;
    // Late relists still count: look again a moment later (S1 does the same).
    await sleep(quick ? 1000 : 3000);
    sampling = false;
    await sampler;
    const { lists } = await rig.askFleet<{ lists: ListRecord[] }>({ type: "lists", since }, "lists", 30_000);
    const listed = lists.filter((l) => l.ok).reduce((n, l) => n + l.items, 0);
    const gap = uncoveredFigures(samples);

    const leaseMs = DEFAULT_MEMBER_TIMINGS.leaseDurationSeconds * 1000;
    const oneList = rig.probe.ms;
    const common = { members, pods, wave, graceS: GRACE_MS / 1000, mode: "shardselector (gate on)" };
    const what = `${members} members, ${pods} pods, rolled ${wave} at a time`;
    const results: BenchResult[] = [
      {
        id: "S5",
        name: `${what}: pods in no live controller's cache`,
        candidate: { label: "longest window with any", value: Math.round(gap.longestMs), unit: "ms" },
        baseline: { label: "one member's list (one relist)", value: Math.round(oneList), unit: "ms" },
        ratio: oneList / Math.max(1, gap.longestMs),
        extra: { ...common, metric: "uncovered", targetMax: Math.round(oneList), mostAtOnce: gap.most, windows: gap.windows, samples: samples.length, sampledEveryMs: SAMPLE_MS },
      },
      {
        id: "S5",
        name: `${what}: last new member up to exact coverage`,
        candidate: { label: "last new member up to exact coverage", value: Math.round(exactMs - lastUpMs), unit: "ms" },
        baseline: { label: "lease duration + one member's list", value: Math.round(leaseMs + oneList), unit: "ms" },
        ratio: (leaseMs + oneList) / Math.max(1, exactMs - lastUpMs),
        target: 1,
        extra: { ...common, metric: "coverage", rolloutMs: Math.round(exactMs), leaseDurationMs: leaseMs, oneListMs: Math.round(oneList), slowestPreStopMs: Math.round(Math.max(0, ...preStopMs)) },
      },
      {
        id: "S5",
        name: `${what}: pods listed over the rollout`,
        candidate: { label: "pods in the controllers' LIST answers", value: listed, unit: "pods" },
        baseline: { label: "pods", value: pods, unit: "pods" },
        ratio: (2 * pods) / Math.max(1, listed),
        extra: { ...common, metric: "listed", targetMax: 2 * pods, lists: lists.filter((l) => l.ok).length },
      },
      {
        id: "S5",
        name: `${what}: old members SIGKILLed at the end of the grace period`,
        candidate: { label: "SIGKILLed", value: killed, unit: "members" },
        baseline: { label: "old members", value: members, unit: "members" },
        ratio: (members - killed) / members,
        extra: { ...common, metric: "killed", targetMax: 0 },
      },
    ];
    return results;
  } finally {
    await rig.close();
  }
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
