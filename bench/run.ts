/**
 * The benchmark runner behind `npm run bench`.
 *
 *   npm run bench                      every bench, full size; writes
 *                                      bench/results/latest.json and
 *                                      regenerates docs/performance.md
 *   npm run bench -- --quick           every bench, small inputs (< 2 min in
 *                                      total): the CI regression run; writes
 *                                      bench/results/quick.json and exits 1
 *                                      when a bench fails or a figure misses
 *                                      its target by more than
 *                                      QUICK_TOLERANCE (a known miss: when
 *                                      it gets worse than its ratchet, see
 *                                      KNOWN_MISSES in lib/checks.ts)
 *   npm run bench -- p5-scale p6-idle  only those (full: merged into
 *                                      latest.json, report regenerated)
 *   npm run bench -- --list            the benches and what they measure
 *
 * Each bench runs in its own process (bench/run-one.ts), so it gets
 * a fresh heap, its children die with it, and a crash or hang is reported
 * against that bench alone. `--report` regenerates the report from
 * latest.json without running anything.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { BenchResult } from "./lib/bench.ts";
import { checksOf, describeTarget, exitCodeOf, fmtNum, QUICK_LATENCY_TOLERANCE, QUICK_TOLERANCE, quickChecksOf } from "./lib/checks.ts";
import { load1, machine, type Machine } from "./lib/machine.ts";
import { writeReport } from "./lib/report.ts";
import type { BenchRun, ResultsFile } from "./lib/results.ts";

const BENCH_DIR = fileURLToPath(new URL(".", import.meta.url));
const ROOT = join(BENCH_DIR, "..");
const RESULTS_DIR = join(BENCH_DIR, "results");

export interface BenchSpec {
  readonly name: string;
  /** Relative to bench/. */
  readonly file: string;
  readonly kind: "micro" | "macro";
  /** The design.md targets it measures. */
  readonly covers: readonly string[];
  readonly summary: string;
  /** Kill the bench after this long (quick, full), in seconds. */
  readonly timeoutS: readonly [number, number];
}

