/**
 * S1's, S3's and S4's own quick gates (bench/lib/gates.ts), read the
 * way `npm run bench -- --quick` reads them: each fails on the regression
 * its comment says it catches, and passes the figures of a good build.
 */
import t from "tap";
import type { BenchResult } from "../../bench/lib/bench.ts";
import { QUICK_TOLERANCE } from "../../bench/lib/checks.ts";
import { s1ListAgreement, s3ManagerCpu, S3_QUICK_CPU_RATIO, s4Ratios, type S4Figures } from "../../bench/lib/gates.ts";
import { full, quick } from "./results.ts";

const step = "16 members, 20000 pods, scale 16 → 17";

t.test("S1's quick gate fails when the clients made more LISTs than the server saw", async (t) => {
  const r = s1ListAgreement(step, 1, 2, { step: "scale 16 → 17" });
  t.equal(quick(r), "fail");
  t.equal(full(r), "fail", "a full run too");
  t.equal(r.candidate.value, 1, "one LIST apart");
});

t.test("S1's quick gate fails when the server saw more LISTs than the clients made", async (t) => {
  t.equal(quick(s1ListAgreement(step, 5, 4, {})), "fail");
  t.equal(quick(s1ListAgreement(step, 1, 0, {})), "fail", "a LIST no client made");
});

t.test("S1's quick gate passes when the clients' LISTs and the server's agree", async (t) => {
  for (const n of [0, 1, 4, 127]) {
    const r = s1ListAgreement(step, n, n, { step: "x" });
    t.equal(quick(r), "pass", `${n} and ${n}`);
    t.equal(full(r), "pass");
    t.equal(r.ratio, 1);
  }
});

// The quick runs of 2026-12-05 at 200/s, one replica: the apiserver's CPU
// for a write without the webhook, and the manager's.
const MEASURED = [
  { apiserver: 2.45, manager: 0.71 },
  { apiserver: 2.59, manager: 0.71 },
];

t.test("S3's quick CPU judge fails a manager twice as costly per write as the quick runs measured", async (t) => {
  for (const m of MEASURED) {
    t.equal(quick(s3ManagerCpu(200, 1, m.manager, m.apiserver, true)), "pass", `${m.manager} ms against ${m.apiserver} ms passes`);
    t.equal(quick(s3ManagerCpu(200, 1, 2 * m.manager, m.apiserver, true)), "fail", `${2 * m.manager} ms against ${m.apiserver} ms fails`);
  }
  t.ok(S3_QUICK_CPU_RATIO * (1 - QUICK_TOLERANCE) > 3.65 / 2, "the bound sits above half the best quick ratio measured");
});

t.test("S3's quick CPU judge passes a good build read a third below the quick runs' level", async (t) => {
  for (const m of MEASURED) t.equal(quick(s3ManagerCpu(200, 1, 1.4 * m.manager, m.apiserver, true)), "pass", `${1.4 * m.manager} ms against ${m.apiserver} ms`);
});

t.test("S3's manager CPU is judged only where the quick run asks: reported in full runs and at other rates", async (t) => {
  const r = s3ManagerCpu(1000, 3, 1.118, 1.26, false);
  t.equal(full(r), "not judged");
  t.equal(quick(r), "not judged");
});

/** S4 figures of one group: server µs per write and watch KB per write for each configuration. */
const s4 = (n: number, us: { labels: number; shardselector: number; unfiltered: number }, kb: { labels: number; unfiltered: number }): S4Figures => ({
  labels: { serverUsPerWrite: us.labels, deliveryUsPerWrite: us.labels - 800, eventKBPerWrite: kb.labels, writtenKBPerWrite: kb.labels * 1.1 },
  shardselector: { serverUsPerWrite: us.shardselector, deliveryUsPerWrite: us.shardselector - 800, eventKBPerWrite: kb.labels, writtenKBPerWrite: kb.labels * 1.1 },
  unfiltered: { serverUsPerWrite: us.unfiltered, deliveryUsPerWrite: us.unfiltered - 800, eventKBPerWrite: kb.unfiltered, writtenKBPerWrite: kb.unfiltered * 1.1 },
});
/** The row of `metric` (against `vs`); throws when the builder wrote none, so a lost row fails the test. */
function rowOf(rows: readonly BenchResult[], metric: string, vs?: string): BenchResult {
  const r = rows.find((x) => x.extra?.["metric"] === metric && (vs === undefined || x.extra["vs"] === vs));
  if (r === undefined) throw new Error(`no ${metric} row${vs === undefined ? "" : ` against ${vs}`}`);
  return r;
}
const GOOD = s4(4, { labels: 1000, shardselector: 990, unfiltered: 1300 }, { labels: 3.1, unfiltered: 12.4 });

t.test("S4's quick gate passes a good build: labels mode no dearer than unfiltered, a quarter of its watch bytes at N = 4", async (t) => {
  const rows = s4Ratios(4, "proxies", GOOD, { n: 4 });
  t.equal(rows.length, 3);
  for (const r of rows) t.not(quick(r), "fail", r.name);
});

t.test("S4's quick gate fails when labels mode costs the server more than 0.8× the unfiltered watch it replaces", async (t) => {
  // A proxy that relists or reopens its watch: the server's CPU per write in labels mode doubles.
  const rows = s4Ratios(4, "proxies", s4(4, { labels: 2000, shardselector: 990, unfiltered: 1300 }, { labels: 3.1, unfiltered: 12.4 }), {});
  t.equal(quick(rowOf(rows, "cpu-ratio", "unfiltered")), "fail");
  t.equal(quick(rowOf(rows, "cpu-ratio", "shardselector")), "not judged", "nothing is bounded against shardselector");
});

t.test("S4's quick gate fails when labels mode's watch bytes are not about 1/N of the unfiltered watch's", async (t) => {
  // A selector that stopped being sent: every watcher is sent every event.
  const rows = s4Ratios(4, "proxies", s4(4, { labels: 1000, shardselector: 990, unfiltered: 1300 }, { labels: 12.4, unfiltered: 12.4 }), {});
  t.equal(quick(rowOf(rows, "bytes-ratio")), "fail");
  // At N = 8 the bound is 6.4: 5× (a watcher in five sent events it does not own) fails.
  const eight = s4Ratios(8, "direct", s4(8, { labels: 1000, shardselector: 990, unfiltered: 1300 }, { labels: 5, unfiltered: 25 }), {});
  t.equal(quick(rowOf(eight, "bytes-ratio")), "fail");
});

t.test("S4's quick gate fails when a configuration's figure is missing", async (t) => {
  const rows = s4Ratios(4, "proxies", { ...GOOD, labels: {} }, {});
  t.equal(quick(rowOf(rows, "cpu-ratio", "unfiltered")), "fail");
  t.equal(quick(rowOf(rows, "bytes-ratio")), "fail");
});

t.test("S4 has no target in full runs: its ratios are reported", async (t) => {
  for (const r of s4Ratios(4, "proxies", s4(4, { labels: 5000, shardselector: 990, unfiltered: 1300 }, { labels: 12.4, unfiltered: 12.4 }), {})) t.equal(full(r), "not judged", r.name);
});

