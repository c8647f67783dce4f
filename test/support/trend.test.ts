import t from "tap";
import { judge, slope, type Point } from "./trend.ts";

const series = (f: (minute: number) => number, minutes: number, every = 1): Point[] => Array.from({ length: Math.floor(minutes / every) + 1 }, (_, i) => ({ minute: i * every, value: f(i * every) }));

t.test("the slope of a straight line is its gradient, whatever its offset", async (t) => {
  t.equal(slope(series((m) => 100 + 2.5 * m, 20)), 2.5);
  t.equal(slope(series(() => 7, 20)), 0);
  t.equal(slope([{ minute: 3, value: 1 }]), 0, "one point has no slope");
});

t.test("a series that grows faster than the bound after the warm-up is not flat; a flat one with noise is", async (t) => {
  // A leak of 2 MiB/min under a sawtooth of ±3 MiB (garbage collections).
  const noise = (m: number): number => (m % 2 === 0 ? 3 : -3);
  t.notOk(judge(series((m) => 80 + 2 * m + noise(m), 20), 5, { perMinute: 1 }).flat, "a 2 MiB/min leak fails a 1 MiB/min bound");
  t.ok(judge(series((m) => 80 + noise(m), 20), 5, { perMinute: 1 }).flat, "noise alone passes");
  // Start-up growth is not a leak: only what comes after the warm-up counts.
  t.ok(judge(series((m) => (m < 5 ? 40 + 8 * m : 80), 20), 5, { perMinute: 1 }).flat, "growth during the warm-up does not count");
});

t.test("a short window is judged against the noise allowance spread over it, a long one against the slope bound", async (t) => {
  const short = series((m) => 80 + 4 * m, 2, 1 / 3);
  const v = judge(short, 0.5, { perMinute: 1, noiseAllowance: 10 });
  t.ok(v.window > 1 && v.window < 2, `the window is the fitted samples' span (${v.window.toFixed(2)} min)`);
  t.ok(v.bound > 5, `the bound is the allowance over the window (${v.bound.toFixed(1)}/min)`);
  t.ok(v.flat, "4/min over 1.5 minutes is within an allowance of 10");
  t.notOk(judge(series((m) => 80 + 4 * m, 20), 5, { perMinute: 1, noiseAllowance: 10 }).flat, "over 15 minutes the same slope fails");
  t.notOk(judge(series(() => 1, 1), 0, { perMinute: 1 }).flat, "fewer than three fitted samples cannot show flatness");
});
