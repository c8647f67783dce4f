/**
 * Where a sidecar's memory goes: one `shardcar proxy` process (TLS to its
 * client and to devapi, as in a pod) through phases, with its RSS, RssAnon
 * and PSS (sampled peaks and settled), its own `process.memoryUsage()` and V8 space sizes (from
 * /debug/shardcar) and /proc's anonymous/file split after each:
 *
 *   idle      started, nothing served yet
 *   list      one gate-off LIST of every pod (filtered by the proxy), read
 *             by a fast client, then by a 2 MB/s one (--rate)
 *   churn     a watch through the proxy while devapi patches pods for
 *             --churn-s seconds
 *
 *   node bench/tools/memory-probe.ts [--pods 24000] [--shards 0/4]
 *       [--gate off] [--rate 2000000] [--churn-s 60] [--churn-rate 200]
 *       [--node-flags "--max-semi-space-size=1"] [--env K=V,...] [--sidecar-env]
 *       [--without-sidecar-runtime]   V8's and glibc's defaults in place of the
 *                          sidecar's settings (which the proxy otherwise adds
 *                          itself, src/cli/bin.ts), for a before/after
 *       [--snapshot DIR]   heap snapshots (SIGUSR2) at idle, mid-list, after
 *       [--bare]           also: a bare Node process with the same listeners
 *       [--timeline]       client/proxy bytes and memory every second of a list
 *       [--proxy-output]   the proxy's non-log output (e.g. with --trace-gc)
 *       [--curl]           read the lists with curl (--limit-rate for the
 *                          slow reader) instead of this process's reader
 *
 * Prints a JSON report; memory in MiB (2^20 bytes). Used for docs/performance.md's breakdown; the
 * benches (P6, P6b) measure the same things against their targets.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { sidecarProcessEnv } from "../../src/sidecar-runtime.ts";
import { MemorySampler, procCpuMs, procIo, procMemory, readBody, smapsRollup, toMiB, type MemoryFigures } from "../lib/memory.ts";
import { ask, forkTs, httpGet, sleep, start, stopAll, until } from "../lib/proc.ts";
import { startProxyProc, withoutSidecarRuntime, type ProxyProc } from "../lib/proxy-proc.ts";
import { benchTls, type BenchTls } from "../lib/tls.ts";

const DEVAPI = fileURLToPath(new URL("../children/scale-devapi.ts", import.meta.url));

interface Phase {
  readonly phase: string;
  readonly peakMiB?: number;
  readonly peakAnonMiB?: number;
  readonly peakPssMiB?: number;
  readonly rssMiB: number;
  /** VmHWM: the kernel's peak RSS since the process started. */
  readonly hwmMiB: number;
  readonly anonMiB: number;
  readonly fileMiB: number;
  readonly pssMiB: number;
  readonly privateDirtyMiB: number;
  readonly usage: Record<string, number>;
  readonly extra?: Record<string, number | string>;
}

async function usageOf(p: ProxyProc): Promise<Record<string, number>> {
  const body = JSON.parse((await httpGet(`${p.admin}/debug/shardcar`)).body) as { memory?: Record<string, number> };
  return Object.fromEntries(Object.entries(body.memory ?? {}).map(([k, v]) => [k, toMiB(v)]));
}

async function phase(name: string, p: ProxyProc, peak?: MemoryFigures, extra?: Record<string, number | string>): Promise<Phase> {
  const m = procMemory(p.child.pid);
  const sm = smapsRollup(p.child.pid);
  return {
    phase: name,
    ...(peak === undefined ? {} : { peakMiB: toMiB(peak.rss), peakAnonMiB: toMiB(peak.anon), peakPssMiB: toMiB(peak.pss) }),
    rssMiB: toMiB(m.rss),
    hwmMiB: toMiB(m.hwm),
    anonMiB: toMiB(m.anon),
    fileMiB: toMiB(m.file),
    pssMiB: toMiB(sm["Pss"] ?? Number.NaN),
    privateDirtyMiB: toMiB(sm["Private_Dirty"] ?? Number.NaN),
    usage: await usageOf(p),
    ...(extra === undefined ? {} : { extra }),
  };
}

