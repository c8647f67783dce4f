/**
 * P5, scale: N = 1, 2, 4, 8 controller replicas, each a real
 * `@kubernetes/client-node` pod informer in its own process, behind its own
 * `shardcar proxy` process (`--shards i/N`), against a devapi process with
 * 20,000 pods of 2–6 KB (quick: 6,000 pods and N = 2 only), under churn. For each N, three
 * configurations in the same run:
 *
 * - gate on: devapi applies the shard selector (the fast path);
 * - gate off: devapi ignores it and each proxy filters (the price of fallback);
 * - no proxy: the same controllers straight to devapi, each listing
 *   everything — client-side sharding's cost, and the baseline `total`.
 *
 * Measured per replica: response body bytes reaching the controller
 * (counted inside it, through undici's diagnostics channel; wire bytes too),
 * bytes the proxy read from upstream (its own stats), objects in the cache
 * (and whether it holds exactly its shard), controller heap after GC,
 * controller and proxy RSS (at the peak: VmHWM; at rest: the controller after
 * GC), for P5m (bench/lib/pod-memory.ts). Each proxy runs with the
 * sidecar's runtime settings (src/sidecar-runtime.ts).
 *
 * Every hop is verified TLS (devapi serves HTTPS with a bench CA; each
 * proxy serves TLS to its controller), as in a cluster. Churn: a fixed,
 * seeded set of merge patches at a fixed rate, started once every cache has
 * synced; the figures are taken once every cache holds the last version of
 * every churned pod it owns.
 *
 * Targets (design.md): bytes to each controller ≤ 1.1·total/N; with the gate
 * on, upstream bytes per proxy ≤ 1.1·total/N. As ratios: total/bytes ≥ N/1.1.
 * P5m: pod (controller + proxy peak RSS) ÷ unsharded controller < 1.0 at
 * N = 2 and ≤ 0.70 at N = 8.
 *
 * Usage: node bench/macro/p5-scale.ts [--quick]
 *   P5_PODS, P5_NS ("1,2,4,8"), P5_CHURN, P5_CHURN_RATE override the sizes.
 */
import { fileURLToPath } from "node:url";
import { HashMatcher, shardRange } from "../../src/shard/range.ts";
import type { Bench, BenchResult } from "../lib/bench.ts";
import type { MeasureReply } from "../children/controller-child.ts";
import { memoryNow, MemorySampler, procMemory, toMiB, type MemoryFigures } from "../lib/memory.ts";
import { ask, forkTs, stopAll, until, type Child } from "../lib/proc.ts";
import { NO_MEMORY, podMemory, type PodFigures } from "../lib/pod-memory.ts";
import { proxyStats, startProxyProc, type ProxyProc } from "../lib/proxy-proc.ts";
import type { ChurnReply } from "../children/scale-devapi.ts";
import { benchTls, type BenchTls } from "../lib/tls.ts";

const CONTROLLER = fileURLToPath(new URL("../children/controller-child.ts", import.meta.url));
const DEVAPI = fileURLToPath(new URL("../children/scale-devapi.ts", import.meta.url));
/** Bytes on the wire in MB, 10^6 bytes; memory is in MiB (toMiB). */
export const MB = 1e6;
/** design.md P5: at most 10% over an even share. */
export const SLACK = 1.1;

/**
 * on / off: shardselector mode, the gate on or off; none: no proxy;
 * labels: labels mode (`--filter labels`, the slot label of ring
 * {@link LABELS_RING}) against a gate-off server (P8, bench/macro/p8-labels.ts).
 */
export type Mode = "on" | "off" | "none" | "labels";

/** The ring whose slot label P8's devapi writes on every pod. */
export const LABELS_RING = "bench";

export interface ReplicaFigures extends PodFigures {
  readonly objects: number;
  readonly expected: number;
  readonly outOfRange: number;
  readonly bytesToController: number;
  readonly wireToController: number;
  readonly upstreamBytes: number;
  readonly heapUsed: number;
  readonly syncMs: number;
}

