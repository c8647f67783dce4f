/**
 * The status docs/performance.md gives a row and a target
 * (bench/lib/report.ts): met only when every check passed.
 */
import t from "tap";
import type { Check } from "../../bench/lib/checks.ts";
import { status, summaryStatus } from "../../bench/lib/report.ts";

const check = (pass: boolean, name = "figure"): Check => ({ id: "S1", name, kind: "max", target: 4, bound: 4, measured: pass ? 4 : 5, unit: "lists", pass });

t.test("a row with no check on it is reported, neither met nor missed", async (t) => {
  t.equal(status([]), "reported");
});

t.test("a row is met only when every check on it passed; one miss makes it missed", async (t) => {
  t.equal(status([check(true)]), "✅ met");
  t.equal(status([check(true), check(true, "other")]), "✅ met");
  t.equal(status([check(true), check(false, "other")]), "❌ missed");
  t.equal(status([check(false), check(true, "other")]), "❌ missed");
});

t.test("a target no run measured is not measured, even when its run failed", async (t) => {
  t.equal(summaryStatus([{ name: "s4-selector-cost", status: "failed" }], false, []), "⏳ not measured");
  t.equal(summaryStatus([], false, []), "⏳ not measured");
});

t.test("a target's summary names each run that failed or is missing beside the status of the figures that came", async (t) => {
  const runs = [
    { name: "p5-scale", status: "ok" as const },
    { name: "p5m-client-go", status: "failed" as const },
    { name: "p8-labels", status: "missing" as const },
  ];
  t.equal(summaryStatus(runs, true, [check(true)]), "✅ met (p5m-client-go failed, p8-labels missing)");
  t.equal(summaryStatus(runs, true, [check(true), check(false, "other")]), "❌ missed (p5m-client-go failed, p8-labels missing)");
  t.equal(summaryStatus(runs.slice(0, 1), true, [check(false)]), "❌ missed");
  t.equal(summaryStatus(runs.slice(0, 1), true, []), "reported");
});
