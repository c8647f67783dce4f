/**
 * P5m: what a pod costs, controller + sidecar, against the same controller
 * unsharded, at the peak and at rest. Shared by the client-node bench
 * (p5-scale) and the client-go one (p5m-client-go), which also reports the
 * break-even size ({@link breakEven}).
 *
 * Three measures of each process, side by side (issue 25):
 * - RSS: what design.md's targets are written in. It counts the node
 *   binary's and libraries' file-backed pages (~45 MiB of an idle sidecar)
 *   in full in every process, though every sidecar from the same image on a
 *   node shares them through the page cache;
 * - anonymous memory (RssAnon): heap, V8, buffers, stacks; what no other
 *   process shares, and what a cgroup's working set is made of once the
 *   file pages are charged to whoever faulted them in first (the P6 pod
 *   rows measure that under the one-pod kubelet);
 * - PSS: private pages plus a share of each shared page, divided among the
 *   processes that map it. It depends on how many processes of the same
 *   binaries run on the machine at the moment (in P5m, every proxy of the
 *   run shares one node binary), so it is reported, not judged.
 */
import type { BenchResult } from "./bench.ts";
import { ANON_TARGETS } from "./checks.ts";
import { fitLine } from "./fit.ts";
import type { MemoryFigures } from "./memory.ts";

/** Memory is reported in MiB (2^20 bytes), as every memory figure of the benches. */
const MiB = 1024 * 1024;
/** design.md: the break-even unsharded size (client-go, peak RSS) must be at most this, MiB. */
const TARGET_BREAK_EVEN_MIB = 100;
const r1 = (x: number): number => Math.round(x * 10) / 10;
const r3 = (x: number): number => Math.round(x * 1000) / 1000;

export const NO_MEMORY: MemoryFigures = { rss: 0, anon: 0, pss: 0 };

export interface PodFigures {
  /** The controller's peaks: `rss` is VmHWM (the kernel's peak); `anon` and `pss` are sampled (bench/lib/memory.ts, MemorySampler). */
  readonly controllerPeak: MemoryFigures;
  /** The proxy's peaks, the same way ({@link NO_MEMORY} without one). */
  readonly proxyPeak: MemoryFigures;
  /** The controller at rest (after a GC). */
  readonly controllerRest: MemoryFigures;
  /** The proxy as it is ({@link NO_MEMORY} without one). */
  readonly proxyRest: MemoryFigures;
}

export interface Unsharded {
  readonly peak: MemoryFigures;
  readonly rest: MemoryFigures;
}

type Measure = keyof MemoryFigures;

const MEASURES: ReadonlyArray<{ readonly key: Measure; readonly metric: string; readonly what: string }> = [
  { key: "rss", metric: "pod-peak", what: "controller + proxy RSS" },
  { key: "anon", metric: "pod-peak-anon", what: "controller + proxy anonymous memory (RssAnon)" },
  { key: "pss", metric: "pod-peak-pss", what: "controller + proxy PSS" },
];

const sum = (f: PodFigures, key: Measure, at: "peak" | "rest"): number => (at === "peak" ? f.controllerPeak[key] + f.proxyPeak[key] : f.controllerRest[key] + f.proxyRest[key]);

/**
 * The target of a pod row (unsharded ÷ pod, higher is better), or undefined
 * where none applies. RSS (design.md): < 1.0 at N = 2 for every controller,
 * ≤ 0.70 at N = 8 for client-node. Anonymous memory (issue 25): the
 * client-go pod below the unsharded controller from N = 2 on.
 */
function targetOf(kind: "client-node" | "client-go", n: number, key: Measure): number | undefined {
  if (key === "rss") return n === 2 ? 1 : n === 8 && kind === "client-node" ? 1 / 0.7 : undefined;
  if (key === "anon" && kind === "client-go" && n >= ANON_TARGETS.clientGoPodFromN) return ANON_TARGETS.clientGoPodRatio;
  return undefined;
}

/**
 * The P5m rows for one configuration: the pod at the peak in RSS,
 * anonymous memory and PSS, and at rest in RSS and anonymous memory. A
 * pod's peak is the sum of its two processes' peaks: what its memory limit
 * must cover, whether or not the peaks coincide. As ratios (higher is
 * better): unsharded ÷ pod.
 */
