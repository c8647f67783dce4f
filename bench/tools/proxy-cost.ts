/**
 * The proxy's CPU cost per request, for before/after comparisons of a
 * hot-path change: each given build of the CLI runs as a `shardcar proxy`
 * process in front of one devapi, the load generator sends a fixed number
 * of requests at a fixed rate (so every build does the same work), and the
 * proxy's own CPU time (user + system, from /proc) is divided by the
 * requests. CPU time, unlike latency or throughput, barely moves when other
 * processes share the machine. Builds alternate, rounds repeat, the
 * minimum per build is kept.
 *
 *   node bench/tools/proxy-cost.ts [--rounds 5] [--rate 500] [--seconds 4]
 *       [before=/path/to/dist/cli/bin.js] [after=/other/dist/cli/bin.js] [bare] ...
 *       ["flagged=dist/cli/bin.js|--max-semi-space-size=1 ..."]   (Node flags after |)
 *
 * Without builds it measures this checkout's dist/ alone; `bare` adds the
 * floor, ../children/bare-forwarder.ts (Node's HTTP stack and nothing else). Linux only.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { RateResult } from "../children/loadgen.ts";
import { ask, CLI, forkTs, start, stopAll } from "../lib/proc.ts";

const PATHS = { get: "/api/v1/namespaces/ns-0/pods/pod-00000", list: "/api/v1/namespaces/ns-0/pods" } as const;

/** utime + stime of a process, in microseconds. */
function cpuMicros(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  // Fields 14 and 15 of /proc/pid/stat (utime, stime) in clock ticks; the
  // split above starts at field 3. Ticks are 10 ms on every Linux we run on.
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { rounds: { type: "string" }, rate: { type: "string" }, seconds: { type: "string" } } });
  const builds = positionals.length === 0 ? [["this", CLI] as const] : positionals.map((p) => (p === "bare" ? (["bare", ""] as const) : ([p.slice(0, p.indexOf("=")), p.slice(p.indexOf("=") + 1)] as const)));
  // A build may carry Node flags: `name=path|--flag --flag`.
  const flagsOf = (cli: string): [string, string[]] => {
    const bar = cli.indexOf("|");
    return bar < 0 ? [cli, []] : [cli.slice(0, bar), cli.slice(bar + 1).split(" ").filter((f) => f !== "")];
  };
  const bare = new URL("../children/bare-forwarder.ts", import.meta.url).pathname;
  const rounds = Number(values.rounds ?? "5");
  const rate = Number(values.rate ?? "500");
  const durationMs = Number(values.seconds ?? "4") * 1000;
  try {
    const devapi = start("devapi", process.execPath, [CLI, "devapi", "--port", "0", "--gate", "on", "--seed-pods", "60", "--namespaces", "6", "--log-level", "warn"]);
    const upstream = (await devapi.waitLine(/^(http:\/\/\S+)$/, 20_000))[1] ?? "";
    const gen = forkTs("loadgen", new URL("../children/loadgen.ts", import.meta.url), []);
    await ask(gen, { type: "" }, "ready", 20_000);
    const proxies = await Promise.all(
      builds.map(async ([name, cli]) => {
        const [path, flags] = flagsOf(cli);
        const args = cli === "" ? [bare, upstream] : [...flags, path, "proxy", "--server", upstream, "--resources", "pods", "--shards", "0/1", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--log-level", "warn"];
        const p = start(`proxy-${name}`, process.execPath, args);
        const url = (await p.waitLine(/listening on (http:\/\/\S+)/, 30_000))[1] ?? "";
        return { name, p, url };
      }),
    );
    const best = new Map<string, number>();
    for (let r = 0; r < rounds; r++) {
      for (const kind of ["get", "list"] as const) {
        const order = r % 2 === 0 ? proxies : [...proxies].reverse();
        for (const { name, p, url } of order) {
          const c0 = cpuMicros(p.pid);
          const res = await ask<RateResult>(gen, { type: "rate", url: url + PATHS[kind], rate, durationMs, warmupMs: 0 }, "result", durationMs + 60_000);
          const perReq = (cpuMicros(p.pid) - c0) / res.sent;
          const key = `${name} ${kind}`;
          best.set(key, Math.min(best.get(key) ?? Number.POSITIVE_INFINITY, perReq));
          console.log(`round ${r + 1} ${key.padEnd(16)} ${perReq.toFixed(0).padStart(5)} µs CPU/request (p50 ${res.p50.toFixed(2)} ms, p99 ${res.p99.toFixed(2)} ms, ${res.errors} errors)`);
        }
      }
    }
    console.log("\nminimum over rounds (µs of proxy CPU per request):");
    for (const [k, v] of best) console.log(`  ${k.padEnd(16)} ${v.toFixed(0)}`);
    gen.proc.send({ type: "exit" });
  } finally {
    await stopAll();
  }
}