const envStr = (name: string): string | undefined => {
  const v = process.env[name];
  return v === undefined || v === "" ? undefined : v;
};

/** Runs one configuration: N replicas in `mode`, churn, convergence, figures. */
export async function runConfig(n: number, mode: Mode, devapi: Child, devapiUrl: string, uids: readonly string[], tls: BenchTls, churn: { count: number; rate: number; seed: number }): Promise<ReplicaFigures[]> {
  await ask(devapi, { type: "gate", mode: mode === "off" || mode === "labels" ? "off" : "on" }, "gate", 10_000);
  const matchers = Array.from({ length: n }, (_, i) => new HashMatcher([shardRange(i, n)]));
  const proxies: ProxyProc[] =
    mode === "none"
      ? []
      : await Promise.all(matchers.map((_, i) => startProxyProc({ name: `proxy-${i}/${n}`, upstream: devapiUrl, tls, shards: `${i}/${n}`, ...(mode === "labels" ? { extraArgs: ["--filter", "labels", "--ring", LABELS_RING] } : {}) })));
  // Peaks of anonymous memory and PSS (VmHWM is RSS only), from each process's start.
  const proxySamplers = proxies.map((p) => new MemorySampler(p.child.pid));
  const controllerSamplers: MemorySampler[] = [];
  const controllers: Child[] = [];
  try {
    const synced = await Promise.all(
      matchers.map(async (_, i) => {
        const args = ["--server", proxies[i]?.url ?? devapiUrl, "--ca", tls.caFile, "--token", `bench-controller-${i}`, ...(mode === "none" ? [] : ["--shard", `${i}/${n}`])];
        const c = forkTs(`controller-${i}/${n}-${mode}`, CONTROLLER, args, ["--expose-gc"]);
        controllers.push(c);
        controllerSamplers[i] = new MemorySampler(c.pid);
        return ask<{ objects: number; ms: number }>(c, { type: "" }, "synced", 300_000);
      }),
    );
    const churned = await ask<ChurnReply>(devapi, { type: "churn", ...churn }, "churned", 60_000 + (churn.count * 1000) / churn.rate);
    const expect = controllers.map((_, i) =>
      Object.entries(churned.final)
        .filter(([, [, uid]]) => mode === "none" || (matchers[i]?.matchesString(uid) ?? false))
        .map(([key, [rv]]) => [key, rv] as [string, string]),
    );
    const caughtUp = await until(
      async () => {
        const behind = await Promise.all(controllers.map((c, i) => ask<{ behind: number }>(c, { type: "check", expect: expect[i] }, "check", 30_000)));
        return behind.every((b) => b.behind === 0);
      },
      60_000,
      100,
    );
    if (!caughtUp) throw new Error(`N=${n} ${mode}: caches did not catch up with the churn within 60 s`);
    const proxyPeaks = proxySamplers.map((s) => s.stop());
    const controllerPeaks = controllerSamplers.map((s) => s.stop());
    const measures = await Promise.all(controllers.map((c) => ask<MeasureReply>(c, { type: "measure" }, "measure", 60_000)));
    // At rest: right after the two forced GCs of "measure".
    const controllerRest = controllers.map((c) => memoryNow(c.pid));
    const stats = await Promise.all(proxies.map((p) => proxyStats(p)));
    return measures.map((m, i) => {
      const p = proxies[i];
      const hwm = (pid: number | undefined): number => (pid === undefined ? 0 : procMemory(pid).hwm);
      return {
        objects: m.objects,
        expected: mode === "none" ? uids.length : uids.filter((u) => matchers[i]?.matchesString(u) ?? false).length,
        outOfRange: m.outOfRange,
        bytesToController: m.bodyBytes,
        wireToController: m.wireBytes,
        upstreamBytes: stats[i]?.upstreamBytes ?? 0,
        heapUsed: m.heapUsed,
        controllerPeak: { ...(controllerPeaks[i] ?? NO_MEMORY), rss: hwm(controllers[i]?.pid) },
        proxyPeak: p === undefined ? NO_MEMORY : { ...(proxyPeaks[i] ?? NO_MEMORY), rss: hwm(p.child.pid) },
        controllerRest: controllerRest[i] ?? NO_MEMORY,
        proxyRest: p === undefined ? NO_MEMORY : memoryNow(p.child.pid),
        syncMs: synced[i]?.ms ?? 0,
      };
    });
  } finally {
    for (const s of [...proxySamplers, ...controllerSamplers]) s.stop();
    await Promise.all(controllers.map((c) => c.stop()));
    await Promise.all(proxies.map((p) => p.child.stop()));
  }
}

