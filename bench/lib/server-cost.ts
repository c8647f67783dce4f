/**
 * What work costs the real apiserver kit, read from outside it: the CPU
 * time (utime + stime, /proc/<pid>/stat) of realapi-server and of etcd and
 * the bytes realapi-server wrote (wchar, /proc/<pid>/io) between two
 * snapshots, less what the same processes spend idle over the same time
 * (a rate measured just before, the same way); and the server's own watch
 * counters from /metrics, read outside the measured windows (a scrape
 * costs the server CPU of its own).
 *
 * CPU time counts only what the processes ran, not what they waited for
 * the machine, so it holds up on a shared machine better than any latency;
 * it still has 10 ms ticks, so windows should be seconds long.
 */
import type { RealApi } from "./realapi.ts";
import { callRealApi } from "./realapi.ts";
import { cpuMsOf, sleep, writtenBytesOf } from "./proc.ts";

export interface CostSnapshot {
  readonly at: number;
  readonly serverCpuMs: number;
  readonly etcdCpuMs: number;
  readonly serverWritten: number;
}

export function snapshot(api: RealApi): CostSnapshot {
  const s = { at: performance.now(), serverCpuMs: cpuMsOf(api.pids.server), etcdCpuMs: cpuMsOf(api.pids.etcd), serverWritten: writtenBytesOf(api.pids.server) };
  if (!Number.isFinite(s.serverCpuMs) || !Number.isFinite(s.etcdCpuMs) || !Number.isFinite(s.serverWritten)) {
    throw new Error(`cannot read /proc for realapi-server ${api.pids.server} or etcd ${api.pids.etcd}: ${JSON.stringify(s)}`);
  }
  return s;
}

export interface Spent {
  readonly ms: number;
  readonly serverCpuMs: number;
  readonly etcdCpuMs: number;
  readonly serverWritten: number;
}

export function spent(a: CostSnapshot, b: CostSnapshot): Spent {
  return { ms: b.at - a.at, serverCpuMs: b.serverCpuMs - a.serverCpuMs, etcdCpuMs: b.etcdCpuMs - a.etcdCpuMs, serverWritten: b.serverWritten - a.serverWritten };
}

/** `work` less `idle` scaled to `work`'s duration. */
export function lessIdle(work: Spent, idle: Spent): Spent {
  const k = idle.ms > 0 ? work.ms / idle.ms : 0;
  return { ms: work.ms, serverCpuMs: work.serverCpuMs - k * idle.serverCpuMs, etcdCpuMs: work.etcdCpuMs - k * idle.etcdCpuMs, serverWritten: work.serverWritten - k * idle.serverWritten };
}

/** What the kit spends doing nothing but holding what is open, over `ms`. */
export async function idleFor(api: RealApi, ms: number): Promise<Spent> {
  const a = snapshot(api);
  await sleep(ms);
  return spent(a, snapshot(api));
}

/** The sum of every sample of `name` whose labels contain each of `labels` (`resource="configmaps"`), from a Prometheus text page. */
export function metricSum(page: string, name: string, labels: readonly string[]): number {
  let sum = 0;
  for (const line of page.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const close = line.lastIndexOf("}");
    const labelText = close < 0 ? "" : line.slice(name.length + 1, close);
    if (!labels.every((l) => labelText.split(",").includes(l))) continue;
    sum += Number(line.slice(close < 0 ? name.length : close + 1).trim().split(" ")[0]);
  }
  return sum;
}

export async function metricsPage(api: RealApi): Promise<string> {
  const r = await callRealApi(api, "GET", "/metrics");
  if (r.status !== 200) throw new Error(`GET /metrics: HTTP ${r.status} ${r.body.slice(0, 300)}`);
  return r.body;
}

export interface WatchTotals {
  /** Watch events the server wrote to its watchers of the resource, all watchers together. */
  readonly events: number;
  /** Their encoded size, before framing and TLS. */
  readonly bytes: number;
  /** Watches of the resource open now. */
  readonly open: number;
}

export async function watchTotals(api: RealApi, resource: string): Promise<WatchTotals> {
  const page = await metricsPage(api);
  const r = `resource="${resource}"`;
  return {
    events: metricSum(page, "apiserver_watch_events_total", [r]),
    bytes: metricSum(page, "apiserver_watch_events_sizes_sum", [r]),
    open: metricSum(page, "apiserver_longrunning_requests", [r, 'verb="WATCH"']),
  };
}

/**
 * `count` writes at `perSecond`, open loop (each starts on its schedule,
 * at most `inFlight` at once, so a slow server lengthens the window rather
 * than thinning the load); rejects on the first that fails.
 */
export async function paced(count: number, perSecond: number, write: (i: number) => Promise<void>, inFlight = 16): Promise<void> {
  const t0 = performance.now();
  const pending = new Set<Promise<void>>();
  let failed: unknown;
  for (let i = 0; i < count && failed === undefined; i++) {
    const wait = t0 + (i * 1000) / perSecond - performance.now();
    if (wait > 0) await sleep(wait);
    while (pending.size >= inFlight) await Promise.race(pending);
    const p: Promise<void> = write(i)
      .catch((e: unknown) => {
        failed ??= e;
      })
      .finally(() => pending.delete(p));
    pending.add(p);
  }
  await Promise.all(pending);
  if (failed !== undefined) throw failed instanceof Error ? failed : new Error(`a write failed: ${JSON.stringify(failed)}`);
}
