/**
 * The report's charts: which of the sampler's series each chart draws, in
 * which unit, with the scenes as markers. Apart from report.ts, which draws
 * any chart, and from the runner, which only hands the charts over.
 */
import { fmtPct, type ChartOptions } from "./report.ts";
import type { Demo, Sample } from "./stage.ts";

/** The report's charts over the whole run: pods cached, bytes to controllers and from the apiserver, and coverage. */
export function charts(demo: Demo): ChartOptions[] {
  const names = [...demo.replicas.keys()];
  const series = (f: (s: Sample, n: string) => number | undefined): { name: string; points: [number, number][] }[] =>
    names.map((n) => ({ name: n, points: demo.samples.flatMap((s): [number, number][] => (s.cached.has(n) ? [[s.t, f(s, n) ?? 0]] : [])) }));
  const bytesChart = (id: string, title: string, perReplica: (s: Sample, n: string) => number | undefined, twin: (s: Sample) => number): ChartOptions => ({
    id,
    title,
    yLabel: "MiB",
    series: [...series((s, n) => (perReplica(s, n) ?? 0) / (1 << 20)), { name: "unsharded (twin of replica-0)", points: demo.samples.map((s): [number, number] => [s.t, twin(s) / (1 << 20)]), dashed: true }],
    markers: demo.markers,
    format: (v) => v.toFixed(1),
  });
  return [
    { id: "objects", title: "Pods cached per replica", yLabel: "pods", series: series((s, n) => s.cached.get(n)), markers: demo.markers, format: (v) => v.toFixed(0) },
    bytesChart("bytes", "Bytes received per controller (cumulative), and one unsharded replica", (s, n) => s.bytes.get(n), (s) => s.twinBytes),
    bytesChart("upstream", "Bytes the apiserver sent per proxy (cumulative), and to one unsharded replica", (s, n) => s.upstream.get(n), (s) => s.twinUpstream),
    {
      id: "coverage",
      title: "Coverage: share of pods cached by some replica, and by two",
      yLabel: "share of pods",
      series: [
        { name: "cached by ≥ 1", points: demo.samples.map((s): [number, number] => [s.t, s.coverage]) },
        { name: "cached by ≥ 2", points: demo.samples.map((s): [number, number] => [s.t, s.doubled]), dashed: true },
      ],
      markers: demo.markers,
      format: (v) => fmtPct(v),
      yMin: 0,
      yMax: 1,
    },
  ];
}
