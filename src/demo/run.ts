/**
 * The demo behind `npm start`, in ring mode: devapi seeded with pods, the
 * manager's ring coordinator, and controller replicas, each a real
 * client-node informer behind its own shardcar proxy whose ranges come from
 * a RingMember. Each replica has an unsharded twin (an informer behind a
 * proxy that owns everything) that starts, restarts and dies with it, so the
 * bytes saved are measured against a real baseline, not assumed.
 *
 * This file is the runner: it sets the stage (stage.ts), plays the scenes
 * (scenes.ts) in order, and after each prints the per-replica table
 * (report-table.ts), checks coverage in plain words and the scene's own
 * claims (checks.ts), and shows bytes saved. A sampler records objects and
 * bytes per replica and coverage every 250 ms for the report's charts
 * (report-charts.ts). Exits 0 only if every invariant held.
 */
import { writeFile } from "node:fs/promises";
import { seedPods, startDevApi } from "../devapi/index.ts";
import { RING_GROUP, RING_KIND, RING_VERSION } from "../ring/index.ts";
import { coverageCheck, wholeRunBytes, type Invariant } from "./checks.ts";
import { registerFamilyResources } from "./families.ts";
import { startDemoLabelSlots } from "./label-slots.ts";
import { fmtBytes, fmtPct, renderReport, type ReportScene } from "./report.ts";
import { charts } from "./report-charts.ts";
import { printTable } from "./report-table.ts";
import { demoScenes, type SceneSpec } from "./scenes.ts";
import { Demo, NAMESPACES, RING, RING_NS, RING_REF, type DemoOptions, type ReplicaRow } from "./stage.ts";

export type { Invariant } from "./checks.ts";
export type { DemoOptions, ReplicaRow } from "./stage.ts";

export interface SceneResult {
  readonly scene: string;
  readonly ok: boolean;
  readonly rows: readonly ReplicaRow[];
  /** Pods in the store when the scene settled. */
  readonly total: number;
  readonly invariants: readonly Invariant[];
  readonly bytes: { readonly controllers: number; readonly twins: number; readonly upstream: number; readonly twinUpstream: number };
  readonly durationMs: number;
}

export interface DemoResult {
  readonly ok: boolean;
  readonly scenes: readonly SceneResult[];
  readonly reportPath: string;
  readonly durationMs: number;
}

async function runScene(demo: Demo, spec: SceneSpec, reportScenes: ReportScene[]): Promise<SceneResult> {
  const startedAt = Date.now();
  demo.markers.push({ at: (startedAt - demo.t0) / 1000, label: spec.short });
  demo.log(`\n== ${spec.title}\n`);
  for (const l of (await spec.prepare?.()) ?? []) demo.log(`${l}\n`);
  const before = new Map([...demo.replicas.values()].map((r) => [r.name, r.bytes()]));
  const totalsBefore = demo.bytesNow();
  await spec.action();
  const settled = await demo.settle(spec.members(), spec.settledWhen);
  const settledAt = Date.now();
  const e = demo.exact();
  const rows = demo.rows(before);
  const table = printTable(rows);
  demo.log(table + "\n");
  const coverage = coverageCheck(spec.title, e, settled, settledAt - startedAt);
  const invariants: Invariant[] = [coverage];
  invariants.push(...(spec.checks?.({ rows, startedAt, settledAt }) ?? []));
  const now = demo.bytesNow();
  const bytes = { controllers: now.controllers - totalsBefore.controllers, twins: now.twins - totalsBefore.twins, upstream: now.upstream - totalsBefore.upstream, twinUpstream: now.twinUpstream - totalsBefore.twinUpstream };
  const saved = (a: number, b: number): string => (b === 0 ? "-" : fmtPct(1 - a / b));
  const bytesLine = `bytes this scene: controllers received ${fmtBytes(bytes.controllers)}, unsharded they would have received ${fmtBytes(bytes.twins)} (saved ${saved(bytes.controllers, bytes.twins)}); the apiserver sent ${fmtBytes(bytes.upstream)} instead of ${fmtBytes(bytes.twinUpstream)} (saved ${saved(bytes.upstream, bytes.twinUpstream)})`;
  const lines = [coverage.detail, bytesLine, ...(spec.bytesNote === undefined ? [] : [spec.bytesNote]), ...invariants.slice(1).map((i) => `${i.held ? "" : "BROKEN: "}${i.detail}`)];
  if (spec.after !== undefined) {
    const extra = await spec.after();
    lines.push(...extra.lines);
    invariants.push(...extra.invariants);
  }
  for (const l of lines) demo.log(`${l}\n`);
  const ok = invariants.every((i) => i.held);
  reportScenes.push({ title: spec.title, ok, table, lines });
  return { scene: spec.title, ok, rows, total: e.total, invariants, bytes, durationMs: settledAt - startedAt };
}

