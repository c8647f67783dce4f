/**
 * The rows that carry S1's, S3's and S4's own quick gates, built from
 * figures the benches measured. Pure: the benches do the I/O and call these,
 * so test/bench/gates.test.ts can feed them figures, good and regressed, and
 * read the verdict that ./checks.ts gives.
 */
import type { BenchResult } from "./bench.ts";

const r3 = (x: number): number => Math.round(x * 1000) / 1000;

/**
 * S1: the pod LISTs the step's reflectors made, next to the pod LISTs
 * devapi served in the same step. They must be equal: the LIST target
 * (≤ one per gaining member) counts devapi's side, and it means something
 * only when each of those LISTs is one a controller made through its proxy.
 * More on devapi's side: a proxy listed on its own (a relist no client
 * asked for). More on the reflectors' side: LISTs devapi's count missed, so
 * the LIST target was judged on too few. Either is a miss, in quick and
 * full runs alike (`targetMax: 0`, which no tolerance loosens).
 */
export function s1ListAgreement(prefix: string, lists: number, clientLists: number, extra: Readonly<Record<string, number | string>>): BenchResult {
  const apart = Math.abs(clientLists - lists);
  return {
    id: "S1",
    name: `${prefix}: pod LISTs the reflectors made against those devapi served`,
    candidate: { label: "LISTs one side counted and the other did not", value: apart, unit: "lists" },
    baseline: { label: "LISTs devapi served", value: lists, unit: "lists" },
    ratio: (Math.min(lists, clientLists) + 1) / (Math.max(lists, clientLists) + 1),
    extra: { ...extra, metric: "list-agreement", lists, clientLists, targetMax: 0 },
  };
}

/**
 * S3's quick judge (the ratio its quick run must reach): the apiserver's
 * CPU for a write without the webhook ÷ the manager's CPU for the same
 * write. Quick runs at 200/s with one replica measured 3.5× (2.45 ms ÷
 * 0.71 ms) and 3.65× (2026-12-05, load average 1-4 and 3-7). Less the
 * quick tolerance (25%) the bound is 2.25×: a manager twice as costly
 * (1.75-1.83×) fails; a good build may read 36% below 3.5× and pass. The
 * full run at 200/s read 7.5× (longer rounds; reported, not judged).
 */
export const S3_QUICK_CPU_RATIO = 3;

/**
 * S3: the manager's CPU per write against the apiserver's for the same
 * write without the webhook, read from /proc in the same rounds. `judged`:
 * the quick run at the target rate, which gets {@link S3_QUICK_CPU_RATIO}.
 */
export function s3ManagerCpu(rate: number, replicas: number, managerCpuMs: number, apiserverCpuMs: number, judged: boolean): BenchResult {
  return {
    id: "S3",
    name: `manager CPU per write at ${rate}/s, ${replicas} manager replica${replicas === 1 ? "" : "s"}`,
    candidate: { label: "shardcar manager processes", value: managerCpuMs, unit: "ms" },
    baseline: { label: "apiserver, the same write without the webhook", value: apiserverCpuMs, unit: "ms" },
    ratio: apiserverCpuMs / managerCpuMs,
    ...(judged ? { target: S3_QUICK_CPU_RATIO } : {}),
    extra: { metric: "cpu", rate, replicas },
  };
}

/** The S4 figures the ratio rows read, per configuration (medians over rounds). */
export type S4Figures = Readonly<Record<"labels" | "shardselector" | "unfiltered", Readonly<Record<string, number>>>>;

/**
 * S4's quick bound on labels mode's server CPU against the unfiltered watch
 * it replaces: a sanity bound, not a target. Labels mode no dearer, with
 * room for noise (the write's own cost dominates at N = 8). What it catches
 * is a watch that costs the server again and again: a proxy that relists
 * or reopens its watch, a selector that stopped being sent.
 */
export const S4_QUICK_MIN_CPU_RATIO = 0.8;

/** S4's quick bound on the watch bytes ratio: each event goes to one watcher instead of N, so the ratio is N for events of one size; less 25%. */
export const s4QuickMinBytesRatio = (n: number): number => Math.round((n / 1.25) * 10) / 10;

/**
 * S4's ratio rows for one group (N, clients): server CPU per write, labels
 * against unfiltered and against shardselector, and the watch bytes sent
 * per write, labels against unfiltered. Two carry `quickMinRatio` (see
 * ./checks.ts), which the quick run enforces; nothing is bounded against
 * shardselector: the two are within noise of each other.
 */
export function s4Ratios(n: number, clients: string, f: S4Figures, common: Readonly<Record<string, number | string>>): BenchResult[] {
  const get = (sc: keyof S4Figures, k: string): number => f[sc][k] ?? Number.NaN;
  const out: BenchResult[] = [];
  for (const vs of ["unfiltered", "shardselector"] as const) {
    out.push({
      id: "S4",
      name: `server CPU per write, labels vs ${vs}, N=${n}, ${clients}`,
      candidate: { label: "labels mode", value: get("labels", "serverUsPerWrite"), unit: "µs" },
      baseline: { label: vs, value: get(vs, "serverUsPerWrite"), unit: "µs" },
      ratio: get(vs, "serverUsPerWrite") / get("labels", "serverUsPerWrite"),
      extra: {
        metric: "cpu-ratio",
        vs,
        ...common,
        labelsOverIt: r3(get("labels", "serverUsPerWrite") / get(vs, "serverUsPerWrite")),
        deliveryLabelsUs: get("labels", "deliveryUsPerWrite"),
        deliveryItUs: get(vs, "deliveryUsPerWrite"),
        ...(vs === "unfiltered" ? { quickMinRatio: S4_QUICK_MIN_CPU_RATIO } : {}),
      },
    });
  }
  out.push({
    id: "S4",
    name: `watch bytes sent per write, labels vs unfiltered, N=${n}, ${clients}`,
    candidate: { label: "labels mode, all watchers", value: get("labels", "eventKBPerWrite"), unit: "KB" },
    baseline: { label: "unfiltered, all watchers", value: get("unfiltered", "eventKBPerWrite"), unit: "KB" },
    ratio: get("unfiltered", "eventKBPerWrite") / get("labels", "eventKBPerWrite"),
    extra: { metric: "bytes-ratio", ...common, writtenKBLabels: get("labels", "writtenKBPerWrite"), writtenKBUnfiltered: get("unfiltered", "writtenKBPerWrite"), quickMinRatio: s4QuickMinBytesRatio(n) },
  });
  return out;
}
