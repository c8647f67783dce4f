/**
 * bench/lib/fit.ts, and the 1/N fit of report.ts: the lines P5 and
 * P5m's break-even are read from.
 */
import t from "tap";
import { fitLine } from "../../bench/lib/fit.ts";
import { fitInverse } from "../../bench/lib/report.ts";

t.test("fitLine recovers the line through points that lie on it", async (t) => {
  const f = fitLine([
    [1, 5],
    [2, 7],
    [4, 11],
  ]);
  t.same(f, { a: 3, b: 2 });
});

t.test("fitLine is the least-squares line through scattered points", async (t) => {
  // x̄ = 1.5, ȳ = 2.25; Sxy = 3.5, Sxx = 5: b = 0.7, a = 1.2.
  const f = fitLine([
    [0, 1],
    [1, 2.5],
    [2, 2],
    [3, 3.5],
  ]);
  if (f === undefined) return t.fail("no line");
  t.ok(Math.abs(f.b - 0.7) < 1e-12, `slope ${f.b}`);
  t.ok(Math.abs(f.a - 1.2) < 1e-12, `intercept ${f.a}`);
});

t.test("fitLine gives no line for fewer than two points, or for points at one x", async (t) => {
  t.equal(fitLine([]), undefined);
  t.equal(fitLine([[1, 2]]), undefined);
  t.equal(
    fitLine([
      [3, 1],
      [3, 9],
    ]),
    undefined,
    "a vertical spread has no slope",
  );
});

t.test("fitInverse fits a floor plus a part that falls as 1/N, skipping missing figures", async (t) => {
  const f = fitInverse([1, 2, 4, 8], [10 + 80, 10 + 40, undefined, 10 + 10]);
  if (f === undefined) return t.fail("no fit");
  t.ok(Math.abs(f.a - 10) < 1e-9 && Math.abs(f.b - 80) < 1e-9, `${f.a} + ${f.b}/N`);
  t.equal(fitInverse([1, 2], [50, Number.NaN]), undefined, "one usable point is no fit");
});
