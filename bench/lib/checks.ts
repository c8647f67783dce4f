/**
 * Turning bench results into pass/miss verdicts. Pure.
 *
 * A result carries its target in one of three forms:
 * - `target`: a ratio (higher is better) — met when `ratio ≥ target`;
 * - `extra.targetMax` (or `extra.targetMaxMiB` when the unit is MiB): an upper
 *   bound on the candidate value, in its unit — met when `value ≤ max`
 *   (P6's 64 MiB and 500 ms, P6b's 32 MiB of growth, P3's 64 MiB of RSS growth);
 *   memory is in MiB (2^20 bytes) throughout the benches
 * - `extra.targetMaxAddedMs`: an upper bound on `extra.addedMs`, the latency
 *   the proxy adds over the direct path (P1).
 *
 * `tolerance` loosens each bound by that fraction: a ratio may fall to
 * `target·(1 − t)`, a maximum may grow to `max·(1 + t)`.
 *
 * The quick run ({@link quickChecksOf}) reads one more: `extra.quickMinRatio`,
 * a lower bound on `ratio` that it applies as it stands (the figure chose
 * its own room for noise) and that the full run leaves out, for a figure
 * with no target of its own (S4).
 */
import type { BenchResult } from "./bench.ts";

/**
 * The quick (CI) mode's tolerance: 25%. Quick inputs are a tenth of the full
 * ones (so fixed costs weigh more), runs are short, and CI machines are
 * noisy; a real regression (a lost fast path, filtering turned off, a
 * per-item allocation) moves these ratios by far more than that. Full runs
 * use no tolerance: the report says met or missed against the target itself.
 */
export const QUICK_TOLERANCE = 0.25;

/**
 * Added latency (P1) in quick mode gets 100%: a quick P1 sends ~1,000
 * requests, and on a shared 2-core CI machine the same build measured an
 * added p50 from +0.22 to +0.45 ms within one hour (docs/performance.md,
 * P1). A real regression on the pass-through path (a buffered body, a
 * per-request TLS handshake) adds milliseconds, far beyond that; the full
 * run still judges the 0.3 ms target itself.
 */
export const QUICK_LATENCY_TOLERANCE = 1.0;

/**
 * Reported but not gated in quick mode. P2's quick input is a few MB passed
 * as in-memory chunk references, so it times per-chunk stream overhead in
 * microseconds: the same build measured 0.38× and 0.82× on consecutive CI
 * runs. The full run (200 MB) judges it; a lost fast path shows in P3's
 * filter-path figures and in the fixture tests (byte-identical output).
 */
export const QUICK_INFORMATIONAL: ReadonlySet<string> = new Set(["P2"]);

/**
 * Issue 25: the sidecar's memory as a cluster charges it. An idle sidecar's
 * RSS is ~2/3 file-backed (the node binary and its libraries, ~45 MB),
 * pages every sidecar from the same image on a node shares through the
 * page cache; its anonymous memory (RssAnon: heap, V8, buffers, stacks) is
 * what each one adds. These targets stand beside design.md's RSS targets
 * (P5m, P6, P6b), which keep their rows and verdicts; none replaces them.
 */
export const ANON_TARGETS = {
  /** P6: an idle sidecar's anonymous memory, static shards and ring mode, MiB. */
  idleMaxMiB: 24,
  /** P6b: the growth of its anonymous memory over idle while it streams a 100 MB list (and, in P6b, 5 minutes of churn), MiB. */
  growthMaxMiB: 32,
  /**
   * P5m: the client-go pod (controller + sidecar anonymous-memory peaks)
   * cheaper than the unsharded controller's anonymous-memory peak, for the
   * 87 MB cache of p5m-client-go (6,000 ConfigMaps): unsharded ÷ pod ≥ this ratio ...
   */
  clientGoPodRatio: 1,
  /** ... at every N from this one on. */
  clientGoPodFromN: 2,
} as const;

export interface Check {
  readonly id: string;
  readonly name: string;
  readonly kind: "ratio" | "max" | "added";
  /** The target as design.md states it (ratio, maximum value, or maximum added ms). */
  readonly target: number;
  /** The bound actually applied, after the tolerance. */
  readonly bound: number;
  readonly measured: number;
  readonly unit: string;
  readonly pass: boolean;
  /** Set when the target is a known miss (quick mode): then `pass` is judged against its ratchet instead. */
  readonly known?: { readonly ratchet: number; readonly reason: string };
}

/**
 * Targets missed today, each with a measured cause and a plan in
 * docs/performance.md. Quick mode judges them against a ratchet — today's
 * level with room for noise — instead of the target, so CI still catches a
 * regression without being red for a known gap. Remove an entry when its
 * fix lands: the target itself applies again.
 */
