/**
 * bench/lib/checks.ts: how a figure meets its target, what the quick
 * (CI) run's tolerance and ratchets loosen, and what they must not.
 */
import t from "tap";
import type { BenchResult } from "../../bench/lib/bench.ts";
import { checksOf, exitCodeOf, KNOWN_MISSES, QUICK_INFORMATIONAL, QUICK_LATENCY_TOLERANCE, QUICK_TOLERANCE, quickChecksOf } from "../../bench/lib/checks.ts";
import type { MemoryFigures } from "../../bench/lib/memory.ts";
import { breakEven, podMemory } from "../../bench/lib/pod-memory.ts";
import { full, quick, result } from "./results.ts";

const MiB = 1024 * 1024;
const mem = (rssMiB: number, anonMiB: number): MemoryFigures => ({ rss: rssMiB * MiB, anon: anonMiB * MiB, pss: rssMiB * MiB });
/** The quick run's break-even row for a controller floor and a sidecar peak (MiB, in both measures), as p5m-client-go builds it. */
function breakEvenRow(key: "rss" | "anon", floorMiB: number, sidecarMiB: number): BenchResult {
  const points = [50, 55, 60].map((u) => ({ one: mem(u, u), pod: mem(60 + 0.9 * u, 60 + 0.9 * u) }));
  const r = breakEven(key, points, true, mem(floorMiB, floorMiB), mem(sidecarMiB, sidecarMiB), {});
  if (r === undefined) throw new Error("no break-even row");
  return r;
}

t.test("a ratio target is met down to target·(1 − tolerance) in quick runs and at the target itself in full runs", async (t) => {
  const at = (ratio: number) => result({ id: "P3", name: "JSON filter path", ratio, target: 4 });
  t.equal(quick(at(4 * (1 - QUICK_TOLERANCE))), "pass", "3× passes a quick run");
  t.equal(quick(at(2.99)), "fail", "2.99× fails it");
  t.equal(full(at(3.99)), "fail", "3.99× fails a full run");
  t.equal(full(at(4)), "pass");
});

t.test("a maximum may grow by the tolerance in quick runs; targetMaxMiB bounds only a figure in MiB", async (t) => {
  const rss = (mib: number, extra: Record<string, number>) => result({ id: "P6", name: "idle RSS", extra }, mib, "MiB");
  t.equal(quick(rss(80, { targetMaxMiB: 64 })), "pass", "80 MiB is within 64 MiB + 25%");
  t.equal(quick(rss(80.1, { targetMaxMiB: 64 })), "fail");
  t.equal(full(rss(64.5, { targetMaxMiB: 64 })), "fail", "a full run judges the target itself");
  t.equal(full(result({ id: "P6", name: "idle RSS", extra: { targetMaxMiB: 64 } }, 80, "MB")), "not judged", "a memory figure in another unit than MiB is not judged against a MiB bound");
  t.equal(full(rss(64.5, { targetMax: 64 })), "fail", "targetMax bounds any unit");
  t.equal(full(result({ id: "P6", name: "ready", extra: { targetMaxMiB: 64 } }, 500, "ms")), "not judged", "targetMaxMiB is not a bound on milliseconds");
});

t.test("added latency is judged against targetMaxAddedMs, with the quick run's own latency tolerance", async (t) => {
  const p1 = (addedMs: number) => result({ id: "P1", name: "GET at 1000/s: p50", extra: { targetMaxAddedMs: 0.3, addedMs } });
  t.equal(quick(p1(0.3 * (1 + QUICK_LATENCY_TOLERANCE))), "pass", "+0.6 ms passes a quick run (100%)");
  t.equal(quick(p1(0.61)), "fail");
  t.equal(full(p1(0.31)), "fail");
  t.equal(full(result({ id: "P1", name: "GET: p50", extra: { targetMaxAddedMs: 0.3 } })), "not judged", "no addedMs, no check");
});

t.test("a figure with no target is reported, not judged", async (t) => {
  const r = result({ id: "S4", name: "server CPU per write, labels, N=8", ratio: 0.1 }, 900, "µs");
  t.equal(full(r), "not judged");
  t.equal(quick(r), "not judged");
});

t.test("P2 is reported but not gated in quick runs; a full run judges it", async (t) => {
  t.ok(QUICK_INFORMATIONAL.has("P2"));
  const p2 = result({ id: "P2", name: "JSON fast path vs a byte pipe", ratio: 0.38, target: 0.8 });
  t.equal(quick(p2), "pass");
  t.ok(quickChecksOf(p2)[0]?.known, "and says why it passed");
  t.equal(full(p2), "fail");
  t.equal(quick({ ...p2, id: "P3" }), "fail", "the same figure for another target fails");
});

t.test("a known miss passes a quick run at its ratchet, fails it beyond, and a full run still misses it", async (t) => {
  const k = KNOWN_MISSES.find((m) => m.id === "P5m" && m.kind === "ratio");
  if (k === undefined) return t.fail("P5m's client-go ratchet is gone");
  const row = (ratio: number) => result({ id: "P5m", name: "pod memory at the peak (controller + proxy RSS), client-go, gate on, N=2", ratio, target: 1 });
  t.equal(quick(row(k.ratchet)), "pass");
  t.equal(quickChecksOf(row(k.ratchet))[0]?.known?.ratchet, k.ratchet, "judged against the ratchet, and says so");
  t.equal(quick(row(k.ratchet - 0.01)), "fail", "worse than the ratchet fails");
  t.equal(full(row(0.45)), "fail", "a full run judges the target");
  // The quick break-even: the controller's floor + 2 × the sidecar's peak.
  const quickBreakEven = (floorMiB: number) => breakEvenRow("rss", floorMiB, 100);
  t.equal(quickBreakEven(100).candidate.value, 300);
  t.equal(quick(quickBreakEven(100)), "pass", "the break-even's ratchet, 300 MiB");
  t.equal(quick(quickBreakEven(101)), "fail");
});