async function snapshot(p: ProxyProc, dir: string | undefined, label: string): Promise<void> {
  if (dir === undefined) return;
  const before = new Set(readdirSync(dir));
  p.child.proc.kill("SIGUSR2");
  await until(() => readdirSync(dir).some((f) => !before.has(f) && f.endsWith(".heapsnapshot")), 60_000, 100);
  console.error(`snapshot ${label}: ${readdirSync(dir).filter((f) => !before.has(f)).join(", ")}`);
}

/** A bare Node process with the sidecar's two listeners (TLS proxy port, plain admin port): the floor. */
async function bare(tls: BenchTls, nodeFlags: readonly string[], env: NodeJS.ProcessEnv): Promise<Phase> {
  const code = `const fs=require('node:fs');require('node:https').createServer({cert:fs.readFileSync(${JSON.stringify(tls.certFile)}),key:fs.readFileSync(${JSON.stringify(tls.keyFile)})},(q,s)=>s.end('ok')).listen(0,'127.0.0.1');require('node:http').createServer((q,s)=>s.end('ok')).listen(0,'127.0.0.1',()=>console.log('ready'))`;
  const c = start("bare", process.execPath, [...nodeFlags, "-e", code], env);
  await c.waitLine(/^ready$/, 10_000);
  await sleep(3000);
  const m = procMemory(c.pid);
  const sm = smapsRollup(c.pid);
  await c.stop();
  return { phase: "bare node, same listeners", rssMiB: toMiB(m.rss), hwmMiB: toMiB(m.hwm), anonMiB: toMiB(m.anon), fileMiB: toMiB(m.file), pssMiB: toMiB(sm["Pss"] ?? Number.NaN), privateDirtyMiB: toMiB(sm["Private_Dirty"] ?? Number.NaN), usage: {} };
}

