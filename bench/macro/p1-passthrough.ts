/**
 * P1, the pass-through cost: small GETs (one ~1 KB pod) and small LISTs
 * (ten pods, a sharded LIST served by the fast path) sent through a real
 * `shardcar proxy` process and straight to devapi, at fixed rates of 200,
 * 1,000 and 5,000 req/s, plus the maximum throughput of each path.
 *
 * Three processes besides this one: devapi (`shardcar devapi`), the proxy
 * (`shardcar proxy --shards 0/1`, so it rewrites and scans every sharded
 * LIST but keeps every item), and the load generator
 * (`bench/children/loadgen.ts`). Loopback, plain HTTP on both hops, so the
 * figure is the proxy's own cost (TLS would add the same cipher cost per
 * byte on each hop). Every run is bounded: `rate × duration` requests, each
 * with a 10 s timeout.
 *
 * Target (design.md): GET at 1,000 req/s, added p50 ≤ 0.3 ms and added
 * p99 ≤ 2 ms (quick mode checks the p50 only); the throughput ratio is
 * reported. Each rate runs twice per path, alternating which goes first;
 * the better round of each path is kept.
 *
 * The CPU time each server process spends per request is measured in the
 * same rounds (from /proc). The quick (CI) run judges P1 on that: on a
 * shared 2-core machine a short latency run measures the neighbours (a
 * quick run at a load of 24 read a p50 of 241 ms straight to devapi), while
 * the CPU a request costs the proxy is the proxy's; on an idle machine the
 * added latency is that CPU time plus one loopback hop. It is judged as a
 * ratio to devapi's CPU per GET in the same rounds, not in milliseconds:
 * the machine's speed moves both alike (one commit measured 0.16-0.20 ms
 * one day and 0.33-0.40 ms the next, its ratio the same). The full run
 * judges the latency itself. (A regression that adds waiting without CPU,
 * a timer or a buffered write, shows in the full run only.)
 *
 * `SHARDCAR_BENCH_SLOW_REQUEST_US=N` (test-only, bench/children/slow-request.ts)
 * starts the proxy with a hook that spends N µs of CPU on every request, as
 * a slower pass-through path would: it shows the quick judge failing.
 *
 * Usage: node bench/macro/p1-passthrough.ts [--quick]
 *   P1_DURATION_MS, P1_ROUNDS, P1_CONNECTIONS override the run length,
 *   rounds and closed-loop connections.
 */
import type { Bench, BenchResult } from "../lib/bench.ts";
import type { MaxResult, RateResult } from "../children/loadgen.ts";
import { ask, CLI, cpuMsOf, forkTs, start, stopAll, type Child } from "../lib/proc.ts";
import { slowRequestArgs } from "../children/slow-request.ts";

const KINDS = {
  get: { label: "GET one pod", path: "/api/v1/namespaces/ns-0/pods/pod-00000" },
  list: { label: "LIST ten pods (sharded, fast path)", path: "/api/v1/namespaces/ns-0/pods" },
} as const;
type Kind = keyof typeof KINDS;

// design.md P1: GET at 1,000 req/s.
const TARGET_RATE = 1000;
const TARGET_ADDED_MS = { p50: 0.3, p99: 2 } as const;
/**
 * Quick mode: devapi's CPU per GET over the proxy's, at least this (the
 * proxy spends at most 4× what devapi spends serving the GET itself). The
 * same build measured 0.27-0.36 over 2026-12-01/02 (docs/performance.md,
 * "Can the quick bench flap?"); 0.25 holds the headroom the 0.3 ms bound
 * had on the day it was set (0.16-0.20 ms measured).
 */
const QUICK_CPU_RATIO_TARGET = 0.25;

const envInt = (name: string, dflt: number): number => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : dflt;
};

