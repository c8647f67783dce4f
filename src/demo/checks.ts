/**
 * What the demo claims and how each claim is judged: coverage once a scene
 * settled, no gap in an overlap handoff, a killed member's gap bounded, who
 * filtered, bytes against the unsharded twins, parents and children, and
 * the operator's audit. Apart from the scenes (scenes.ts) so that a scene
 * reads as what happens and which claims hold after it, and a claim can be
 * read, and changed, without the script around it.
 */
import { formatAudit } from "../ops/audit.ts";
import { loadRing, runAudit } from "../ops/audit-run.ts";
import { formatCanary } from "../ops/canary.ts";
import { httpProbe, runCanary } from "../ops/canary-run.ts";
import { ApiClient, kubeConfigConnection } from "../kube/client.ts";
import { resolveResource } from "../ops/kube.ts";
import { fmtBytes, fmtPct, type ReportInvariant } from "./report.ts";
import { RING, RING_NS, SAMPLE_MS, SETTLE_TIMEOUT_MS, sleep, TIMINGS, type Demo, type ReplicaRow } from "./stage.ts";

/** A {@link ReportInvariant} of one scene. */
export interface Invariant extends ReportInvariant {
  readonly scene: string;
}

// A killed member's gap: its Lease must expire (lease duration after its last
// renewal), then the leader fences it and hands its slots on, and the
// gainers relist. Allowance beyond the lease for that and a loaded machine.
const KILL_GAP_BOUND_MS = TIMINGS.leaseDurationSeconds * 1000 + 6_000;

/** Every scene's claim once it settled; its detail is the scene's coverage line. */
export function coverageCheck(title: string, e: ReturnType<Demo["exact"]>, settled: boolean, settledInMs: number): Invariant {
  const coverageHeld = settled && e.exact && e.covered === e.total && e.twice === 0;
  const coverageLine = coverageHeld
    ? `coverage holds: every one of ${e.total} pods is cached by exactly one replica, the one whose ring slots hold its uid (settled in ${(settledInMs / 1000).toFixed(1)} s)`
    : `COVERAGE BROKEN: ${e.total - e.covered} of ${e.total} pods are cached by no replica, ${e.twice} by two or more${e.exact ? "" : "; some cache differs from its ranges"}${settled ? "" : ` (the ring did not settle within ${SETTLE_TIMEOUT_MS / 1000} s)`}`;
  return { scene: title, claim: "once settled, the caches hold every pod exactly once, each in the replica that owns it", held: coverageHeld, detail: coverageLine };
}

/** How long, since `startedAt`, some pod was in no cache (from the first to the last sample that saw one), and the worst coverage. */
function gapOf(demo: Demo, startedAt: number): { ms: number; worst: number } {
  const since = demo.samples.filter((s) => s.t * 1000 >= startedAt - demo.t0);
  const gaps = since.filter((s) => s.coverage < 1);
  const first = gaps[0];
  const last = gaps[gaps.length - 1];
  return { ms: first === undefined || last === undefined ? 0 : (last.t - first.t) * 1000 + SAMPLE_MS, worst: Math.min(1, ...since.map((s) => s.coverage)) };
}

/** An overlap handoff's claim: no sample during it saw a pod in no cache. */
export const noGap = (demo: Demo, title: string) => (c: { startedAt: number }): Invariant[] => {
  const g = gapOf(demo, c.startedAt);
  return [{ scene: title, claim: "overlap handoff: no pod went uncached at any sample", held: g.ms === 0, detail: g.ms === 0 ? `no pod was uncached at any ${SAMPLE_MS} ms sample during the handoff (overlap mode widens before it narrows)` : `pods went uncached for about ${(g.ms / 1000).toFixed(1)} s (worst coverage ${fmtPct(g.worst)})` }];
};

/** Who filtered every replica's lists, as its proxy's last verdict says. */
export const verdicts = (title: string, want: string) => (c: { rows: readonly ReplicaRow[] }): Invariant[] => [
  { scene: title, claim: `every replica's lists were filtered by: ${want}`, held: c.rows.every((r) => r.filteredBy === want), detail: `filtered by: ${c.rows.map((r) => `${r.replica} ${r.filteredBy}`).join(", ")}` },
];

/** A killed member's claim: its pods were uncached for no longer than its lease, fencing and one relist. */
export const killGapBounded = (demo: Demo, title: string) => (c: { startedAt: number }): Invariant[] => {
  const g = gapOf(demo, c.startedAt);
  return [
    {
      scene: title,
      claim: `the killed replica's pods were uncached for less than its lease (${TIMINGS.leaseDurationSeconds} s) plus ${(KILL_GAP_BOUND_MS / 1000 - TIMINGS.leaseDurationSeconds).toFixed(0)} s for fencing and one relist`,
      held: g.ms <= KILL_GAP_BOUND_MS,
      detail: `the gap lasted about ${(g.ms / 1000).toFixed(1)} s (worst coverage ${fmtPct(g.worst)}); bound ${(KILL_GAP_BOUND_MS / 1000).toFixed(0)} s: lease duration + fencing + one relist`,
    },
  ];
};

