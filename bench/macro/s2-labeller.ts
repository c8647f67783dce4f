/**
 * S2, the labeller's first backfill: N unlabelled ConfigMaps on the real
 * apiserver kit (gate off: labels mode is for the clusters without it), and
 * the manager's labeller (`src/ring/labeller.ts`, in this process, exactly
 * as `shardcar manager` wires it) labelling them for a labels-mode ring.
 *
 * Three passes over the same objects, each for its own ring (so its own
 * slot label, and every object starts unlabelled for it):
 * - **fixed 20/s**, the labeller before its rate adapted (`--label-rate 20
 *   --label-rate-min 20`): run for a while, its PATCH rate measured and the
 *   time to label N projected from it (hours at 200,000; not worth waiting
 *   for). The baseline.
 * - **default** (`--label-rate 500`, the default ceiling; the floor, where
 *   it starts, 20/s): the time from the labeller starting (its metadata list
 *   included) to `Labelled=True`.
 * - **raised** (`--label-rate 2000`): the same.
 * For each, the kit's CPU (apiserver + etcd) while it ran, as cores and per
 * PATCH, the target rate reached, the achieved rate reached (PATCHes
 * answered over 10 s) and the halvings.
 *
 * Target: the default (and the raised) ceiling label N at least 10× faster
 * than the fixed 20/s.
 *
 * Usage: node bench/macro/s2-labeller.ts [--quick]; S2_OBJECTS overrides N.
 */
import { KubeConfig } from "@kubernetes/client-node";
import { Registry } from "prom-client";
import { ApiClient, kubeConfigConnection } from "../../src/kube/client.ts";
import { silentLogger } from "../../src/log.ts";
import { systemClock } from "../../src/ring/clock.ts";
import type { LabelSlotConfig } from "../../src/ring/label-slots.ts";
import { START_RATE } from "../../src/ring/label-rate.ts";
import { DEFAULT_LABEL_RATE, Labeller, type LabelSlotSource } from "../../src/ring/labeller.ts";
import type { LabellingPolicy } from "../../src/ring/labelling.ts";
import { slotLabelKey } from "../../src/shard/slots.ts";
import type { Bench, BenchResult } from "../lib/bench.ts";
import { cpuMsOf, until } from "../lib/proc.ts";
import { seedConfigMaps, startRealApi, stopRealApi, type RealApi } from "../lib/realapi.ts";

const NS = "s2";
const SLOTS = 256;
const r1 = (x: number): number => Math.round(x * 10) / 10;

const kitCpuMs = (pids: readonly number[]): number => pids.reduce((n, p) => n + cpuMsOf(p), 0);

function clientOf(api: RealApi): ApiClient {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "kit", server: api.url, caData: Buffer.from(api.caPem).toString("base64"), skipTLSVerify: false }],
    users: [{ name: "manager", token: api.token }],
    contexts: [{ name: "kit", cluster: "kit", user: "manager" }],
    currentContext: "kit",
  });
  return new ApiClient(kubeConfigConnection(kc), (ms, fn) => systemClock.timer(ms, fn));
}

function sourceFor(ring: string): LabelSlotSource {
  const config: LabelSlotConfig = { rings: [{ namespace: NS, name: ring, label: slotLabelKey(ring), slotCount: SLOTS, resources: [{ resource: "configmaps", group: "", key: "uid" }] }], problems: [] };
  return { current: () => config, subscribe: () => () => {} };
}

interface Pass {
  readonly seconds: number;
  readonly patches: number;
  readonly labelled: boolean;
  readonly kitCores: number;
  readonly kitCpuMsPerPatch: number;
  readonly labellerCpuMsPerPatch: number;
  /** The highest target (`shardcar_labeller_rate_target`). */
  readonly peakRate: number;
  /** The highest achieved rate (`shardcar_labeller_rate`: PATCHes answered over 10 s). */
  readonly peakAchievedRate: number;
  readonly backoffs: number;
  /** PATCHes per second from the first to the last seen, the list excluded. */
  readonly patchRate: number;
}

async function metric(registry: Registry, name: string): Promise<number> {
  const m = await registry.getSingleMetric(name)?.get();
  return (m?.values ?? []).filter((v) => !("outcome" in v.labels) || v.labels["outcome"] === "labelled").reduce((n, v) => n + v.value, 0);
}