async function startStack(): Promise<{ devapi: Child; proxy: Child; direct: string; proxied: string }> {
  // 60 pods over 6 namespaces: ten in ns-0, so the LIST is small (~10 KB).
  const devapi = start("devapi", process.execPath, [CLI, "devapi", "--port", "0", "--gate", "on", "--seed-pods", "60", "--namespaces", "6", "--log-level", "warn"]);
  const direct = (await devapi.waitLine(/^(http:\/\/\S+)$/, 20_000))[1] ?? "";
  const proxy = start("proxy", process.execPath, [...slowRequestArgs(), CLI, "proxy", "--server", direct, "--resources", "pods", "--shards", "0/1", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--log-level", "warn"]);
  const proxied = (await proxy.waitLine(/listening on (http:\/\/\S+)/, 20_000))[1] ?? "";
  return { devapi, proxy, direct, proxied };
}

export const bench: Bench = async ({ quick }) => {
  const rates = quick ? [TARGET_RATE] : [200, 1000, 5000];
  const durationMs = envInt("P1_DURATION_MS", quick ? 1000 : 3000);
  const warmupMs = quick ? 300 : 500;
  const rounds = envInt("P1_ROUNDS", 2);
  const connections = envInt("P1_CONNECTIONS", 32);
  const { devapi, proxy, direct, proxied } = await startStack();
  const gen = forkTs("loadgen", new URL("../children/loadgen.ts", import.meta.url), []);
  try {
    await ask(gen, { type: "" }, "ready", 20_000);
    const results: BenchResult[] = [];
    for (const kind of Object.keys(KINDS) as Kind[]) {
      const path = KINDS[kind].path;
      for (const rate of rates) {
        // Best of `rounds` per target, alternating which goes first, so a
        // burst of load from elsewhere on the machine hits both alike.
        const best: Record<"direct" | "proxy", RateResult | undefined> = { direct: undefined, proxy: undefined };
        // CPU ms per request of the process serving each path (direct: devapi; proxied: the proxy alone).
        const cpuPerRequest = { direct: Number.POSITIVE_INFINITY, proxy: Number.POSITIVE_INFINITY };
        for (let r = 0; r < rounds; r++) {
          const order: Array<"direct" | "proxy"> = r % 2 === 0 ? ["direct", "proxy"] : ["proxy", "direct"];
          for (const which of order) {
            const url = (which === "direct" ? direct : proxied) + path;
            const timeout = warmupMs + durationMs + 30_000;
            const served = which === "direct" ? devapi : proxy;
            const cpu0 = cpuMsOf(served.pid);
            const res = await ask<RateResult>(gen, { type: "rate", url, rate, durationMs, warmupMs }, "result", timeout);
            cpuPerRequest[which] = Math.min(cpuPerRequest[which], (cpuMsOf(served.pid) - cpu0) / Math.max(1, res.sent));
            const prev = best[which];
            if (prev === undefined || res.p50 + res.p99 < prev.p50 + prev.p99) best[which] = res;
          }
        }
        const d = best.direct;
        const p = best.proxy;
        if (d === undefined || p === undefined) throw new Error("no P1 rounds ran");
        for (const q of ["p50", "p99", "p999"] as const) {
          const added = p[q] - d[q];
          // The full run checks p50 and p99; quick mode judges the CPU per
          // request instead (see the header): its p99 comes from the 10
          // slowest of 1,000 requests, and both percentiles of a 1 s run on
          // a shared machine measure the neighbours, not the proxy.
          const checked = !quick && rate === TARGET_RATE && kind === "get" && (q === "p50" || q === "p99");
          const limit = checked ? TARGET_ADDED_MS[q === "p99" ? "p99" : "p50"] : undefined;
          results.push({
            id: "P1",
            name: `${KINDS[kind].label} at ${rate} req/s: ${q === "p999" ? "p99.9" : q} latency`,
            candidate: { label: "through shardcar proxy", value: round3(p[q]), unit: "ms" },
            baseline: { label: "direct to devapi", value: round3(d[q]), unit: "ms" },
            ratio: d[q] / p[q],
            extra: {
              kind,
              rate,
              percentile: q,
              addedMs: round3(added),
              ...(limit === undefined ? {} : { targetMaxAddedMs: limit }),
              achievedRpsProxy: Math.round(p.achievedRps),
              achievedRpsDirect: Math.round(d.achievedRps),
              errorsProxy: p.errors,
              errorsDirect: d.errors,
              requests: p.recorded,
              lagP99Ms: round3(Math.max(p.lagP99, d.lagP99)),
            },
          });
        }
        results.push({
          id: "P1",
          name: `${KINDS[kind].label} at ${rate} req/s: CPU time per request of the serving process`,
          candidate: { label: "shardcar proxy process", value: round3(cpuPerRequest.proxy), unit: "ms" },
          baseline: { label: "devapi process, direct", value: round3(cpuPerRequest.direct), unit: "ms" },
          ratio: cpuPerRequest.direct / cpuPerRequest.proxy,
          ...(quick && rate === TARGET_RATE && kind === "get" ? { target: QUICK_CPU_RATIO_TARGET } : {}),
          extra: { kind, rate },
        });
      }
      // Maximum throughput: closed loop, same connections for both.
      const maxMs = quick ? 1000 : 3000;
      const md = await ask<MaxResult>(gen, { type: "max", url: direct + path, connections, durationMs: maxMs }, "result", maxMs + 30_000);
      const mp = await ask<MaxResult>(gen, { type: "max", url: proxied + path, connections, durationMs: maxMs }, "result", maxMs + 30_000);
      results.push({
        id: "P1",
        name: `${KINDS[kind].label}: maximum throughput (${connections} connections)`,
        candidate: { label: "through shardcar proxy", value: Math.round(mp.rps), unit: "req/s" },
        baseline: { label: "direct to devapi", value: Math.round(md.rps), unit: "req/s" },
        ratio: mp.rps / md.rps,
        extra: { kind, percentile: "max-throughput", connections, errorsProxy: mp.errors, errorsDirect: md.errors },
      });
    }
    return results;
  } finally {
    gen.proc.send({ type: "exit" });
    await stopAll();
  }
};

function round3(n: number): number {
  return Math.round(n * 1000) / 1000;
}

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