/** With the gate off, the fallback's claim: each proxy received much more than it passed on. */
export const proxyPassedItsShard = (title: string) => (c: { rows: readonly ReplicaRow[] }): Invariant[] => [
  {
    scene: title,
    claim: "with the gate off each proxy received the whole list but passed on only its shard",
    held: c.rows.every((r) => r.bytesFromServer > 2 * r.bytesToController),
    detail: `from the apiserver vs to the controller: ${c.rows.map((r) => `${r.replica} ${fmtBytes(r.bytesFromServer)} / ${fmtBytes(r.bytesToController)}`).join(", ")}`,
  },
];

/** Labels mode's claim: with the gate still off, the apiserver sent each proxy about its share. */
export const serverSentItsShare = (title: string) => (c: { rows: readonly ReplicaRow[] }): Invariant[] => [
  {
    scene: title,
    claim: "with the gate still off, the apiserver sent each proxy about its share of what it sent an unsharded replica",
    // Its share of the keyspace, with room for the churn's watch events, which arrive unevenly.
    held: c.rows.every((r) => r.twinBytes > 0 && r.bytesFromServer <= r.twinBytes * (r.share * 1.25 + 0.02)),
    detail: `from the apiserver, sharded vs unsharded twin: ${c.rows.map((r) => `${r.replica} ${fmtBytes(r.bytesFromServer)} of ${fmtBytes(r.twinBytes)} (${fmtPct(r.twinBytes === 0 ? 0 : r.bytesFromServer / r.twinBytes)}; its keyspace ${fmtPct(r.share)})`).join(", ")}`,
  },
];

/** Reported, not asserted: exclusive handoff trades gaps for never two owners, and the sampler reads informer caches, which lag their proxies. */
export const exclusiveGap = (demo: Demo, startedAt: number): string => {
  const g = gapOf(demo, startedAt);
  const doubled = demo.samples.filter((s) => s.t * 1000 >= startedAt - demo.t0 && s.doubled > 0).length;
  return `exclusive handoff: ${g.ms === 0 ? "no pod was uncached at any sample" : `the moving slots' pods were uncached for about ${(g.ms / 1000).toFixed(1)} s`}; ${doubled === 0 ? "no pod was cached by two replicas at any sample" : `${doubled} samples saw a pod in two caches`}`;
};

/** The whole run's claim, over every scene's bytes: `c` to the sharded controllers, `w` to their twins. */
export function wholeRunBytes(total: { c: number; w: number }): Invariant {
  return {
    scene: "whole run",
    claim: "over the run, the sharded controllers received fewer bytes than their unsharded twins",
    held: total.c < total.w,
    detail: `${fmtBytes(total.c)} sharded vs ${fmtBytes(total.w)} unsharded`,
  };
}

/** The last scene's claims about parents and children, once it created `parents` Deployments. */
export function familyChecks(demo: Demo, title: string, parents: number): Invariant[] {
  const c = demo.census();
  const created = [...c.createdBy].map(([r, k]) => `${r} ${k}`).join(", ");
  return [
    {
      scene: title,
      claim: "no Deployment got a second ReplicaSet: the replica owning a parent always saw its child",
      held: c.parents === parents && c.duplicated.length === 0 && c.childless === 0,
      detail:
        c.duplicated.length === 0
          ? `${c.parents} Deployments, each with exactly one ReplicaSet (created by ${created}); keyed by uid instead, a child would sit in another shard and its parent's owner would create it again`
          : `DUPLICATED children for ${c.duplicated.join(", ")}`,
    },
    {
      scene: title,
      claim: "every replica caches the ReplicaSets of exactly the Deployments it caches",
      held: c.split.length === 0,
      detail: c.split.length === 0 ? "parents and children share a shard in every replica's cache" : `split families in: ${c.split.join(", ")}`,
    },
  ];
}

/**
 * What an operator would run: `shardcar audit --ring … --canary` against
 * the demo's ring, through the same library. Its verdict is an invariant.
 */
export async function operatorCheck(demo: Demo, title: string): Promise<{ lines: string[]; invariants: Invariant[] }> {
  await sleep(TIMINGS.retryPeriodMs * 2); // the Leases carry the slots as of their last renewal
  const client = new ApiClient(kubeConfigConnection(demo.kc));
  const resource = await resolveResource(client, { resource: "pods", group: "", key: "uid" });
  const owners = await loadRing(client, RING_NS, RING, Date.now());
  const report = await runAudit(client, { resource, owners });
  const admin = new Map(demo.live().map((r) => [r.name, r.live?.replica.proxy.adminUrl ?? ""]));
  const canary = await runCanary(client, { resource, owners, namespace: "alpha", maxObjects: 200, timeoutMs: 10_000, delivered: httpProbe(admin, "pods"), runId: "demo" });
  const held = report.ok && canary.ok;
  const text = `$ shardcar audit --resource pods --ring ${RING} --namespace ${RING_NS} --canary\n${formatAudit(report)}\n${formatCanary(canary)}`;
  return {
    lines: [...text.trimEnd().split("\n").map((l) => `  ${l}`), held ? "the operator's audit agrees: nothing missing, nothing duplicated, every canary delivered" : "BROKEN: the operator's audit found a problem"],
    invariants: [{ scene: title, claim: "shardcar audit --ring --canary finds nothing missing or duplicated, and every range's owner delivered its canary", held, detail: `audit: ${report.ok ? "OK" : "NOT OK"} (${report.sum} of ${report.total}); canaries: ${canary.ok ? "OK" : "NOT OK"}` }],
  };
}
