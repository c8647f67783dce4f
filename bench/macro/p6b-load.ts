/**
 * P6b, the sidecar under load: how much a real `shardcar proxy` process
 * (TLS to its client and to devapi, the sidecar's runtime settings) grows
 * over its own idle RSS while it streams a 100 MB list and then 5 minutes
 * of watch churn (quick: a 10 MB list and 15 s).
 *
 * Four proxies in the same run, each with its own client: gate on and gate
 * off (two devapi processes), a fast client and a slow one (2 MB/s, which
 * pauses its socket whenever it is ahead: a controller busy decoding). Each
 * proxy owns half the keyspace (`--shards 0/2`): gate off it reads the whole
 * list and filters it, gate on the server sends it half. The client LISTs
 * pods, then WATCHes from the list's resourceVersion while devapi patches
 * pods at a fixed rate. Each gate × reader case has a process of its own,
 * started for it, so the kernel's own peak of its RSS (VmHWM in
 * /proc/<pid>/status, read once the list is through and once the case is
 * over) covers exactly that case: nothing is missed between samples. The
 * kernel keeps no peak of the anonymous memory (RssAnon) or of PSS, so
 * those peaks are sampled (bench/lib/memory.ts, MemorySampler: RssAnon
 * every 50 ms, PSS every 250 ms) and can miss a spike shorter than that.
 * Idle is the same process before its first request (median of a few
 * readings); growth is the peak minus idle.
 *
 * Targets, for every client and gate: RSS growth ≤ 32 MiB (design.md), and
 * anonymous-memory growth ≤ 32 MiB (issue 25, bench/lib/checks.ts).
 *
 * Usage: node bench/macro/p6b-load.ts [--quick]
 *   P6B_PODS, P6B_CHURN_S, P6B_CHURN_RATE, P6B_SLOW_BPS override the sizes;
 *   P6B_RUNTIME=none starts the proxies with V8's and glibc's defaults in
 *   place of the sidecar's runtime settings (src/sidecar-runtime.ts), for a
 *   before/after.
 */
import { fileURLToPath } from "node:url";
import type { Bench, BenchResult } from "../lib/bench.ts";
import { ANON_TARGETS } from "../lib/checks.ts";
import { memoryNow, MemorySampler, procMemory, readBody, toMiB, type MemoryFigures } from "../lib/memory.ts";
import { ask, forkTs, sleep, stopAll, type Child } from "../lib/proc.ts";
import { proxyStats, startProxyProc, withoutSidecarRuntime, type ProxyProc } from "../lib/proxy-proc.ts";
import { benchTls, type BenchTls } from "../lib/tls.ts";

const DEVAPI = fileURLToPath(new URL("../children/scale-devapi.ts", import.meta.url));
const TARGET_GROWTH_MIB = 32;

type Gate = "on" | "off";
type Reader = "fast" | "slow";

interface Outcome {
  readonly gate: Gate;
  readonly reader: Reader;
  readonly idle: MemoryFigures;
  /** VmHWM before the first request: what starting up cost at its peak. */
  readonly idleHwm: number;
  /** Peaks over the list alone: `rss` is VmHWM, `anon` and `pss` sampled. */
  readonly listPeak: MemoryFigures;
  /** Peaks over list and churn: `rss` is VmHWM, `anon` and `pss` sampled. */
  readonly peak: MemoryFigures;
  readonly after: MemoryFigures;
  readonly sampleMs: number;
  readonly listBytes: number;
  readonly listMs: number;
  readonly watchBytes: number;
  readonly upstreamBytes: number;
}

const envNum = (name: string, dflt: number): number => {
  const v = process.env[name];
  return v === undefined || v === "" ? dflt : Number(v);
};

/** Median of a few samples a moment apart, each figure: an idle process still settles by a few hundred kB. */
async function idleMemory(pid: number): Promise<MemoryFigures> {
  const xs: MemoryFigures[] = [];
  for (let i = 0; i < 5; i++) {
    xs.push(memoryNow(pid));
    await sleep(200);
  }
  const median = (k: keyof MemoryFigures): number => xs.map((x) => x[k]).sort((a, b) => a - b)[2] ?? Number.NaN;
  return { rss: median("rss"), anon: median("anon"), pss: median("pss") };
}

/** Resolves once `n` parties arrived. */
function barrier(n: number): { readonly arrive: () => void; readonly all: Promise<void> } {
  let left = n;
  let open = (): void => undefined;
  const all = new Promise<void>((resolve) => (open = resolve));
  return {
    arrive: () => {
      if (--left === 0) open();
    },
    all,
  };
}

async function drive(p: ProxyProc, gate: Gate, reader: Reader, tls: BenchTls, bps: number, listed: () => void, churnDone: Promise<void>): Promise<Outcome> {
  await sleep(3000);
  const idle = await idleMemory(p.child.pid);
  const idleHwm = procMemory(p.child.pid).hwm;
  // For RssAnon and PSS only: RSS's peak is the kernel's (VmHWM).
  const sampler = new MemorySampler(p.child.pid);
  const rate = reader === "slow" ? { bytesPerSecond: bps } : {};
  const list = await readBody(`${p.url}/api/v1/pods`, { ca: tls.caPem, ...rate });
  if (list.status !== 200) throw new Error(`gate ${gate}, ${reader} reader: LIST answered ${list.status}`);
  const listPeak = { ...sampler.peak, rss: procMemory(p.child.pid).hwm };
  const rv = /"resourceVersion":"(\d+)"/.exec(list.head)?.[1];
  if (rv === undefined) throw new Error(`gate ${gate}, ${reader} reader: no resourceVersion in the list's first 4 kB`);
  const stop = new AbortController();
  const watch = readBody(`${p.url}/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`, { ca: tls.caPem, signal: stop.signal, ...rate });
  listed();
  await churnDone;
  // The last events through the slowest client, then the peak is final.
  await sleep(2000);
  stop.abort();
  const w = await watch;
  const sampleMs = sampler.meanIntervalMs();
  const peak = { ...sampler.stop(), rss: procMemory(p.child.pid).hwm };
  await sleep(2000);
  const after = memoryNow(p.child.pid);
  const stats = await proxyStats(p);
  return { gate, reader, idle, idleHwm, listPeak, peak, after, sampleMs, listBytes: list.bytes, listMs: list.ms, watchBytes: w.bytes, upstreamBytes: stats.upstreamBytes };
}

