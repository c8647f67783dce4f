/**
 * P5m: what a pod costs, controller + sidecar, against the same controller
 * unsharded, at the peak and at rest. Shared by the client-node bench
 * (p5-scale) and the client-go one (p5m-client-go).
 */
import type { BenchResult } from "../lib.ts";

const MB = 1e6;
const r1 = (x: number): number => Math.round(x * 10) / 10;
const r3 = (x: number): number => Math.round(x * 1000) / 1000;

export interface PodFigures {
  /** VmHWM of the controller process: its peak, as a rule its initial list. */
  readonly controllerPeakRss: number;
  /** VmHWM of the proxy process (0 without one). */
  readonly proxyPeakRss: number;
  /** The controller at rest (after a GC). */
  readonly controllerRss: number;
  /** The proxy as it is (0 without one). */
  readonly proxyRss: number;
}

/**
 * The two P5m rows for one configuration. The peak is the sum of the two
 * processes' peaks (VmHWM): what the pod's memory limit must cover, whether
 * or not the peaks coincide. Targets (design.md): pod ÷ unsharded < 1.0 at
 * N = 2, for every controller; ≤ 0.70 at N = 8 for client-node. As ratios
 * (higher is better): unsharded ÷ pod ≥ 1.0 and ≥ 1/0.7.
 */
export function podMemory(
  kind: "client-node" | "client-go",
  n: number,
  gate: "on" | "off",
  f: readonly PodFigures[],
  unsharded: { readonly peak: number; readonly rest: number },
  extra: Readonly<Record<string, number | string>> = {},
): BenchResult[] {
  if (f.length === 0) return [];
  const worst = f.reduce((a, b) => (b.controllerPeakRss + b.proxyPeakRss > a.controllerPeakRss + a.proxyPeakRss ? b : a));
  const peak = worst.controllerPeakRss + worst.proxyPeakRss;
  const rest = Math.max(...f.map((x) => x.controllerRss + x.proxyRss));
  const target = n === 2 ? 1 : n === 8 && kind === "client-node" ? 1 / 0.7 : undefined;
  const common = { ...extra, n, gate, controller: kind };
  return [
    {
      id: "P5m",
      name: `pod memory at the peak (controller + proxy RSS), ${kind}, gate ${gate}, N=${n}`,
      candidate: { label: "controller + proxy peak RSS, largest pod", value: r1(peak / MB), unit: "MB" },
      baseline: { label: "unsharded controller peak RSS", value: r1(unsharded.peak / MB), unit: "MB" },
      ratio: unsharded.peak / peak,
      ...(target === undefined ? {} : { target }),
      extra: { ...common, metric: "pod-peak", podOverUnsharded: r3(peak / unsharded.peak), controllerPeakMB: r1(worst.controllerPeakRss / MB), proxyPeakMB: r1(worst.proxyPeakRss / MB) },
    },
    {
      id: "P5m",
      name: `pod memory at rest (controller after GC + proxy RSS), ${kind}, gate ${gate}, N=${n}`,
      candidate: { label: "controller + proxy RSS at rest, largest pod", value: r1(rest / MB), unit: "MB" },
      baseline: { label: "unsharded controller RSS at rest", value: r1(unsharded.rest / MB), unit: "MB" },
      ratio: unsharded.rest / rest,
      extra: { ...common, metric: "pod-rest", podOverUnsharded: r3(rest / unsharded.rest) },
    },
  ];
}