/** Every bench this suite knows; a micro bench found in bench/micro/ but not listed here runs too. */
export const KNOWN: readonly BenchSpec[] = [
  { name: "json-list-filter", file: "micro/json-list-filter.bench.ts", kind: "micro", covers: ["P2", "P3"], summary: "JSON LIST: fast path vs a byte pipe; filter path vs JSON.parse+filter+stringify; RSS growth", timeoutS: [90, 900] },
  { name: "json-watch-filter", file: "micro/json-watch-filter.bench.ts", kind: "micro", covers: ["P4"], summary: "JSON WATCH filter vs an ndjson line splitter + JSON.parse", timeoutS: [90, 900] },
  { name: "proto-list-filter", file: "micro/proto-list-filter.bench.ts", kind: "micro", covers: ["P2", "P3"], summary: "protobuf LIST: fast path vs a byte pipe; filter path vs protobufjs decode+filter+encode", timeoutS: [90, 900] },
  { name: "proto-watch-filter", file: "micro/proto-watch-filter.bench.ts", kind: "micro", covers: ["P4"], summary: "protobuf WATCH filter vs protobufjs decode+filter+encode per frame", timeoutS: [90, 900] },
  { name: "p1-passthrough", file: "macro/p1-passthrough.ts", kind: "macro", covers: ["P1"], summary: "small GETs and LISTs through a proxy process vs direct, at 200/1,000/5,000 req/s; max throughput", timeoutS: [90, 900] },
  { name: "p5-scale", file: "macro/p5-scale.ts", kind: "macro", covers: ["P5", "P5m"], summary: "N = 1, 2, 4, 8 client-node informers behind proxies, gate on / off / no proxy: bytes, objects, heap, pod RSS", timeoutS: [150, 3600] },
  { name: "p5m-client-go", file: "macro/p5m-client-go.ts", kind: "macro", covers: ["P5m"], summary: "N = 1, 2, 4, 8 client-go informers (protobuf, watch-list) behind proxies against the real apiserver kit: pod RSS vs unsharded, break-even curve", timeoutS: [150, 3600] },
  { name: "p6-idle", file: "macro/p6-idle.ts", kind: "macro", covers: ["P6"], summary: "idle `shardcar proxy` process, static shards and ring mode: RSS and spawn-to-/readyz vs a bare node with the same listeners", timeoutS: [90, 600] },
  { name: "p6b-load", file: "macro/p6b-load.ts", kind: "macro", covers: ["P6b"], summary: "`shardcar proxy` RSS growth over idle through a 100 MB list and 5 minutes of churn, fast and 2 MB/s client, gate on and off", timeoutS: [120, 1200] },
  { name: "p7-scale-out", file: "macro/p7-scale-out.ts", kind: "macro", covers: ["P7"], summary: "ring scale-out by one member: full relists and convergence vs lease duration + one list", timeoutS: [120, 900] },
  { name: "s3-write-path", file: "macro/s3-write-path.ts", kind: "macro", covers: ["S3"], summary: "the stamping webhook's added CREATE/UPDATE latency through the real apiserver kit's admission chain at 50/200/1,000 creates/s, 1 and 3 manager replicas; writes while the manager is slow (timeout 3 s, failurePolicy Ignore)", timeoutS: [300, 1800] },
  { name: "p8-labels", file: "macro/p8-labels.ts", kind: "macro", covers: ["P8"], summary: "N = 1, 2, 4, 8 informers behind proxies in labels mode with the gate off, next to shardselector mode with the gate on: upstream bytes per proxy", timeoutS: [150, 3600] },
  { name: "s2-labeller", file: "macro/s2-labeller.ts", kind: "macro", covers: ["S2"], summary: "the labeller's first backfill of 200,000 unlabelled objects on the real apiserver kit: time to Labelled=True at the default and a raised rate ceiling vs the fixed 20/s, the kit's CPU", timeoutS: [300, 2400] },
  { name: "s1-ring-scale", file: "macro/s1-ring-scale.ts", kind: "macro", covers: ["S1"], summary: "64 ring members (proxy processes) over 200,000 pods under the real coordinator: start, scale 64 → 65, a leave, a crash; time to exact coverage, LISTs per step, relist budget, coordinator CPU/RSS, ShardRing size", timeoutS: [300, 3600] },
  { name: "s5-rollout", file: "macro/s5-rollout.ts", kind: "macro", covers: ["S5"], summary: "a rolling update of 64 ring members over 200,000 pods (25% surge, 25% unavailable), native-sidecar stop order with the injected preStop: pods in no live cache, time to exact coverage, pods listed, SIGKILLs at a 30 s grace", timeoutS: [300, 1500] },
  { name: "s4-selector-cost", file: "macro/s4-selector-cost.ts", kind: "macro", covers: ["S4"], summary: "the real apiserver kit's CPU per watch event with N watchers in labels mode (`in (slots)`), shardselector mode and unfiltered, N = 8 and 32", timeoutS: [240, 3600] },
];

const USAGE = `Usage: npm run bench -- [--quick] [--list] [--report] [name ...]

  --quick    small inputs, all benches < 2 min; exit 1 when a bench fails or a
             figure misses its target by more than ${QUICK_TOLERANCE * 100}% (${QUICK_LATENCY_TOLERANCE * 100}% for P1's
             added latency; a known miss: gets worse than its ratchet);
             writes bench/results/quick.json
  --list     list the benches and exit
  --report   regenerate docs/performance.md from bench/results/latest.json
  name ...   run only these benches (default: all)

Full runs write bench/results/latest.json (merged by bench) and regenerate
docs/performance.md and docs/perf/*.svg.
`;

function specs(): BenchSpec[] {
  const out = [...KNOWN];
  const micro = existsSync(join(BENCH_DIR, "micro")) ? readdirSync(join(BENCH_DIR, "micro")).filter((f) => f.endsWith(".bench.ts")) : [];
  for (const f of micro.sort()) {
    if (!out.some((s) => s.file === `micro/${f}`)) {
      out.push({ name: f.replace(/\.bench\.ts$/, ""), file: `micro/${f}`, kind: "micro", covers: [], summary: "(not described in bench/run.ts)", timeoutS: [90, 900] });
    }
  }
  return out;
}