export const bench: Bench = async ({ quick }) => {
  // ~4.2 kB a pod on the wire: 24,000 pods make a 100 MB list.
  const pods = envNum("P6B_PODS", quick ? 2400 : 24_000);
  const churnS = envNum("P6B_CHURN_S", quick ? 15 : 300);
  const churnRate = envNum("P6B_CHURN_RATE", 200);
  const bps = envNum("P6B_SLOW_BPS", 2_000_000);
  const tls = await benchTls("p6b");
  const devapis: Record<Gate, Child> = {
    on: forkTs("devapi-on", DEVAPI, ["--pods", String(pods), "--cert", tls.certFile, "--key", tls.keyFile, "--gate", "on"]),
    off: forkTs("devapi-off", DEVAPI, ["--pods", String(pods), "--cert", tls.certFile, "--key", tls.keyFile, "--gate", "off"]),
  };
  try {
    const ready = {
      on: await ask<{ url: string; bytes: number }>(devapis.on, { type: "" }, "ready", 300_000),
      off: await ask<{ url: string; bytes: number }>(devapis.off, { type: "" }, "ready", 300_000),
    };
    const cases = (["on", "off"] as const).flatMap((gate) => (["fast", "slow"] as const).map((reader) => ({ gate, reader })));
    const proxies = await Promise.all(cases.map((c) => startProxyProc({ name: `proxy-${c.gate}-${c.reader}`, upstream: ready[c.gate].url, tls, shards: "0/2", ...(process.env["P6B_RUNTIME"] === "none" ? { env: withoutSidecarRuntime() } : {}) })));
    // Churn starts once every list is through (the slow ones take longest)
    // and every watch is open.
    const lists = barrier(cases.length);
    const churnDone = lists.all.then(async () => {
      await Promise.all((["on", "off"] as const).map((g) => ask(devapis[g], { type: "churn", count: churnS * churnRate, rate: churnRate, seed: 1 }, "churned", churnS * 1000 + 120_000)));
    });
    const outcomes = await Promise.all(cases.map((c, i) => drive(proxies[i] as ProxyProc, c.gate, c.reader, tls, bps, lists.arrive, churnDone)));
    return outcomes.flatMap((o): BenchResult[] => {
      const what = `${Math.round(ready[o.gate].bytes / 1e6)} MB list + ${churnS} s of churn, gate ${o.gate}, ${o.reader === "fast" ? "fast client" : `slow client (${bps / 1e6} MB/s)`}`;
      const common = {
        gate: o.gate,
        reader: o.reader,
        listToClientMiB: toMiB(o.listBytes),
        listSeconds: Math.round(o.listMs / 100) / 10,
        upstreamMiB: toMiB(o.upstreamBytes),
        watchToClientMiB: toMiB(o.watchBytes),
        churnEvents: churnS * churnRate,
      };
      return [
        {
          id: "P6b",
          name: `sidecar RSS growth over idle, ${what}`,
          candidate: { label: "VmHWM − idle RSS, same process", value: toMiB(o.peak.rss - o.idle.rss), unit: "MiB" },
          baseline: { label: "idle RSS", value: toMiB(o.idle.rss), unit: "MiB" },
          ratio: o.idle.rss / o.peak.rss,
          extra: { targetMaxMiB: TARGET_GROWTH_MIB, ...common, idleMiB: toMiB(o.idle.rss), idleHwmMiB: toMiB(o.idleHwm), peakMiB: toMiB(o.peak.rss), peakFrom: "VmHWM", listPeakMiB: toMiB(o.listPeak.rss), afterMiB: toMiB(o.after.rss) },
        },
        {
          id: "P6b",
          name: `sidecar anonymous-memory growth over idle, ${what}`,
          candidate: { label: "sampled peak − idle RssAnon, same process", value: toMiB(o.peak.anon - o.idle.anon), unit: "MiB" },
          baseline: { label: "idle RssAnon", value: toMiB(o.idle.anon), unit: "MiB" },
          ratio: o.idle.anon / o.peak.anon,
          extra: {
            targetMaxMiB: ANON_TARGETS.growthMaxMiB,
            ...common,
            metric: "anon",
            peakFrom: "sampled: the kernel keeps no peak of RssAnon or PSS",
            sampledEveryMs: Math.round(o.sampleMs),
            idleMiB: toMiB(o.idle.anon),
            peakMiB: toMiB(o.peak.anon),
            listGrowthMiB: toMiB(o.listPeak.anon - o.idle.anon),
            afterMiB: toMiB(o.after.anon),
            idlePssMiB: toMiB(o.idle.pss),
            peakPssMiB: toMiB(o.peak.pss),
            pssGrowthMiB: toMiB(o.peak.pss - o.idle.pss),
          },
        },
      ];
    });
  } finally {
    for (const d of Object.values(devapis)) if (d.proc.connected) d.proc.send({ type: "exit" });
    await stopAll();
    tls.remove();
  }
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