export const KNOWN_MISSES: ReadonlyArray<{ readonly id: string; readonly name: RegExp; readonly kind: Check["kind"]; readonly ratchet: number; readonly reason: string }> = [
  {
    id: "P5m",
    // The RSS row only (bench/lib/pod-memory.ts names it): the
    // anonymous-memory row of the same N has a target of its own
    // (ANON_TARGETS), which this ratchet must not switch off.
    name: /^pod memory at the peak \(controller \+ proxy RSS\), client-go, gate (on|off), N=2$/,
    kind: "ratio",
    // Below the noise of a good build: on 2026-12-01 the same build measured
    // 0.40-0.45 (the unsharded client-go controller alone 49.6-54.1 MB, as
    // Go's heap happens to stand). At 0.40 it caught the X.509 import (15 MB,
    // 0.35-0.40) and then flapped on the fixed build; at 0.36 it catches a
    // regression of ~25 MB or more. An import that should not be at start
    // fails test/cli/footprint.test.ts, every time.
    ratchet: 0.36,
    reason: "a client-go controller's cache is small next to a Node sidecar's floor (~56 MB for a bare Node process with the same listeners); quick measured 0.40-0.45 on 2026-12-01 (docs/performance.md, P5m)",
  },
  {
    id: "P5m",
    // The anonymous-memory row of the same pods: its own known miss with its
    // own ratchet (the RSS row's must not stand in for it, nor it for the
    // RSS row's). A Node sidecar's anonymous memory at idle (~20 MB, P6) is
    // as large as a small client-go controller's whole heap, so a pod of
    // two is above one unsharded controller here too.
    name: /^pod memory at the peak \(controller \+ proxy anonymous memory \(RssAnon\)\), client-go, gate (on|off), N=2$/,
    kind: "ratio",
    // CI's quick run on 2026-12-07 (clean clone, load average 1-2) measured
    // 0.41 (gate on) and 0.53 (gate off): 54 and 42 MB against an unsharded
    // controller's 22 MB. At 0.33 it catches some 13 MB more anonymous
    // memory in the pod.
    ratchet: 0.33,
    reason: "a client-go controller's anonymous memory (~22 MB in quick) is about a Node sidecar's idle anonymous memory (~20 MB, P6); quick measured 0.41 (gate on) and 0.53 (gate off) on 2026-12-07",
  },
  {
    id: "P5m",
    // The RSS break-even (its target is targetMaxMiB), not the anonymous-memory one.
    name: /^break-even size: /,
    kind: "max",
    ratchet: 300,
    reason: "break-even = the controller's floor + 2 × the sidecar's peak (full run: 200 MB, the line through the curve); quick judges that sum from its own floor and sidecar, since its three small caches extrapolate to 150-480 MB run to run (docs/performance.md, P5m)",
  },
];

const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** {@link checksOf} with {@link KNOWN_MISSES} applied (quick mode), and `extra.quickMinRatio`. */
export function quickChecksOf(r: BenchResult): Check[] {
  const out = checksOf(r, QUICK_TOLERANCE, QUICK_LATENCY_TOLERANCE).map((c) => {
    if (QUICK_INFORMATIONAL.has(c.id) && !c.pass) return { ...c, pass: true, known: { ratchet: c.bound, reason: "not gated in quick mode (see QUICK_INFORMATIONAL)" } };
    const k = KNOWN_MISSES.find((m) => m.id === c.id && m.kind === c.kind && m.name.test(c.name));
    if (k === undefined || c.pass) return c;
    const pass = c.kind === "ratio" ? c.measured >= k.ratchet : c.measured <= k.ratchet;
    return { ...c, pass, known: { ratchet: k.ratchet, reason: k.reason } };
  });
  const min = num(r.extra?.["quickMinRatio"]);
  // A ratio that is not a number (a figure missing from a median) fails too.
  if (min !== undefined) out.push({ id: r.id, name: r.name, kind: "ratio", target: min, bound: min, measured: r.ratio, unit: "×", pass: r.ratio >= min });
  return out;
}

export function checksOf(r: BenchResult, tolerance: number, latencyTolerance = tolerance): Check[] {
  const out: Check[] = [];
  if (r.target !== undefined) {
    const bound = r.target * (1 - tolerance);
    out.push({ id: r.id, name: r.name, kind: "ratio", target: r.target, bound, measured: r.ratio, unit: "×", pass: r.ratio >= bound });
  }
  const max = num(r.extra?.["targetMax"]) ?? (r.candidate.unit === "MiB" ? num(r.extra?.["targetMaxMiB"]) : undefined);
  if (max !== undefined) {
    const bound = max * (1 + tolerance);
    out.push({ id: r.id, name: r.name, kind: "max", target: max, bound, measured: r.candidate.value, unit: r.candidate.unit, pass: r.candidate.value <= bound });
  }
  const added = num(r.extra?.["targetMaxAddedMs"]);
  const addedMs = num(r.extra?.["addedMs"]);
  if (added !== undefined && addedMs !== undefined) {
    const bound = added * (1 + latencyTolerance);
    out.push({ id: r.id, name: r.name, kind: "added", target: added, bound, measured: addedMs, unit: "ms", pass: addedMs <= bound });
  }
  return out;
}

/**
 * The runner's exit code (bench/run.ts). A missing bench file is a warning
 * (another engineer's bench may not have landed yet); a bench that crashed
 * fails, and in a quick run so does a figure beyond its bound (a known miss:
 * beyond its ratchet). A full run's misses are the report's to show.
 */
export function exitCodeOf(runs: ReadonlyArray<{ readonly status: "ok" | "failed" | "missing"; readonly checks: readonly Check[] }>, quick: boolean): 0 | 1 {
  if (runs.some((r) => r.status === "failed")) return 1;
  if (quick && runs.some((r) => r.checks.some((c) => !c.pass))) return 1;
  return 0;
}

/** "≥ 4×", "≤ 80 MiB", "≤ +0.3 ms". */
export function describeTarget(c: Pick<Check, "kind" | "target" | "unit">): string {
  switch (c.kind) {
    case "ratio":
      return `≥ ${fmtNum(c.target)}×`;
    case "max":
      return `≤ ${fmtNum(c.target)} ${c.unit}`;
    case "added":
      return `≤ +${fmtNum(c.target)} ms`;
  }
}

export function fmtNum(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a >= 100) return String(Math.round(v));
  if (a >= 10) return v.toFixed(1);
  if (a >= 1) return v.toFixed(2);
  return v.toPrecision(2);
}
