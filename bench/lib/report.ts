/**
 * docs/performance.md and docs/perf/*.svg, regenerated from the results
 * file after every full run. Everything in the report comes from the
 * results, except the analysis paragraphs (causes of misses, plans, the
 * profiling log), which live in bench/notes/*.md (read by ./notes.ts) next
 * to the code that measures.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BenchResult } from "./bench.ts";
import type { BenchRun, ResultsFile } from "./results.ts";
import { describeTarget, fmtNum, type Check } from "./checks.ts";
import { fitLine } from "./fit.ts";
import { NOTES } from "./notes.ts";
import { barChart, lineChart, PALETTE } from "./svg.ts";

/** The targets as design.md states them, in order. */
const TARGETS: ReadonlyArray<{ id: string; what: string; target: string }> = [
  { id: "P1", what: "pass-through GET latency added by the proxy at 1,000 req/s", target: "p50 ≤ 0.3 ms, p99 ≤ 2 ms; throughput ratio vs direct reported" },
  { id: "P2", what: "sharded LIST, server filtered (fast path)", target: "≥ 0.8× a raw byte pipe" },
  { id: "P3", what: "sharded LIST, server ignored (filter path), 200 MB JSON", target: "≥ 4× JSON.parse+filter+stringify; peak RSS growth ≤ 64 MiB" },
  { id: "P4", what: "WATCH filtering, about 2 KB events", target: "≥ 4× a line splitter + JSON.parse (ndjson)" },
  { id: "P5", what: "N = 1, 2, 4, 8 replicas, gate on and gate off", target: "bytes to each controller ≤ 1.1·total/N; gate on: upstream bytes per proxy ≤ 1.1·total/N" },
  { id: "P5m", what: "pod memory at the peak, N = 1, 2, 4, 8, client-node and client-go controllers", target: "(controller RSS + proxy RSS) ÷ unsharded controller RSS < 1.0 at N = 2; ≤ 0.70 at N = 8 (client-node); client-go break-even ≤ 100 MiB" },
  { id: "P6", what: "idle sidecar", target: "RSS ≤ 64 MiB (static and ring mode); start to ready ≤ 500 ms" },
  { id: "P6b", what: "sidecar under load", target: "RSS growth over idle ≤ 32 MiB while streaming a 100 MB list and 5 minutes of churn, fast and slow (2 MB/s) client" },
  { id: "P7", what: "ring scale-out by one", target: "full relists = 1; convergence ≤ lease duration + one list" },
  { id: "P8", what: "N = 1, 2, 4, 8 replicas in labels mode with the gate off, next to shardselector mode with the gate on", target: "gate off: upstream bytes per proxy ≤ 1.1·total/N" },
  { id: "S1", what: "the ring at scale: 64 members over 200,000 objects, start, scale 64 → 65, a leave, a crash", target: "start: exact coverage within lease duration + one full list, one LIST per member, pods listed ≤ 1.25× the pods, no member given more than 2× its share; other steps: exact within lease duration + one share-list (a crash: + a retry period), LISTs ≤ one per gaining member, at most spec.relistBudget keyspaces relisted per handoff (graceful steps); ShardRing ≤ 1.5 MiB" },
  { id: "S2", what: "the labeller's first backfill of 200,000 objects (real apiserver kit)", target: "default rate: ≥ 10× faster to Labelled=True than the fixed 20/s (issue 25: not hours)" },
  { id: "S3", what: "the write path: latency the stamping webhook adds to CREATE and UPDATE through the real apiserver's admission chain, 1 and 3 manager replicas; writes while the manager is slow", target: "p99 added ≤ 5 ms at 200 creates/s (issue 25); no write refused, at any rate nor while the manager is slow" },
  { id: "S4", what: "the apiserver's CPU per watch event: N watchers with a slot-label selector, with shardSelector, and unfiltered, N = 8 and 32 (real apiserver kit)", target: "reported (issue 25 asks for the figures); every watcher receives exactly its share" },
  { id: "S5", what: "a rolling update of 64 ring members over 200,000 objects (25% surge, 25% unavailable), native-sidecar stop order, shardselector mode (labels mode: not yet)", target: "no object in no live cache beyond one relist; exact coverage within lease duration + one share-list after the last new member is up; objects listed ≤ 2× the objects; no member SIGKILLed at a 30 s grace" },
];

// P3-rss belongs to P3; P5m and P6b are targets of their own.
const baseId = (id: string): string => /^P\d+[a-z]*/.exec(id)?.[0] ?? id;

function checksFor(run: BenchRun, r: BenchResult): Check[] {
  return run.checks.filter((c) => c.id === r.id && c.name === r.name);
}

/** A row's status: met only when every check on it passed; "reported" when it has none. */
export function status(checks: readonly Check[]): string {
  if (checks.length === 0) return "reported";
  return checks.every((c) => c.pass) ? "✅ met" : "❌ missed";
}

