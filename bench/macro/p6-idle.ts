/**
 * P6, the idle sidecar: a real `shardcar proxy` process (the built CLI,
 * static shards, pointed at a devapi process) measured from `spawn` to the
 * first 200 from its admin `/readyz`, and its resident memory after it has
 * sat idle. Baseline, in the same run: a bare `node -e` HTTP server, spawned
 * and polled the same way — what any Node sidecar costs before it does
 * anything.
 *
 * Each figure is the median of several cold starts. Targets (design.md):
 * RSS ≤ 80 MB and start-to-ready ≤ 1 s.
 *
 * Usage: node bench/macro/p6-idle.ts [--quick]
 */
import type { Bench, BenchResult } from "../lib.ts";
import { CLI, freePort, rssOf, sleep, start, stopAll, waitReady } from "../support/proc.ts";

const MB = 1024 * 1024;
const TARGET_RSS_MB = 80;
const TARGET_READY_MS = 1000;

const BARE_SERVER = "require('node:http').createServer((q, s) => s.end('ok\\n')).listen(Number(process.argv[1]), '127.0.0.1')";

interface Sample {
  readyMs: number;
  rssMB: number;
}

async function sample(kind: "proxy" | "bare", upstream: string, idleMs: number): Promise<Sample> {
  const port = await freePort();
  const t0 = performance.now();
  const child =
    kind === "proxy"
      ? start("proxy", process.execPath, [CLI, "proxy", "--server", upstream, "--resources", "pods,configmaps=namespace", "--shards", "0/2", "--listen", "127.0.0.1:0", "--admin-listen", `127.0.0.1:${port}`, "--log-level", "warn"])
      : start("bare", process.execPath, ["-e", BARE_SERVER, String(port)]);
  try {
    const readyMs = await waitReady(`http://127.0.0.1:${port}${kind === "proxy" ? "/readyz" : "/"}`, t0, 15_000);
    await sleep(idleMs);
    return { readyMs, rssMB: rssOf(child.pid).rss / MB };
  } finally {
    await child.stop();
  }
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] ?? Number.NaN) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
}

export const bench: Bench = async ({ quick }) => {
  const runs = quick ? 5 : 7;
  const idleMs = quick ? 1000 : 5000;
  const devapi = start("devapi", process.execPath, [CLI, "devapi", "--port", "0", "--log-level", "warn"]);
  try {
    const upstream = (await devapi.waitLine(/^(http:\/\/\S+)$/, 20_000))[1] ?? "";
    const proxy: Sample[] = [];
    const bare: Sample[] = [];
    // Interleaved, so a burst of load elsewhere hits both series alike.
    for (let i = 0; i < runs; i++) {
      bare.push(await sample("bare", upstream, idleMs));
      proxy.push(await sample("proxy", upstream, idleMs));
    }
    const rss = median(proxy.map((s) => s.rssMB));
    const rssBare = median(bare.map((s) => s.rssMB));
    const ready = median(proxy.map((s) => s.readyMs));
    const readyBare = median(bare.map((s) => s.readyMs));
    const r1 = (n: number): number => Math.round(n * 10) / 10;
    const results: BenchResult[] = [
      {
        id: "P6",
        name: `idle sidecar RSS (after ${idleMs / 1000} s idle, median of ${runs})`,
        candidate: { label: "shardcar proxy", value: r1(rss), unit: "MB" },
        baseline: { label: "bare node http server", value: r1(rssBare), unit: "MB" },
        ratio: rssBare / rss,
        extra: { targetMax: TARGET_RSS_MB, maxMB: r1(Math.max(...proxy.map((s) => s.rssMB))), overBareMB: r1(rss - rssBare) },
      },
      {
        id: "P6",
        name: `start to ready (spawn to first 200 from /readyz, median of ${runs})`,
        candidate: { label: "shardcar proxy", value: Math.round(ready), unit: "ms" },
        baseline: { label: "bare node http server", value: Math.round(readyBare), unit: "ms" },
        ratio: readyBare / ready,
        extra: { targetMax: TARGET_READY_MS, maxMs: Math.round(Math.max(...proxy.map((s) => s.readyMs))), overBareMs: Math.round(ready - readyBare) },
      },
    ];
    return results;
  } finally {
    await stopAll();
  }
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