function runOne(spec: BenchSpec, quick: boolean, m: Machine): Promise<BenchRun> {
  const file = join(BENCH_DIR, spec.file);
  const date = new Date().toISOString();
  const base = { name: spec.name, file: `bench/${spec.file}`, covers: spec.covers, date, quick, machine: m };
  if (!existsSync(file)) {
    return Promise.resolve({ ...base, status: "missing", error: `bench/${spec.file} does not exist`, seconds: 0, load1Before: load1(), load1After: load1(), results: [], checks: [] });
  }
  const out = join(tmpdir(), `shardcar-bench-${process.pid}-${spec.name}.json`);
  rmSync(out, { force: true });
  const load1Before = load1();
  const t0 = performance.now();
  const timeoutMs = spec.timeoutS[quick ? 0 : 1] * 1000;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(BENCH_DIR, "run-one.ts"), file, out, ...(quick ? ["--quick"] : [])], { stdio: ["ignore", "inherit", "inherit"], cwd: ROOT });
    let timedOut = false;
    // SIGTERM first: the bench's own process handler stops its children.
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), 5000).unref();
    }, timeoutMs);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      const seconds = Math.round((performance.now() - t0) / 100) / 10;
      let parsed: { ok: boolean; results?: BenchResult[]; error?: string } = { ok: false, error: `exited with ${signal ?? code} and wrote no results` };
      try {
        parsed = JSON.parse(readFileSync(out, "utf8")) as typeof parsed;
      } catch {
        // keep the error above
      }
      rmSync(out, { force: true });
      const results = parsed.results ?? [];
      const error = timedOut ? `timed out after ${timeoutMs / 1000} s` : parsed.error;
      resolve({
        ...base,
        status: parsed.ok && !timedOut ? "ok" : "failed",
        ...(error === undefined ? {} : { error }),
        seconds,
        load1Before,
        load1After: load1(),
        results,
        checks: results.flatMap((r) => (quick ? quickChecksOf(r) : checksOf(r, 0))),
      });
    });
  });
}

function printRun(r: BenchRun): void {
  const head = `── ${r.name} (${r.covers.join(", ") || "—"}): ${r.status}, ${r.seconds} s, load ${r.load1Before} → ${r.load1After}`;
  console.log(head);
  if (r.error !== undefined) console.log(`   ${r.status === "missing" ? "missing" : "error"}: ${r.error.split("\n").slice(0, 8).join("\n   ")}`);
  for (const res of r.results) {
    const checks = r.checks.filter((c) => c.name === res.name && c.id === res.id);
    const verdict =
      checks.length === 0
        ? ""
        : checks
            .map((c) => {
              const got = `${fmtNum(c.measured)}${c.kind === "ratio" ? "×" : ` ${c.unit}`}`;
              if (c.known !== undefined) return `${c.pass ? "KNOWN MISS" : "MISS"} (${describeTarget(c)}: ${got}; ratchet ${fmtNum(c.known.ratchet)}: ${c.known.reason})`;
              return `${c.pass ? "ok" : "MISS"} (${describeTarget(c)}, bound ${fmtNum(c.bound)}: ${got})`;
            })
            .join("; ");
    console.log(`   ${res.id.padEnd(6)} ${res.name}: ${fmtNum(res.candidate.value)} ${res.candidate.unit} vs ${fmtNum(res.baseline.value)} ${res.baseline.unit} → ${fmtNum(res.ratio)}×  ${verdict}`);
  }
}

function readResults(path: string): ResultsFile | undefined {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as ResultsFile;
  } catch {
    return undefined;
  }
}