/** A list read by curl, as a user would try it: its own socket buffers and rate limiter, not Node's. */
function curlBody(url: string, caFile: string, bytesPerSecond: number | undefined): Promise<{ bytes: number; ms: number }> {
  const t0 = performance.now();
  const args = ["-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download}", "--cacert", caFile, ...(bytesPerSecond === undefined ? [] : ["--limit-rate", String(bytesPerSecond)]), url];
  return new Promise((resolve, reject) => {
    execFile("curl", args, (err, stdout) => (err ? reject(new Error(`curl ${url}: ${err.message}`)) : resolve({ bytes: Number(stdout), ms: performance.now() - t0 })));
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      pods: { type: "string", default: "24000" },
      shards: { type: "string", default: "0/4" },
      gate: { type: "string", default: "off" },
      rate: { type: "string", default: "2000000" },
      "churn-s": { type: "string", default: "60" },
      "churn-rate": { type: "string", default: "200" },
      "node-flags": { type: "string", default: "" },
      env: { type: "string", default: "" },
      snapshot: { type: "string" },
      bare: { type: "boolean", default: false },
      "skip-slow": { type: "boolean", default: false },
      "skip-fast": { type: "boolean", default: false },
      timeline: { type: "boolean", default: false },
      "sidecar-env": { type: "boolean", default: false },
      "without-sidecar-runtime": { type: "boolean", default: false },
      "proxy-output": { type: "boolean", default: false },
      curl: { type: "boolean", default: false },
    },
  });
  const nodeFlags = (values["node-flags"] ?? "").split(" ").filter((f) => f !== "");
  // --env K=V,...; --sidecar-env: the sidecar's own settings (src/sidecar-runtime.ts) first.
  const extraEnv = Object.fromEntries((values.env ?? "").split(",").filter((kv) => kv.includes("=")).map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
  const env = { ...(values["sidecar-env"] ? sidecarProcessEnv() : values["without-sidecar-runtime"] ? withoutSidecarRuntime() : process.env), ...extraEnv };
  const snapDir = values.snapshot === undefined ? undefined : values.snapshot === "" ? mkdtempSync(join(tmpdir(), "shardcar-heap-")) : values.snapshot;
  const tls = await benchTls("memprobe");
  const devapi = forkTs("devapi", DEVAPI, ["--pods", values.pods ?? "24000", "--cert", tls.certFile, "--key", tls.keyFile, "--gate", values.gate ?? "off"]);
  const report: { load: string; phases: Phase[]; listMiB?: number } = { load: "", phases: [] };
  try {
    const ready = await ask<{ url: string; pods: number }>(devapi, { type: "" }, "ready", 300_000);
    if (values.bare) report.phases.push(await bare(tls, nodeFlags, env));
    const proxy = await startProxyProc({
      name: "proxy",
      upstream: ready.url,
      tls,
      shards: values.shards ?? "0/4",
      nodeFlags: [...nodeFlags, ...(snapDir === undefined ? [] : ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${snapDir}`])],
      env,
    });
    await sleep(3000);
    report.phases.push(await phase("idle", proxy));
    await snapshot(proxy, snapDir, "idle");
    const listUrl = `${proxy.url}/api/v1/pods`;
    for (const [label, rate] of [
      ["list, fast reader", values["skip-fast"] ? -1 : undefined],
      ["list, slow reader", values["skip-slow"] ? -1 : Number(values.rate)],
    ] as const) {
      if (rate === -1) continue;
      const sampler = new MemorySampler(proxy.child.pid, 20);
      let got = 0;
      const io0 = procIo(proxy.child.pid);
      const cpu0 = procCpuMs(proxy.child.pid);
      const timeline: string[] = [];
      const tick = setInterval(() => {
        const io = procIo(proxy.child.pid);
        void usageOf(proxy).then((u) => timeline.push(`client ${toMiB(got)} MiB, proxy read ${toMiB(io.read - io0.read)} MiB, wrote ${toMiB(io.written - io0.written)} MiB; rss ${u["rss"]} heapTotal ${u["heapTotal"]} external ${u["external"]} arrayBuffers ${u["arrayBuffers"]}`));
      }, 1000);
      const reading = values.curl ? curlBody(listUrl, tls.caFile, rate) : readBody(listUrl, { ca: tls.caPem, onProgress: (b) => (got = b), ...(rate === undefined ? {} : { bytesPerSecond: rate }) });
      if (rate !== undefined && snapDir !== undefined) {
        await sleep(8000);
        await snapshot(proxy, snapDir, "mid-list");
      }
      const r = await reading;
      clearInterval(tick);
      const peak = sampler.stop();
      if (values.timeline) console.error(`${label}:\n  ${timeline.join("\n  ")}`);
      report.listMiB = toMiB(r.bytes);
      report.phases.push(await phase(label, proxy, peak, { listMiB: toMiB(r.bytes), seconds: Math.round(r.ms / 100) / 10, proxyCpuMs: procCpuMs(proxy.child.pid) - cpu0 }));
      await sleep(2000);
      report.phases.push(await phase(`${label}, 2 s later`, proxy));
    }
    const churnS = Number(values["churn-s"]);
    if (churnS > 0) {
      const rv = "0";
      const sampler = new MemorySampler(proxy.child.pid, 100);
      const watch = readBody(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=${rv}&timeoutSeconds=${churnS + 30}`, { ca: tls.caPem });
      await ask(devapi, { type: "churn", count: churnS * Number(values["churn-rate"]), rate: Number(values["churn-rate"]), seed: 1 }, "churned", churnS * 1000 + 120_000);
      const peak = sampler.stop();
      report.phases.push(await phase(`watch with ${churnS} s of churn`, proxy, peak));
      void watch.catch(() => undefined);
    }
    await snapshot(proxy, snapDir, "end");
    if (values["proxy-output"]) console.error(proxy.child.lines.filter((l) => !l.startsWith("{")).join("\n"));
    report.load = (await import("node:os")).loadavg().map((x) => x.toFixed(2)).join(" ");
    console.log(JSON.stringify(report, null, 1));
    if (snapDir !== undefined) console.error(`heap snapshots in ${snapDir}`);
  } finally {
    if (devapi.proc.connected) devapi.proc.send({ type: "exit" });
    await stopAll();
    tls.remove();
  }
}

await main();