/** Runs one labeller for `ring` until `Labelled=True` or `limitMs`. */
async function pass(api: RealApi, pids: readonly number[], ring: string, policy: Partial<LabellingPolicy>, limitMs: number): Promise<Pass> {
  const registry = new Registry();
  const labeller = new Labeller({ api: clientOf(api), source: sourceFor(ring), registry, reportIntervalMs: 250, log: silentLogger(), policy });
  const abort = new AbortController();
  const kit0 = kitCpuMs(pids);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const running = labeller.run(abort.signal, () => {});
  let peakRate = 0;
  let peakAchievedRate = 0;
  let first: { t: number; n: number } | undefined;
  let last = { t: t0, n: 0 };
  const labelled = await until(async () => {
    const n = await metric(registry, "shardcar_labeller_patches_total");
    const now = performance.now();
    if (n > 0 && first === undefined) first = { t: now, n };
    last = { t: now, n };
    peakRate = Math.max(peakRate, await metric(registry, "shardcar_labeller_rate_target"));
    peakAchievedRate = Math.max(peakAchievedRate, await metric(registry, "shardcar_labeller_rate"));
    return labeller.status(NS, ring)?.conditions[0]?.status === "True";
  }, limitMs, 100);
  const seconds = (performance.now() - t0) / 1000;
  const kitMs = kitCpuMs(pids) - kit0;
  const cpu = process.cpuUsage(cpu0);
  const backoffs = await metric(registry, "shardcar_labeller_rate_backoffs_total");
  abort.abort();
  await running;
  const patches = await metric(registry, "shardcar_labeller_patches_total");
  const span = first === undefined ? 0 : (last.t - first.t) / 1000;
  return {
    seconds,
    patches,
    labelled,
    kitCores: kitMs / 1000 / seconds,
    kitCpuMsPerPatch: kitMs / Math.max(1, patches),
    labellerCpuMsPerPatch: (cpu.user + cpu.system) / 1000 / Math.max(1, patches),
    peakRate,
    peakAchievedRate,
    backoffs,
    patchRate: first === undefined || span === 0 ? 0 : (last.n - first.n) / span,
  };
}

export const bench: Bench = async ({ quick }) => {
  const objects = Number(process.env["S2_OBJECTS"] ?? (quick ? 5_000 : 200_000));
  const api = await startRealApi("off");
  try {
    const pids = [api.pids.server, api.pids.etcd];
    const seed0 = performance.now();
    await seedConfigMaps(api, NS, 0, objects, 400, 32);
    const seedS = (performance.now() - seed0) / 1000;
    const fixedRate = { minRatePerSecond: START_RATE, maxRatePerSecond: START_RATE };
    const fixed = await pass(api, pids, "s2-fixed", fixedRate, quick ? 12_000 : 30_000);
    if (fixed.patchRate <= 0) throw new Error("the fixed-rate labeller sent no PATCH");
    const projected = objects / fixed.patchRate;
    const limitMs = quick ? 180_000 : 1_800_000;
    const configs = [
      { name: "default", flags: `--label-rate ${DEFAULT_LABEL_RATE}`, policy: {}, },
      { name: "raised", flags: "--label-rate 2000", policy: { maxRatePerSecond: 2_000 }, },
    ];
    const results: BenchResult[] = [];
    for (const c of configs) {
      const p = await pass(api, pids, `s2-${c.name}`, c.policy, limitMs);
      if (!p.labelled) throw new Error(`${c.name}: not Labelled=True after ${limitMs / 1000} s (${p.patches} of ${objects} PATCHed)`);
      results.push({
        id: "S2",
        name: `first backfill of ${objects.toLocaleString("en-US")} objects to Labelled=True, ${c.name} rate (${c.flags})`,
        candidate: { label: `${c.name}: labeller start (metadata list included) to Labelled=True`, value: r1(p.seconds), unit: "s" },
        baseline: { label: `fixed ${START_RATE}/s, projected from its measured ${r1(fixed.patchRate)} PATCH/s`, value: r1(projected), unit: "s" },
        ratio: projected / p.seconds,
        target: 10,
        extra: {
          config: c.name,
          objects,
          patches: p.patches,
          minutes: r1(p.seconds / 60),
          fixedHours: r1(projected / 3600),
          meanPatchPerS: Math.round(p.patches / p.seconds),
          peakRate: Math.round(p.peakRate),
          peakAchievedRate: Math.round(p.peakAchievedRate),
          backoffs: p.backoffs,
          kitCores: Math.round(p.kitCores * 100) / 100,
          kitCpuMsPerPatch: Math.round(p.kitCpuMsPerPatch * 100) / 100,
          labellerCpuMsPerPatch: Math.round(p.labellerCpuMsPerPatch * 100) / 100,
          fixedKitCores: Math.round(fixed.kitCores * 100) / 100,
          seedS: r1(seedS),
        },
      });
    }
    return results;
  } finally {
    await stopRealApi(api, true);
  }
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