/**
 * A target's status in the summary, from the runs that cover it and the
 * checks on their results for it: not measured when no run gave a figure,
 * else {@link status}, naming every run that failed or is missing.
 */
export function summaryStatus(runs: readonly Pick<BenchRun, "name" | "status">[], measured: boolean, checks: readonly Check[]): string {
  if (!measured) return "⏳ not measured";
  const missing = runs.filter((r) => r.status !== "ok");
  return status(checks) + (missing.length > 0 ? ` (${missing.map((r) => `${r.name} ${r.status}`).join(", ")})` : "");
}

function targetText(checks: readonly Check[]): string {
  return checks.length === 0 ? "—" : checks.map((c) => describeTarget(c)).join(", ");
}

function runLine(run: BenchRun): string {
  const m = run.machine;
  return `Run \`${run.name}\` (${run.file}): ${run.date.slice(0, 16).replace("T", " ")} UTC, ${run.seconds} s, ${run.quick ? "quick" : "full"} size, load average ${run.load1Before} → ${run.load1After}; ${m.cpu}, ${m.cores} cores, ${m.memoryGB} GB, Node ${m.node}, commit ${m.commit}.`;
}

function genericTable(runs: readonly BenchRun[], id: string): string {
  const rows: string[] = ["| bench | figure | candidate | baseline | ratio | target | status | details |", "|---|---|---|---|---|---|---|---|"];
  for (const run of runs) {
    for (const r of run.results.filter((x) => baseId(x.id) === id)) {
      const c = checksFor(run, r);
      const details = Object.entries(r.extra ?? {})
        .filter(([k]) => !k.startsWith("target") && k !== "withinTarget")
        .map(([k, v]) => `${k} ${typeof v === "number" ? fmtNum(v) : v}`)
        .join(", ");
      rows.push(
        `| ${run.name} | ${r.name} | ${r.candidate.label}: **${fmtNum(r.candidate.value)} ${r.candidate.unit}** | ${r.baseline.label}: ${fmtNum(r.baseline.value)} ${r.baseline.unit} | ${fmtNum(r.ratio)}× | ${targetText(c)} | ${status(c)} | ${details} |`,
      );
    }
  }
  return rows.join("\n");
}

function extraNum(r: BenchResult, key: string): number | undefined {
  const v = r.extra?.[key];
  return typeof v === "number" ? v : undefined;
}

function extraStr(r: BenchResult, key: string): string | undefined {
  const v = r.extra?.[key];
  return v === undefined ? undefined : String(v);
}

interface Section {
  readonly md: string[];
  readonly svgs: Record<string, string>;
}

function p1Section(run: BenchRun): Section {
  const md: string[] = [];
  const svgs: Record<string, string> = {};
  const rs = run.results;
  for (const kind of ["get", "list"]) {
    const mine = rs.filter((r) => extraStr(r, "kind") === kind);
    if (mine.length === 0) continue;
    md.push(`**${kind === "get" ? "GET one pod (~1 KB, passed through)" : "LIST ten pods (~10 KB, sharded, fast path)"}**`, "");
    md.push("| rate | percentile | direct | through proxy | added | ratio | target | status |", "|---|---|---|---|---|---|---|---|");
    for (const r of mine.filter((x) => extraStr(x, "percentile") !== "max-throughput")) {
      const c = checksFor(run, r);
      const pctl = extraStr(r, "percentile") === "p999" ? "p99.9" : (extraStr(r, "percentile") ?? "");
      const achieved = extraNum(r, "achievedRpsProxy");
      md.push(
        `| ${extraNum(r, "rate") ?? ""} req/s${achieved === undefined ? "" : ` (achieved ${achieved})`} | ${pctl} | ${fmtNum(r.baseline.value)} ms | ${fmtNum(r.candidate.value)} ms | **${(extraNum(r, "addedMs") ?? 0) >= 0 ? "+" : ""}${fmtNum(extraNum(r, "addedMs") ?? 0)} ms** | ${fmtNum(r.ratio)}× | ${targetText(c)} | ${status(c)} |`,
      );
    }
    for (const r of mine.filter((x) => extraStr(x, "percentile") === "max-throughput")) {
      md.push("", `Maximum throughput (closed loop, ${extraNum(r, "connections") ?? "?"} connections): direct ${fmtNum(r.baseline.value)} req/s, through the proxy ${fmtNum(r.candidate.value)} req/s, ratio **${fmtNum(r.ratio)}×**.`);
    }
    md.push("");
    const rates = [...new Set(mine.map((r) => extraNum(r, "rate")).filter((x): x is number => x !== undefined))].sort((a, b) => a - b);
    const val = (rate: number, p: string): number | undefined => {
      const r = mine.find((x) => extraNum(x, "rate") === rate && extraStr(x, "percentile") === p);
      return r === undefined ? undefined : Math.max(0, extraNum(r, "addedMs") ?? 0);
    };
    const name = `p1-${kind}-added-latency.svg`;
    svgs[name] = barChart({
      title: `P1: latency added by the proxy, ${kind === "get" ? "GET one pod" : "LIST ten pods"}`,
      categories: rates.map((r) => `${r} req/s`),
      series: [
        { name: "p50", values: rates.map((r) => val(r, "p50")), color: PALETTE.blue },
        { name: "p99", values: rates.map((r) => val(r, "p99")), color: PALETTE.orange },
        { name: "p99.9", values: rates.map((r) => val(r, "p999")), color: PALETTE.red },
      ],
      xLabel: "offered load (open loop)",
      yLabel: "added latency, ms (proxied − direct)",
      // A saturated proxy queues for seconds; clip so the unsaturated rates stay readable.
      yMax: 30,
      ...(kind === "get" ? { hLines: [{ value: 2, label: "P1 p99 target: +2 ms at 1,000 req/s" }] } : {}),
    });
    md.push(`![P1 added latency, ${kind}](perf/${name})`, "");
  }
  return { md, svgs };
}