export const maxOf = (xs: readonly number[]): number => xs.reduce((a, b) => Math.max(a, b), Number.NEGATIVE_INFINITY);
export const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
export const r3 = (x: number): number => Math.round(x * 1000) / 1000;

export const bench: Bench = async ({ quick }) => {
  // Quick: N = 2, all three configurations: enough to catch a filter that
  // stops filtering or a fast path that stops being taken, and P5m's N = 2
  // target (the pod below the unsharded controller) with a cache large
  // enough for a sidecar to pay for itself.
  const pods = Number(envStr("P5_PODS") ?? (quick ? 6_000 : 20_000));
  const ns = (envStr("P5_NS") ?? (quick ? "2" : "1,2,4,8")).split(",").map(Number);
  const churn = { count: Number(envStr("P5_CHURN") ?? (quick ? 100 : 1_000)), rate: Number(envStr("P5_CHURN_RATE") ?? 200), seed: 1 };
  return withScaleDevapi("p5", ["--pods", String(pods)], async ({ devapi, url, uids, tls }) => {
    const results: BenchResult[] = [];
    for (const n of ns) {
      const figs: Record<"none" | "on" | "off", ReplicaFigures[]> = { none: [], on: [], off: [] };
      for (const mode of ["none", "on", "off"] as const) {
        figs[mode] = await runConfig(n, mode, devapi, url, uids, tls, { ...churn, seed: churn.seed + n });
      }
      // total: what one controller receives when it lists and watches everything.
      const total = mean(figs.none.map((f) => f.bytesToController));
      const noneHeap = mean(figs.none.map((f) => f.heapUsed));
      const noneRss = mean(figs.none.map((f) => f.controllerRest.rss));
      const meanOf = (pick: (f: ReplicaFigures) => MemoryFigures): MemoryFigures => ({ rss: mean(figs.none.map((f) => pick(f).rss)), anon: mean(figs.none.map((f) => pick(f).anon)), pss: mean(figs.none.map((f) => pick(f).pss)) });
      const unsharded = { peak: meanOf((f) => f.controllerPeak), rest: meanOf((f) => f.controllerRest) };
      for (const mode of ["on", "off"] as const) {
        const f = figs[mode];
        const exact = f.every((x) => x.objects === x.expected && x.outOfRange === 0);
        const common = {
          n,
          gate: mode,
          pods,
          churn: churn.count,
          exact: exact ? "yes" : "no",
          objectsMin: Math.min(...f.map((x) => x.objects)),
          objectsMax: maxOf(f.map((x) => x.objects)),
          objectsNoProxy: Math.round(mean(figs.none.map((x) => x.objects))),
          totalMB: r3(total / MB),
          evenShareMB: r3(total / n / MB),
        };
        const toCtl = maxOf(f.map((x) => x.bytesToController));
        results.push({
          id: "P5",
          name: `bytes to each controller, gate ${mode}, N=${n}`,
          candidate: { label: "most to one controller, via shardcar", value: r3(toCtl / MB), unit: "MB" },
          baseline: { label: "one controller without proxy (total)", value: r3(total / MB), unit: "MB" },
          ratio: total / toCtl,
          target: n / SLACK,
          extra: {
            ...common,
            metric: "bytes-to-controller",
            meanMB: r3(mean(f.map((x) => x.bytesToController)) / MB),
            wireMaxMB: r3(maxOf(f.map((x) => x.wireToController)) / MB),
            wireNoProxyMB: r3(mean(figs.none.map((x) => x.wireToController)) / MB),
          },
        });
        const up = maxOf(f.map((x) => x.upstreamBytes));
        results.push({
          id: "P5",
          name: `upstream bytes per proxy, gate ${mode}, N=${n}${mode === "off" ? " (the price of fallback)" : ""}`,
          candidate: { label: "most one proxy read from devapi", value: r3(up / MB), unit: "MB" },
          baseline: { label: "one controller without proxy (total)", value: r3(total / MB), unit: "MB" },
          ratio: total / up,
          ...(mode === "on" ? { target: n / SLACK } : {}),
          extra: { ...common, metric: "upstream-bytes", meanMB: r3(mean(f.map((x) => x.upstreamBytes)) / MB) },
        });
        const heap = maxOf(f.map((x) => x.heapUsed));
        results.push({
          id: "P5",
          name: `controller heap after GC, gate ${mode}, N=${n}`,
          candidate: { label: "largest controller heap, via shardcar", value: toMiB(heap), unit: "MiB" },
          baseline: { label: "controller heap without proxy", value: toMiB(noneHeap), unit: "MiB" },
          ratio: noneHeap / heap,
          extra: { ...common, metric: "controller-heap", meanMiB: toMiB(mean(f.map((x) => x.heapUsed))) },
        });
        const perReplica = maxOf(f.map((x) => x.controllerRest.rss + x.proxyRest.rss));
        results.push({
          id: "P5",
          name: `memory per replica (controller RSS + proxy RSS), gate ${mode}, N=${n}`,
          candidate: { label: "controller + proxy RSS, largest replica", value: toMiB(perReplica), unit: "MiB" },
          baseline: { label: "controller RSS without proxy", value: toMiB(noneRss), unit: "MiB" },
          ratio: noneRss / perReplica,
          extra: {
            ...common,
            metric: "replica-rss",
            proxyRssMaxMiB: toMiB(maxOf(f.map((x) => x.proxyRest.rss))),
            proxyPeakRssMaxMiB: toMiB(maxOf(f.map((x) => x.proxyPeak.rss))),
            controllerRssMaxMiB: toMiB(maxOf(f.map((x) => x.controllerRest.rss))),
            syncMsMax: Math.round(maxOf(f.map((x) => x.syncMs))),
            syncMsNoProxy: Math.round(maxOf(figs.none.map((x) => x.syncMs))),
          },
        });
        results.push(...podMemory("client-node", n, mode, f, unsharded, { pods, churn: churn.count, exact: common.exact }));
      }
    }
    return results;
  });
};

/**
 * Runs `fn` against a devapi process (bench/children/scale-devapi.ts, `args`
 * besides its TLS) seeded and ready, with the bench CA; stops every child
 * and removes the CA whatever happens.
 */
export async function withScaleDevapi<T>(name: string, args: readonly string[], fn: (env: { devapi: Child; url: string; uids: readonly string[]; tls: BenchTls }) => Promise<T>): Promise<T> {
  const tls = await benchTls(name);
  const devapi = forkTs("devapi", DEVAPI, [...args, "--cert", tls.certFile, "--key", tls.keyFile]);
  try {
    const ready = await ask<{ url: string; pods: number; bytes: number }>(devapi, { type: "" }, "ready", 300_000);
    const { uids } = await ask<{ uids: string[] }>(devapi, { type: "inventory" }, "inventory", 60_000);
    return await fn({ devapi, url: ready.url, uids, tls });
  } finally {
    if (devapi.proc.connected) devapi.proc.send({ type: "exit" });
    await stopAll();
    tls.remove();
  }
}

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