/** Runs the demo and writes the report; resolves to whether every invariant held. */
export async function runDemo(opts: DemoOptions): Promise<DemoResult> {
  const n = opts.replicas ?? 3;
  const api = await startDevApi({ gate: "on" });
  const demo = new Demo(api, opts);
  const scenes: SceneResult[] = [];
  const reportScenes: ReportScene[] = [];
  const out = opts.out;
  try {
    seedPods(api, { count: opts.pods, namespaces: NAMESPACES, podBytes: 2048 });
    registerFamilyResources(api);
    api.store.create(RING_REF, { apiVersion: `${RING_GROUP}/${RING_VERSION}`, kind: RING_KIND, metadata: { name: RING, namespace: RING_NS }, spec: { handoff: "overlap", slots: 256 } });
    out.write(
      `devapi on ${api.url}: ${opts.pods} pods in ${NAMESPACES.length} namespaces; ShardRing ${RING_NS}/${RING} (256 slots, overlap handoff); ` +
        `controller replicas are client-node informers, each behind its own shardcar proxy following the ring, each with an unsharded twin as the baseline\n`,
    );
    demo.labelSlots = await startDemoLabelSlots(demo.kc, opts.logger);
    demo.startCoordinator();
    demo.startSampling();
    for (const spec of demoScenes(demo, n)) scenes.push(await runScene(demo, spec, reportScenes));
    demo.stopSampling();
    const durationMs = Date.now() - demo.t0;
    const total = scenes.reduce((a, s) => ({ c: a.c + s.bytes.controllers, w: a.w + s.bytes.twins }), { c: 0, w: 0 });
    const bytesHeld = wholeRunBytes(total);
    const all = [...scenes.flatMap((s) => s.invariants), bytesHeld];
    const ok = all.every((i) => i.held);
    const summary = [
      `${opts.pods} pods, ${n} → ${n + 1} → ${n} → ${n + 1} controller replicas in ring mode, shardselector then labels mode, ${scenes.length} scenes in ${(durationMs / 1000).toFixed(1)} s.`,
      `Over the whole run the controllers received ${fmtBytes(total.c)}; their unsharded twins received ${fmtBytes(total.w)} (saved ${total.w === 0 ? "-" : fmtPct(1 - total.c / total.w)}).`,
      `${all.filter((i) => i.held).length} of ${all.length} invariants held.`,
    ];
    const html = renderReport({ title: "shardcar demo: ring mode", generatedAt: new Date().toISOString(), summary, ok, charts: charts(demo), scenes: reportScenes, invariants: all });
    await writeFile(opts.reportPath, html);
    out.write(`\n${ok ? "every invariant held" : "some invariant did NOT hold"}: ${all.filter((i) => i.held).length} of ${all.length} across ${scenes.length} scenes, in ${(durationMs / 1000).toFixed(1)} s\n`);
    out.write(`report: ${opts.reportPath}\n`);
    return { ok, scenes, reportPath: opts.reportPath, durationMs };
  } finally {
    demo.stopSampling();
    for (const r of demo.replicas.values()) {
      r.member.halt();
      await r.stopIncarnation();
    }
    await demo.stopCoordinator();
    await demo.labelSlots?.stop();
    await api.close();
  }
}