function p5Section(run: BenchRun): Section {
  const md: string[] = [];
  const rs = run.results;
  const metric = (m: string, gate: string, n: number): BenchResult | undefined => rs.find((r) => extraStr(r, "metric") === m && extraStr(r, "gate") === gate && extraNum(r, "n") === n);
  const ns = [...new Set(rs.map((r) => extraNum(r, "n")).filter((x): x is number => x !== undefined))].sort((a, b) => a - b);
  const first = rs[0];
  if (first !== undefined) {
    md.push(`${extraNum(first, "pods") ?? "?"} pods of 2–6 KB (${fmtNum(extraNum(first, "totalMB") ?? 0)} MB for one controller that lists and watches everything, incl. churn: \`total\`), ${extraNum(first, "churn") ?? "?"} churn patches per configuration.`, "");
  }
  md.push(
    "| N | gate | bytes to each controller (max) | total/N | total ÷ max (target ≥ N/1.1) | upstream per proxy (max) | objects per cache | exact shard | controller heap (no proxy) | proxy RSS (peak) | controller + proxy RSS (no proxy) |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  );
  for (const n of ns) {
    for (const gate of ["on", "off"]) {
      const b = metric("bytes-to-controller", gate, n);
      const u = metric("upstream-bytes", gate, n);
      const h = metric("controller-heap", gate, n);
      const m = metric("replica-rss", gate, n);
      if (b === undefined || u === undefined || h === undefined || m === undefined) continue;
      const cb = checksFor(run, b);
      const cu = checksFor(run, u);
      md.push(
        `| ${n} | ${gate} | ${fmtNum(b.candidate.value)} MB | ${fmtNum(extraNum(b, "evenShareMB") ?? 0)} MB | **${fmtNum(b.ratio)}×** (≥ ${fmtNum(n / 1.1)}) ${status(cb)} | ${fmtNum(u.candidate.value)} MB, ${fmtNum(u.ratio)}×${cu.length === 0 ? " (price of fallback)" : ` ${status(cu)}`} | ${extraNum(b, "objectsMin") ?? "?"}–${extraNum(b, "objectsMax") ?? "?"} (${extraNum(b, "objectsNoProxy") ?? "?"}) | ${extraStr(b, "exact") ?? "?"} | ${fmtNum(h.candidate.value)} MiB (${fmtNum(h.baseline.value)} MiB) | ${fmtNum(extraNum(m, "proxyRssMaxMiB") ?? 0)} MiB (${fmtNum(extraNum(m, "proxyPeakRssMaxMiB") ?? 0)} MiB) | ${fmtNum(m.candidate.value)} MiB (${fmtNum(m.baseline.value)} MiB) |`,
      );
    }
  }
  md.push("");
  const cats = ns.map((n) => `N = ${n}`);
  const series = (m: string, gate: string): Array<number | undefined> => ns.map((n) => metric(m, gate, n)?.candidate.value);
  const baseline = (m: string): Array<number | undefined> => ns.map((n) => metric(m, "on", n)?.baseline.value);
  const svgs: Record<string, string> = {};
  const fit = fitInverse(ns, series("controller-heap", "on"));
  if (fit !== undefined) {
    md.push(`Controller heap, gate on, fits **${fmtNum(fit.a)} MiB + ${fmtNum(fit.b)} MiB / N** (least squares over N = ${ns.join(", ")}): a fixed floor (runtime, client-node, the informer) plus a part that falls as 1/N — the cache itself.`, "");
  }
  svgs["p5-heap.svg"] = lineChart({
    title: "P5: controller heap against N (memory ∝ 1/N)",
    categories: cats,
    series: [
      { name: "no proxy (every replica caches all)", values: baseline("controller-heap"), color: PALETTE.grey },
      // Gate on and off hold the same objects: the wider line underneath stays visible.
      { name: "shardcar, gate on", values: series("controller-heap", "on"), color: PALETTE.blue, width: 7 },
      { name: "shardcar, gate off", values: series("controller-heap", "off"), color: PALETTE.orange },
      ...(fit === undefined ? [] : [{ name: `fit ${fmtNum(fit.a)} + ${fmtNum(fit.b)}/N MiB`, values: ns.map((n) => fit.a + fit.b / n), color: PALETTE.green, reference: true }]),
    ],
    xLabel: "replicas (N)",
    yLabel: "heap used after GC, MiB (largest replica)",
  });
  svgs["p5-bytes.svg"] = lineChart({
    title: "P5: bytes reaching each controller against N",
    categories: cats,
    series: [
      { name: "no proxy (total)", values: baseline("bytes-to-controller"), color: PALETTE.grey },
      { name: "shardcar, gate on", values: series("bytes-to-controller", "on"), color: PALETTE.blue },
      { name: "shardcar, gate off", values: series("bytes-to-controller", "off"), color: PALETTE.orange },
      { name: "target 1.1·total/N", values: ns.map((n, i) => (1.1 * (baseline("bytes-to-controller")[i] ?? Number.NaN)) / n), color: PALETTE.red, reference: true },
    ],
    xLabel: "replicas (N)",
    yLabel: "MB to the controller (largest replica)",
  });
  svgs["p5-upstream.svg"] = lineChart({
    title: "P5: bytes each proxy reads from the apiserver against N",
    categories: cats,
    series: [
      { name: "no proxy (total)", values: baseline("upstream-bytes"), color: PALETTE.grey },
      { name: "gate on (server filters)", values: series("upstream-bytes", "on"), color: PALETTE.blue },
      { name: "gate off (proxy filters: price of fallback)", values: series("upstream-bytes", "off"), color: PALETTE.orange },
      { name: "target 1.1·total/N", values: ns.map((n, i) => (1.1 * (baseline("upstream-bytes")[i] ?? Number.NaN)) / n), color: PALETTE.red, reference: true },
    ],
    xLabel: "replicas (N)",
    yLabel: "MB from upstream (largest proxy)",
  });
  md.push("![P5 controller heap against N](perf/p5-heap.svg)", "", "![P5 bytes to each controller against N](perf/p5-bytes.svg)", "", "![P5 upstream bytes per proxy against N](perf/p5-upstream.svg)", "");
  return { md, svgs };
}

/**
 * P5m: one row per controller, gate and N — what the pod costs at the peak
 * and at rest next to the unsharded controller — and the client-go
 * break-even curve, from the results of every run that covers P5m.
 */
function p5mSection(runs: readonly BenchRun[]): Section {
  const md: string[] = [];
  const svgs: Record<string, string> = {};
  const all = runs.flatMap((run) => run.results.filter((r) => r.id === "P5m").map((r) => ({ run, r })));
  const peaks = all.filter(({ r }) => extraStr(r, "metric") === "pod-peak");
  if (peaks.length > 0) {
    md.push(
      "| controller | gate | N | controller peak | proxy peak | pod peak | unsharded peak | pod ÷ unsharded (target) | status | pod at rest ÷ unsharded at rest | exact shard |",
      "|---|---|---|---|---|---|---|---|---|---|---|",
    );
    for (const { run, r } of peaks) {
      const rest = all.find(({ r: x }) => extraStr(x, "metric") === "pod-rest" && extraStr(x, "controller") === extraStr(r, "controller") && extraStr(x, "gate") === extraStr(r, "gate") && extraNum(x, "n") === extraNum(r, "n"))?.r;
      const c = checksFor(run, r);
      const bound = r.target === undefined ? "" : ` (< ${fmtNum(1 / r.target)})`;
      const floor = extraNum(r, "controllerFloorPeakMiB");
      md.push(
        `| ${extraStr(r, "controller") ?? "?"}${floor === undefined ? "" : ` (floor ${fmtNum(floor)} MiB)`} | ${extraStr(r, "gate") ?? "?"} | ${extraNum(r, "n") ?? "?"} | ${fmtNum(extraNum(r, "controllerPeakMiB") ?? 0)} MiB | ${fmtNum(extraNum(r, "proxyPeakMiB") ?? 0)} MiB | ${fmtNum(r.candidate.value)} MiB | ${fmtNum(r.baseline.value)} MiB | **${fmtNum(extraNum(r, "podOverUnsharded") ?? 0)}**${bound} | ${status(c)} | ${rest === undefined ? "—" : `${fmtNum(extraNum(rest, "podOverUnsharded") ?? 0)} (${fmtNum(rest.candidate.value)} / ${fmtNum(rest.baseline.value)} MiB)`} | ${extraStr(r, "exact") ?? "?"} |`,
      );
    }
    md.push("");
  }
  const points = all.filter(({ r }) => extraStr(r, "metric") === "break-even-point").map(({ r }) => r);
  const be = all.find(({ r }) => extraStr(r, "metric") === "break-even");
  if (points.length > 0) {
    md.push("**Break-even curve (client-go, gate on, N = 2).**", "", "| configmaps | data | unsharded controller peak | pod at N = 2 (controller + proxy peaks) | pod ÷ unsharded |", "|---|---|---|---|---|");
    for (const r of points) md.push(`| ${extraNum(r, "objects") ?? "?"} | ${fmtNum(extraNum(r, "dataMB") ?? 0)} MB | ${fmtNum(r.baseline.value)} MiB | ${fmtNum(r.candidate.value)} MiB | ${fmtNum(r.candidate.value / r.baseline.value)} |`);
    md.push("");
    svgs["p5m-break-even.svg"] = lineChart({
      title: "P5m: client-go pod at N = 2 against the unsharded controller",
      categories: points.map((r) => `${fmtNum(r.baseline.value)} MiB`),
      series: [
        { name: "unsharded controller (peak RSS)", values: points.map((r) => r.baseline.value), color: PALETTE.grey },
        { name: "pod at N = 2: controller + sidecar (peak RSS)", values: points.map((r) => r.candidate.value), color: PALETTE.blue },
      ],
      xLabel: "unsharded controller peak RSS (cache size grows →)",
      yLabel: "MiB",
      hLines: [{ value: 100, label: "break-even target: ≤ 100 MiB unsharded" }],
    });
    md.push("![P5m break-even curve](perf/p5m-break-even.svg)", "");
  }
  if (be !== undefined) {
    const c = checksFor(be.run, be.r);
    md.push(
      `**Break-even size:** **${fmtNum(be.r.candidate.value)} MiB** of unsharded peak RSS (target ≤ 100 MiB, ${status(c)}): the line through the curve, pod = ${fmtNum(extraNum(be.r, "fixedMiB") ?? 0)} MiB + ${fmtNum(extraNum(be.r, "slope") ?? 0)} × unsharded, crosses pod = unsharded there (${(extraStr(be.r, "withinMeasured") ?? "").startsWith("yes") ? "inside" : "beyond"} the measured range).`,
      "",
    );
  }
  return { md, svgs };
}

/**
 * S3: per manager replica count, the added latency at each rate (CREATE and
 * UPDATE, p50 and p99, with the webhook and without it in the same run),
 * refused writes and CPU per write; then the slow-manager probe; and a chart
 * of the added p99 against the rate.
 */
function s3Section(run: BenchRun): Section {
  const md: string[] = [];
  const svgs: Record<string, string> = {};
  const rs = run.results.filter((r) => r.id === "S3");
  const of = (metric: string): BenchResult[] => rs.filter((r) => extraStr(r, "metric") === metric);
  const nums = (key: string): number[] => [...new Set(of("latency").map((r) => extraNum(r, key)).filter((x): x is number => x !== undefined))].sort((a, b) => a - b);
  const rates = nums("rate");
  const replicas = nums("replicas");
  const lat = (op: string, rate: number, n: number, q: string): BenchResult | undefined =>
    of("latency").find((r) => extraStr(r, "op") === op && extraNum(r, "rate") === rate && extraNum(r, "replicas") === n && extraStr(r, "percentile") === q);
  const signed = (v: number): string => `${v >= 0 ? "+" : ""}${fmtNum(v)}`;
  if (rates.length > 0) {
    md.push(
      "| replicas | rate (achieved) | op | p50 without → with | **added p50** | p99 without → with | **added p99** | target | status | refused (with / without) | CPU per write: manager, apiserver with (without) |",
      "|---|---|---|---|---|---|---|---|---|---|---|",
    );
    for (const n of replicas) {
      for (const rate of rates) {
        const refused = of("refused").find((r) => extraNum(r, "rate") === rate && extraNum(r, "replicas") === n);
        for (const op of ["create", "update"]) {
          const p50 = lat(op, rate, n, "p50");
          const p99 = lat(op, rate, n, "p99");
          if (p50 === undefined || p99 === undefined) continue;
          const c = [...checksFor(run, p99), ...(op === "create" && refused !== undefined ? checksFor(run, refused) : [])];
          const refusedCell = refused === undefined || op !== "create" ? "" : `${fmtNum(refused.candidate.value)} / ${fmtNum(refused.baseline.value)}`;
          const cpuCell =
            refused === undefined || op !== "create" ? "" : `${fmtNum(extraNum(refused, "managerCpuMsPerWrite") ?? 0)} ms, ${fmtNum(extraNum(refused, "apiserverCpuMsPerWrite") ?? 0)} (${fmtNum(extraNum(refused, "apiserverCpuMsPerWriteBaseline") ?? 0)}) ms`;
          md.push(
            `| ${n} | ${rate}/s (${extraNum(p50, "achievedRps") ?? "?"}) | ${op.toUpperCase()} | ${fmtNum(p50.baseline.value)} → ${fmtNum(p50.candidate.value)} ms | **${signed(extraNum(p50, "addedMs") ?? 0)} ms** | ${fmtNum(p99.baseline.value)} → ${fmtNum(p99.candidate.value)} ms | **${signed(extraNum(p99, "addedMs") ?? 0)} ms** | ${targetText(c)} | ${status(c)} | ${refusedCell} | ${cpuCell} |`,
          );
        }
      }
    }
    md.push("");
    const series = replicas.flatMap((n, i) =>
      (["create", "update"] as const).map((op, j) => ({
        name: `${op.toUpperCase()}, ${n} replica${n === 1 ? "" : "s"}`,
        values: rates.map((rate) => {
          const r = lat(op, rate, n, "p99");
          return r === undefined ? undefined : Math.max(0, extraNum(r, "addedMs") ?? 0);
        }),
        color: [PALETTE.blue, PALETTE.orange, PALETTE.green, PALETTE.purple][(i * 2 + j) % 4] ?? PALETTE.grey,
      })),
    );
    svgs["s3-added-p99.svg"] = barChart({
      title: "S3: p99 latency the stamping webhook adds to a write",
      categories: rates.map((r) => `${r} writes/s`),
      series,
      xLabel: "offered load (open loop)",
      yLabel: "added p99, ms (with webhook − without)",
      yMax: 60,
      hLines: [{ value: 5, label: "target: +5 ms at 200/s" }],
    });
    md.push("![S3 added p99 latency](perf/s3-added-p99.svg)", "");
  }
  const slow = of("slow-manager");
  if (slow.length > 0) {
    md.push("**The slow manager** (every byte from the managers held 5 s; the webhook's `timeoutSeconds: 3`, `failurePolicy: Ignore`):", "");
    md.push("| op | writes | latency min / median / max | refused | admitted unlabelled | labelled by the labeller after | status |", "|---|---|---|---|---|---|---|");
    for (const r of slow) {
      const op = extraStr(r, "op") ?? "";
      const refused = of("slow-manager-refused").find((x) => extraStr(x, "op") === op);
      const c = refused === undefined ? [] : checksFor(run, refused);
      md.push(
        `| ${op.toUpperCase()} | ${extraNum(r, "writes") ?? "?"} | ${fmtNum(extraNum(r, "minMs") ?? 0)} / ${fmtNum(extraNum(r, "medianMs") ?? 0)} / ${fmtNum(r.candidate.value)} ms | ${refused === undefined ? "?" : fmtNum(refused.candidate.value)} | ${extraNum(r, "admittedUnlabelled") ?? "?"} | ${fmtNum(extraNum(r, "labelledAfterMs") ?? 0)} ms | ${status(c)} |`,
      );
    }
    md.push("");
  }
  const cpu = of("cpu").filter((r) => r.target !== undefined);
  for (const r of cpu) md.push(`Quick-run judge, ${r.name}: ${fmtNum(r.candidate.value)} ms against the apiserver's ${fmtNum(r.baseline.value)} ms, **${fmtNum(r.ratio)}×** (${targetText(checksFor(run, r))}, ${status(checksFor(run, r))}).`, "");
  return { md, svgs };
}

/** Least squares for y = a + b/N; undefined with fewer than two points. */
export function fitInverse(ns: readonly number[], ys: ReadonlyArray<number | undefined>): { a: number; b: number } | undefined {
  return fitLine(ns.map((n, i) => [1 / n, ys[i]] as const).filter((p): p is readonly [number, number] => p[1] !== undefined && Number.isFinite(p[1])));
}

/** A short label for a result: the part after the last ": ", else before " vs " or " (". */
function shortName(name: string): string {
  const colon = name.lastIndexOf(": ");
  if (colon >= 0) return name.slice(colon + 2);
  return name.split(" vs ")[0]?.split(" (")[0] ?? name;
}

function ratioChart(runs: readonly BenchRun[], id: string, file: string): Record<string, string> {
  const rs = runs.flatMap((run) => run.results.filter((r) => baseId(r.id) === id && r.target !== undefined));
  if (rs.length === 0) return {};
  return {
    [file]: barChart({
      title: `${id}: measured ratio against its target`,
      categories: rs.map((r) => shortName(r.name)),
      series: [
        { name: "measured ratio (candidate vs baseline, same run)", values: rs.map((r) => r.ratio), color: PALETTE.blue },
        { name: "target", values: rs.map((r) => r.target), color: PALETTE.red },
      ],
      xLabel: "figure",
      yLabel: "ratio (higher is better)",
      width: Math.max(640, 200 * rs.length),
    }),
  };
}

function summaryRows(file: ResultsFile): string[] {
  const rows = ["| # | what | target (design.md) | measured | status | bench |", "|---|---|---|---|---|---|"];
  for (const t of TARGETS) {
    const runs = file.runs.filter((r) => r.covers.includes(t.id));
    const results = runs.flatMap((run) => run.results.filter((r) => baseId(r.id) === t.id).map((r) => ({ run, r })));
    const checks = results.flatMap(({ run, r }) => checksFor(run, r));
    let measured: string;
    if (results.length === 0) {
      const why = runs.map((r) => (r.status === "missing" ? `${r.file} not in the repository yet` : r.status === "failed" ? `${r.name} failed: ${(r.error ?? "").split("\n")[0] ?? ""}` : `${r.name}: ${r.error ?? "no figure"}`)).join("; ");
      measured = NOTES.pending[t.id] ?? (why || "not run");
    } else {
      measured =
        t.id === "P5"
          ? p5Summary(results.map(({ r }) => r))
          : t.id === "P5m"
            ? p5mSummary(results.map(({ run, r }) => ({ r, checks: checksFor(run, r) })))
            : t.id === "P8"
              ? p8Summary(results.map(({ r }) => r))
              : checks.length === 0
                ? results.map(({ r }) => `${fmtNum(r.ratio)}×`).join(", ")
                : checks.map((c) => `${t.id === "S3" ? c.name : shortName(c.name)}: **${c.kind === "added" ? "+" : ""}${fmtNum(c.measured)}${c.kind === "ratio" ? "×" : ` ${c.unit}`}** (${describeTarget(c)})`).join("<br>");
    }
    rows.push(`| ${t.id} | ${t.what} | ${t.target} | ${measured} | ${summaryStatus(runs, results.length > 0, checks)} | ${runs.map((r) => `\`${r.name}\``).join(", ") || "—"} |`);
  }
  return rows;
}

/** One line per P5 metric with a target: the ratio at each N next to N/1.1. */
function p5Summary(rs: readonly BenchResult[]): string {
  const lines: string[] = [];
  for (const [metric, gate, label] of [
    ["bytes-to-controller", "on", "bytes to each controller, gate on"],
    ["bytes-to-controller", "off", "bytes to each controller, gate off"],
    ["upstream-bytes", "on", "upstream bytes per proxy, gate on"],
  ] as const) {
    const mine = rs.filter((r) => extraStr(r, "metric") === metric && extraStr(r, "gate") === gate).sort((a, b) => (extraNum(a, "n") ?? 0) - (extraNum(b, "n") ?? 0));
    if (mine.length === 0) continue;
    lines.push(`${label}: total ÷ max = ${mine.map((r) => `**${fmtNum(r.ratio)}×** (N=${extraNum(r, "n") ?? "?"}, ≥ ${fmtNum((extraNum(r, "n") ?? 0) / 1.1)})`).join(", ")}`);
  }
  const off = rs.filter((r) => extraStr(r, "metric") === "upstream-bytes" && extraStr(r, "gate") === "off");
  if (off.length > 0) lines.push(`gate off, upstream per proxy (price of fallback): ${off.map((r) => `${fmtNum(r.ratio)}×`).join(", ")} of total`);
  return lines.join("<br>");
}

/** One line per filter mode: total ÷ the most one proxy read, at each N next to N/1.1. */
function p8Summary(rs: readonly BenchResult[]): string {
  const lines: string[] = [];
  for (const [filter, label] of [
    ["labels", "labels mode, gate off"],
    ["shardselector", "shardselector mode, gate on"],
  ] as const) {
    const mine = rs.filter((r) => extraStr(r, "filter") === filter).sort((a, b) => (extraNum(a, "n") ?? 0) - (extraNum(b, "n") ?? 0));
    if (mine.length > 0) lines.push(`upstream bytes per proxy, ${label}: total ÷ max = ${mine.map((r) => `**${fmtNum(r.ratio)}×** (N=${extraNum(r, "n") ?? "?"}, ≥ ${fmtNum((extraNum(r, "n") ?? 0) / 1.1)})`).join(", ")}`);
  }
  return lines.join("<br>");
}

/** P5m in one line per controller: pod ÷ unsharded where a target applies, and the break-even size. */
function p5mSummary(rs: ReadonlyArray<{ readonly r: BenchResult; readonly checks: readonly Check[] }>): string {
  const lines: string[] = [];
  for (const kind of ["client-node", "client-go"]) {
    const mine = rs.filter(({ r }) => extraStr(r, "metric") === "pod-peak" && extraStr(r, "controller") === kind && r.target !== undefined);
    if (mine.length === 0) continue;
    const cells = mine.map(({ r, checks }) => `**${fmtNum(extraNum(r, "podOverUnsharded") ?? 0)}** (N=${extraNum(r, "n") ?? "?"}, gate ${extraStr(r, "gate") ?? "?"}, ${r.target !== undefined && r.target > 1 ? `≤ ${fmtNum(1 / r.target)}` : "< 1.0"}) ${checks.every((c) => c.pass) ? "✅" : "❌"}`);
    lines.push(`${kind}, pod ÷ unsharded at the peak: ${cells.join(", ")}`);
  }
  for (const { r, checks } of rs.filter(({ r }) => extraStr(r, "metric") === "break-even")) {
    lines.push(`client-go break-even: **${fmtNum(r.candidate.value)} MiB** unsharded (≤ ${fmtNum(extraNum(r, "targetMaxMiB") ?? 0)} MiB) ${checks.every((c) => c.pass) ? "✅" : "❌"}`);
  }
  return lines.join("<br>");
}

/** Writes docs/performance.md and docs/perf/*.svg under `root`. */
export function writeReport(file: ResultsFile, root: string): void {
  const md: string[] = [];
  const svgs: Record<string, string> = {};
  const machines = [...new Set(file.runs.map((r) => `${r.machine.cpu}, ${r.machine.cores} cores, ${r.machine.memoryGB} GB RAM, Node ${r.machine.node}, ${r.machine.os}`))];
  md.push(
    "# Performance",
    "",
    "<!-- Generated by `npm run bench` (bench/run.ts → bench/lib/report.ts) from bench/results/latest.json. Do not edit by hand: analysis text lives in bench/notes/*.md. -->",
    "",
    "What shardcar costs (P1, P6), what its scanners achieve (P2–P4), and what it saves (P5, and P8 where the gate is off), each measured as a candidate next to its baseline in the same run: a direct connection (the limit), a naive buffering proxy (`JSON.parse` + filter), and client-side sharding where every replica receives every byte. Targets are from design.md, “Performance targets”.",
    "",
    `Machine: ${machines.join("; ") || "unknown"}. Latest results: ${file.generated.slice(0, 10)}. Each section names its own run's date and load average: the machine is shared, and ratios measured side by side survive contention better than absolute figures do.`,
    "",
    "Reproduce: `npm run bench` (full, regenerates this file), `npm run bench -- p5-scale` (one bench), `npm run bench -- --quick` (the CI regression run: small inputs, under two minutes, fails when a figure misses its target by more than 25%).",
    "",
    "## Summary",
    "",
    ...summaryRows(file),
    "",
    NOTES.summary,
    "",
  );
  for (const t of TARGETS) {
    const runs = file.runs.filter((r) => r.covers.includes(t.id));
    md.push(`## ${t.id}: ${t.what}`, "", `Target: ${t.target}.`, "");
    for (const run of runs) {
      md.push(runLine(run), "");
      if (run.status !== "ok") md.push(`> ${run.status === "missing" ? "Not measured" : "Failed"}: ${(run.error ?? "").split("\n")[0] ?? ""}`, "");
    }
    if (runs.every((r) => !r.results.some((x) => baseId(x.id) === t.id))) {
      md.push(NOTES.pending[t.id] ?? "Not measured yet.", "");
    } else if (t.id === "P1") {
      for (const run of runs) {
        const s = p1Section(run);
        md.push(...s.md);
        Object.assign(svgs, s.svgs);
      }
    } else if (t.id === "P5") {
      for (const run of runs) {
        const s = p5Section(run);
        md.push(...s.md);
        Object.assign(svgs, s.svgs);
      }
    } else if (t.id === "S3") {
      for (const run of runs) {
        const s = s3Section(run);
        md.push(...s.md);
        Object.assign(svgs, s.svgs);
      }
    } else if (t.id === "P5m") {
      const s = p5mSection(runs);
      md.push(...s.md);
      Object.assign(svgs, s.svgs);
    } else {
      md.push(genericTable(runs, t.id), "");
      const charts = ratioChart(runs, t.id, `${t.id.toLowerCase()}-ratios.svg`);
      for (const name of Object.keys(charts)) md.push(`![${t.id}: measured ratios against the target](perf/${name})`, "");
      Object.assign(svgs, charts);
    }
    const note = NOTES.sections[t.id];
    if (note !== undefined) md.push(note, "");
  }
  md.push("## Where the memory goes", "", NOTES.memory, "");
  md.push("## Profiling the hot paths", "", NOTES.profile, "");
  const dir = join(root, "docs", "perf");
  mkdirSync(dir, { recursive: true });
  // Charts this report no longer draws would go stale next to it.
  for (const f of readdirSync(dir)) if (f.endsWith(".svg") && !(f in svgs)) rmSync(join(dir, f));
  for (const [name, svg] of Object.entries(svgs)) writeFileSync(join(dir, name), svg);
  writeFileSync(join(root, "docs", "performance.md"), md.join("\n").replace(/\n{3,}/g, "\n\n").trimEnd() + "\n");
}
