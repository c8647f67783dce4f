/**
 * P5m's break-even size (bench/lib/pod-memory.ts, breakEven): the
 * full run judges where the line through the curve crosses pod =
 * unsharded; the quick run judges the controller's floor + 2 × the
 * sidecar's peak, since its small curve's line swings run to run.
 */
import t from "tap";
import type { MemoryFigures } from "../../bench/lib/memory.ts";
import { breakEven } from "../../bench/lib/pod-memory.ts";
import type { BenchResult } from "../../bench/lib/bench.ts";
import { full, quick } from "./results.ts";

const MiB = 1024 * 1024;
const mem = (mib: number): MemoryFigures => ({ rss: mib * MiB, anon: mib * MiB, pss: mib * MiB });
/** The break-even row; throws when none was written, so a lost row fails the test. */
function row(r: BenchResult | undefined): BenchResult {
  if (r === undefined) throw new Error("no break-even row");
  return r;
}
/** Points of a curve where the pod at N = 2 is `a + b × unsharded`, MiB. */
const curve = (a: number, b: number, unsharded: readonly number[]) => unsharded.map((u) => ({ one: mem(u), pod: mem(a + b * u) }));

t.test("P5m's full break-even is where the line through the curve crosses pod = unsharded", async (t) => {
  const r = breakEven("rss", curve(40, 0.5, [60, 100, 140]), false, mem(30), mem(25), {});
  t.equal(r?.candidate.value, 80, "pod = 40 + U/2 crosses pod = U at 80 MiB");
  t.equal(full(row(r)), "pass", "≤ 100 MiB");
  const far = breakEven("rss", curve(90, 0.5, [60, 100, 140]), false, mem(30), mem(25), {});
  t.equal(far?.candidate.value, 180);
  t.equal(full(row(far)), "fail");
});

t.test("a pod that grows as fast as the unsharded controller, or faster, never breaks even, and fails", async (t) => {
  for (const slope of [1, 1.2]) {
    const r = breakEven("rss", curve(10, slope, [60, 100]), false, undefined, undefined, {});
    t.equal(r?.candidate.value, Number.POSITIVE_INFINITY, `slope ${slope}`);
    t.equal(full(row(r)), "fail", `slope ${slope}: not a negative size that passes`);
  }
});

t.test("P5m's quick break-even is the controller's floor plus two sidecar peaks, whatever the small curve's line says", async (t) => {
  // Three small caches with a slope near 1: their line crosses far away.
  const points = curve(60, 0.9, [50, 55, 60]);
  t.equal(breakEven("rss", points, false, mem(40), mem(70), {})?.candidate.value, 600, "the line: 60 / (1 − 0.9)");
  const r = breakEven("rss", points, true, mem(40), mem(70), {});
  t.equal(r?.candidate.value, 180, "40 + 2 × 70");
  t.equal(quick(row(r)), "pass", "within its known-miss ratchet (300 MiB)");
  t.equal(quick(row(breakEven("rss", points, true, mem(40), mem(140), {}))), "fail", "a sidecar twice as large: 320 MiB");
  t.equal(breakEven("rss", points, true, undefined, mem(70), {})?.candidate.value, 600, "without a floor, the line");
});

t.test("the anonymous-memory break-even is reported, not judged", async (t) => {
  const r = breakEven("anon", curve(90, 0.5, [60, 100, 140]), false, mem(30), mem(25), {});
  t.equal(full(row(r)), "not judged");
  t.equal(quick(row(breakEven("anon", curve(90, 0.5, [60, 100, 140]), true, mem(30), mem(250), {}))), "not judged");
});

t.test("no break-even from fewer than two curve points", async (t) => {
  t.equal(breakEven("rss", curve(40, 0.5, [60]), false, mem(30), mem(25), {}), undefined);
});