async function main(argv: readonly string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(USAGE);
    return 0;
  }
  const all = specs();
  if (argv.includes("--list")) {
    for (const s of all) console.log(`${s.name.padEnd(20)} ${s.kind.padEnd(5)} ${(s.covers.join(",") || "-").padEnd(6)} ${s.summary}${existsSync(join(BENCH_DIR, s.file)) ? "" : "  [missing]"}`);
    return 0;
  }
  if (argv.includes("--report")) {
    const latest = readResults(join(RESULTS_DIR, "latest.json"));
    if (latest === undefined) {
      console.error("bench/results/latest.json is missing; run `npm run bench` first");
      return 1;
    }
    writeReport(latest, ROOT);
    console.log("regenerated docs/performance.md and docs/perf/*.svg");
    return 0;
  }
  const quick = argv.includes("--quick");
  const names = argv.filter((a) => !a.startsWith("-"));
  const unknown = names.filter((n) => !all.some((s) => s.name === n));
  if (unknown.length > 0) {
    console.error(`unknown bench ${unknown.join(", ")}\n\n${USAGE}`);
    return 2;
  }
  const chosen = names.length === 0 ? all : all.filter((s) => names.includes(s.name));
  const m = machine();
  console.log(`shardcar bench (${quick ? `quick, tolerance ${QUICK_TOLERANCE * 100}%` : "full"}): ${m.cpu}, ${m.cores} cores, ${m.memoryGB} GB, node ${m.node}, ${m.commit}`);
  const t0 = performance.now();
  const runs: BenchRun[] = [];
  for (const s of chosen) {
    const r = await runOne(s, quick, m);
    printRun(r);
    runs.push(r);
  }
  const seconds = Math.round((performance.now() - t0) / 1000);
  mkdirSync(RESULTS_DIR, { recursive: true });
  const generated = new Date().toISOString();
  if (quick) {
    const file: ResultsFile = { generated, quick, tolerance: QUICK_TOLERANCE, runs };
    writeFileSync(join(RESULTS_DIR, "quick.json"), JSON.stringify(file, null, 2) + "\n");
  } else {
    // Full runs merge by bench, so one bench can be re-run alone.
    const prev = readResults(join(RESULTS_DIR, "latest.json"));
    const merged = [...(prev?.runs ?? []).filter((r) => !runs.some((n) => n.name === r.name)), ...runs];
    const order = all.map((s) => s.name);
    merged.sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));
    const file: ResultsFile = { generated, quick, tolerance: 0, runs: merged };
    writeFileSync(join(RESULTS_DIR, "latest.json"), JSON.stringify(file, null, 2) + "\n");
    writeReport(file, ROOT);
    console.log("wrote bench/results/latest.json, docs/performance.md and docs/perf/*.svg");
  }
  const failed = runs.filter((r) => r.status === "failed");
  const missing = runs.filter((r) => r.status === "missing");
  const misses = runs.flatMap((r) => r.checks.filter((c) => !c.pass));
  const known = runs.flatMap((r) => r.checks.filter((c) => c.pass && c.known !== undefined));
  console.log(`\n${runs.length} benches in ${seconds} s: ${failed.length} failed, ${missing.length} missing, ${misses.length} target${misses.length === 1 ? "" : "s"} missed${quick ? ` beyond ${QUICK_TOLERANCE * 100}%` : ""}`);
  for (const r of missing) console.log(`  missing: ${r.file}`);
  for (const r of failed) console.log(`  failed: ${r.name}`);
  for (const c of misses) console.log(`  missed: ${c.id} ${c.name}: ${fmtNum(c.measured)} (${describeTarget(c)}${c.known !== undefined ? `; known miss, worse than its ratchet ${fmtNum(c.known.ratchet)}` : quick ? `, bound ${fmtNum(c.bound)}` : ""})`);
  for (const c of known) console.log(`  known miss (not failing): ${c.id} ${c.name}: ${fmtNum(c.measured)} (${describeTarget(c)}; ratchet ${fmtNum(c.known?.ratchet ?? 0)}: ${c.known?.reason ?? ""})`);
  return exitCodeOf(runs, quick);
}

process.exitCode = await main(process.argv.slice(2));