t.test("the known-miss ratchets for P5m client-go at N = 2 are one per row: the RSS row's never stands in for the anonymous-memory row's", async (t) => {
  // An unsharded client-go controller peaking at 54 MiB RSS (40 MiB anonymous),
  // and a pod at N = 2 of 45 + 90 MiB RSS (30 + 25 MiB anonymous): RSS 0.40×
  // (the known miss, above its ratchet), anonymous memory 0.73× (below 1× less 25%).
  const unsharded = { peak: mem(54, 40), rest: mem(50, 36) };
  const pod = { controllerPeak: mem(45, 30), proxyPeak: mem(90, 25), controllerRest: mem(40, 26), proxyRest: mem(85, 22) };
  for (const gate of ["on", "off"] as const) {
    const rows = podMemory("client-go", 2, gate, [pod], unsharded);
    const rss = rows.find((r) => r.extra?.["metric"] === "pod-peak");
    const anon = rows.find((r) => r.extra?.["metric"] === "pod-peak-anon");
    if (rss === undefined || anon === undefined) return t.fail("podMemory no longer writes the RSS and anonymous-memory peak rows");
    t.equal(quick(rss), "pass", `gate ${gate}: the RSS row is a known miss within its ratchet`);
    t.ok(quickChecksOf(rss)[0]?.known, `gate ${gate}: the RSS row is judged against the ratchet`);
    t.equal(anon.target, 1, `gate ${gate}: the anonymous-memory row has a target`);
    t.equal(quick(anon), "pass", `gate ${gate}: the anonymous-memory row (0.73) is within its own ratchet`);
    t.match(quickChecksOf(anon)[0]?.known?.reason ?? "", /anonymous memory/, `gate ${gate}: judged by its own ratchet, not the RSS row's`);
    // 0.32: a sidecar 70 MiB heavier in anonymous memory, which the RSS
    // ratchet (0.36 of a larger RSS) would not see.
    const heavy = podMemory("client-go", 2, gate, [{ ...pod, proxyPeak: mem(90, 95) }], unsharded).find((r) => r.extra?.["metric"] === "pod-peak-anon");
    if (heavy === undefined) return t.fail("no anonymous-memory row");
    t.equal(quick(heavy), "fail", `gate ${gate}: the anonymous-memory row fails below its ratchet`);
  }
  // Nor the rows of other controllers or other N.
  const wide = { controllerPeak: mem(45, 30), proxyPeak: mem(140, 60), controllerRest: mem(40, 26), proxyRest: mem(85, 22) };
  for (const [kind, n] of [["client-node", 2], ["client-go", 8]] as const) {
    for (const r of podMemory(kind, n, "on", [wide], unsharded).filter((x) => x.target !== undefined)) t.notOk(quickChecksOf(r).some((c) => c.known !== undefined), `${r.name}: no ratchet`);
  }
});

t.test("the break-even ratchet applies to the RSS break-even only", async (t) => {
  // Were the anonymous-memory break-even (reported today) given a bound, the RSS row's ratchet must not loosen it.
  const anon = breakEvenRow("anon", 100, 50);
  t.equal(quick({ ...anon, extra: { ...anon.extra, targetMaxMiB: 100 } }), "fail", "200 MiB against a bound of 100 MiB");
});

t.test("quickMinRatio bounds a ratio in quick runs as it stands, and is not judged in full runs", async (t) => {
  const r = (ratio: number) => result({ id: "S4", name: "server CPU per write, labels vs unfiltered, N=4, proxies", ratio, extra: { quickMinRatio: 0.8 } });
  t.equal(quick(r(0.8)), "pass");
  t.equal(quick(r(0.79)), "fail", "no tolerance on top: the bound carries its own");
  t.equal(quick(r(Number.NaN)), "fail", "a ratio that is not a number fails");
  t.equal(full(r(0.1)), "not judged");
  t.same(
    checksOf(r(1), QUICK_TOLERANCE).map((c) => c.kind),
    [],
    "checksOf alone (the full run's judge at any tolerance) does not read it",
  );
});

const P3 = (ratio: number) => result({ id: "P3", name: "JSON filter path", ratio, target: 4 });

t.test("the bench runner fails a quick run when a figure misses its bound (a known miss: its ratchet), and leaves a full run's misses to the report", async (t) => {
  const known = quickChecksOf(result({ id: "P5m", name: "pod memory at the peak (controller + proxy RSS), client-go, gate on, N=2", ratio: 0.4, target: 1 }));
  t.equal(exitCodeOf([{ status: "ok", checks: quickChecksOf(P3(4)) }], true), 0);
  t.equal(exitCodeOf([{ status: "ok", checks: quickChecksOf(P3(4)) }, { status: "ok", checks: quickChecksOf(P3(2)) }], true), 1, "a quick miss fails CI");
  t.equal(exitCodeOf([{ status: "ok", checks: known }], true), 0, "a known miss within its ratchet does not");
  t.equal(exitCodeOf([{ status: "ok", checks: checksOf(P3(2), 0) }], false), 0, "a full run's miss is the report's to show");
});

t.test("the bench runner fails any run with a crashed bench; a missing bench file is a warning", async (t) => {
  const met = quickChecksOf(P3(4));
  t.equal(exitCodeOf([{ status: "ok", checks: met }, { status: "failed", checks: [] }], true), 1, "a quick run");
  t.equal(exitCodeOf([{ status: "failed", checks: [] }], false), 1, "a full run");
  t.equal(exitCodeOf([{ status: "ok", checks: met }, { status: "missing", checks: [] }], true), 0, "a missing bench file");
});