export function podMemory(kind: "client-node" | "client-go", n: number, gate: "on" | "off", f: readonly PodFigures[], unsharded: Unsharded, extra: Readonly<Record<string, number | string>> = {}): BenchResult[] {
  if (f.length === 0) return [];
  const common = { ...extra, n, gate, controller: kind };
  const out: BenchResult[] = [];
  for (const m of MEASURES) {
    const worst = f.reduce((a, b) => (sum(b, m.key, "peak") > sum(a, m.key, "peak") ? b : a));
    const peak = sum(worst, m.key, "peak");
    const base = unsharded.peak[m.key];
    const target = targetOf(kind, n, m.key);
    out.push({
      id: "P5m",
      name: m.key === "rss" ? `pod memory at the peak (controller + proxy RSS), ${kind}, gate ${gate}, N=${n}` : `pod memory at the peak (${m.what}), ${kind}, gate ${gate}, N=${n}`,
      candidate: { label: `${m.what} peak, largest pod`, value: r1(peak / MiB), unit: "MiB" },
      baseline: { label: `unsharded controller peak ${m.key === "rss" ? "RSS" : m.key === "anon" ? "anonymous memory" : "PSS"}`, value: r1(base / MiB), unit: "MiB" },
      ratio: base / peak,
      ...(target === undefined ? {} : { target }),
      extra: { ...common, metric: m.metric, podOverUnsharded: r3(peak / base), controllerPeakMiB: r1(worst.controllerPeak[m.key] / MiB), proxyPeakMiB: r1(worst.proxyPeak[m.key] / MiB) },
    });
  }
  for (const key of ["rss", "anon"] as const) {
    const rest = Math.max(...f.map((x) => sum(x, key, "rest")));
    const base = unsharded.rest[key];
    out.push({
      id: "P5m",
      name: key === "rss" ? `pod memory at rest (controller after GC + proxy RSS), ${kind}, gate ${gate}, N=${n}` : `pod memory at rest (controller after GC + proxy anonymous memory), ${kind}, gate ${gate}, N=${n}`,
      candidate: { label: `controller + proxy ${key === "rss" ? "RSS" : "anonymous memory"} at rest, largest pod`, value: r1(rest / MiB), unit: "MiB" },
      baseline: { label: `unsharded controller ${key === "rss" ? "RSS" : "anonymous memory"} at rest`, value: r1(base / MiB), unit: "MiB" },
      ratio: base / rest,
      extra: { ...common, metric: key === "rss" ? "pod-rest" : "pod-rest-anon", podOverUnsharded: r3(rest / base) },
    });
  }
  return out;
}

/**
 * The break-even size in one measure (RSS, with design.md's target, or
 * anonymous memory, reported): where the line through the curve's points
 * (pod at N = 2 against the unsharded controller) crosses pod = unsharded.
 *
 * At N = 2 a pod is pod ≈ F + (U − F)/2 + S (floor F, unsharded peak U,
 * sidecar peak S), which crosses pod = U at U = F + 2S. The full run's
 * curve reaches past that point and judges the line through it. The quick
 * curve is three small caches far below it: the line's slope comes out
 * near 1, so a few MiB of noise in one point moved its crossing from 150 to
 * 480 MB run to run. The quick run judges F + 2S instead, from this run's
 * own floor and sidecar; the line is printed.
 */
export function breakEven(
  key: "rss" | "anon",
  points: ReadonlyArray<{ readonly one: MemoryFigures; readonly pod: MemoryFigures }>,
  quick: boolean,
  floor: MemoryFigures | undefined,
  sidecar: MemoryFigures | undefined,
  floorExtra: Readonly<Record<string, number>>,
): BenchResult | undefined {
  const xy = points.map((p) => [p.one[key], p.pod[key]] as const);
  const fit = fitLine(xy);
  if (fit === undefined) return undefined;
  const model = floor !== undefined && sidecar !== undefined ? floor[key] + 2 * sidecar[key] : undefined;
  // pod = a + b·unsharded crosses pod = unsharded at a / (1 − b).
  const line = fit.b < 1 ? fit.a / (1 - fit.b) : Number.POSITIVE_INFINITY;
  const value = quick && model !== undefined ? model : line;
  const measuredMax = Math.max(...xy.map((p) => p[0]));
  const what = key === "rss" ? "peak RSS" : "peak anonymous memory";
  return {
    id: "P5m",
    name: key === "rss" ? "break-even size: the smallest unsharded client-go controller (peak RSS) whose pod at N=2 costs less" : "break-even size (anonymous memory): the smallest unsharded client-go controller (peak anonymous memory) whose pod at N=2 costs less",
    candidate: { label: value === line ? `break-even unsharded ${what} (line through the curve)` : `break-even unsharded ${what} (controller floor + 2 × sidecar peak)`, value: r1(value / MiB), unit: "MiB" },
    baseline: { label: "largest unsharded peak measured", value: r1(measuredMax / MiB), unit: "MiB" },
    ratio: measuredMax / value,
    extra: {
      ...(key === "rss" ? { targetMaxMiB: TARGET_BREAK_EVEN_MIB } : {}),
      metric: key === "rss" ? "break-even" : "break-even-anon",
      lineMiB: r1(line / MiB),
      ...(model === undefined ? {} : { floorPlusTwoSidecarsMiB: r1(model / MiB), sidecarPeakMiB: r1((sidecar?.[key] ?? 0) / MiB) }),
      fixedMiB: r1(fit.a / MiB),
      slope: Math.round(fit.b * 1000) / 1000,
      points: points.length,
      withinMeasured: line <= measuredMax ? "yes" : "no",
      ...floorExtra,
    },
  };
}
