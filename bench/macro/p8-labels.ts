/**
 * P8, labels mode where the gate is off: N = 1, 2, 4, 8 controller replicas
 * (real client-node pod informers, each in its own process) behind their
 * own `shardcar proxy --filter labels --ring bench --shards i/N`, against a
 * devapi process with the ShardedListAndWatch gate off whose pods all carry
 * the slot label `shard.shardcar.io/bench` (the slot of their uid, as the
 * webhook writes it). Each proxy asks for `… in (<its slots>)`, which the
 * server honours whatever its gate. Next to it, in the same run, the same
 * replicas in shardselector mode with the gate on (what P5 measures), and
 * once with no proxy at all: one controller listing and watching
 * everything, the baseline `total`. The machinery is P5's (runConfig in
 * bench/macro/p5-scale.ts), so the figures mean the same.
 *
 * Target (issue 13): upstream bytes per proxy ≤ 1.1·total/N with the gate
 * off; as a ratio, total/bytes ≥ N/1.1. Today's shardselector mode with
 * the gate off reads 1.0× of total (P5, "the price of fallback").
 *
 * Usage: node bench/macro/p8-labels.ts [--quick]
 *   P8_PODS, P8_NS ("1,2,4,8"), P8_CHURN override the sizes.
 */
import { slotLabelKey } from "../../src/shard/slots.ts";
import type { Bench, BenchResult } from "../lib/bench.ts";
import { LABELS_RING, maxOf, MB, mean, r3, runConfig, SLACK, withScaleDevapi, type ReplicaFigures } from "./p5-scale.ts";

const envStr = (name: string): string | undefined => {
  const v = process.env[name];
  return v === undefined || v === "" ? undefined : v;
};

export const bench: Bench = async ({ quick }) => {
  const pods = Number(envStr("P8_PODS") ?? (quick ? 2_000 : 20_000));
  const ns = (envStr("P8_NS") ?? (quick ? "4" : "1,2,4,8")).split(",").map(Number);
  const churn = { count: Number(envStr("P8_CHURN") ?? (quick ? 100 : 1_000)), rate: 200, seed: 1 };
  return withScaleDevapi("p8", ["--pods", String(pods), "--slot-label", slotLabelKey(LABELS_RING), "--slot-count", "256"], async ({ devapi, url, uids, tls }) => {
    // total: what one controller receives when it lists and watches everything (N does not change it).
    const none = await runConfig(1, "none", devapi, url, uids, tls, churn);
    const total = mean(none.map((f) => f.bytesToController));
    const results: BenchResult[] = [];
    for (const n of ns) {
      for (const mode of ["labels", "on"] as const) {
        const f: ReplicaFigures[] = await runConfig(n, mode, devapi, url, uids, tls, { ...churn, seed: churn.seed + n });
        const exact = f.every((x) => x.objects === x.expected && x.outOfRange === 0);
        const up = maxOf(f.map((x) => x.upstreamBytes));
        const what = mode === "labels" ? "labels mode, gate off" : "shardselector mode, gate on";
        results.push({
          id: "P8",
          name: `upstream bytes per proxy, ${what}, N=${n}`,
          candidate: { label: "most one proxy read from devapi", value: r3(up / MB), unit: "MB" },
          baseline: { label: "one controller without proxy (total)", value: r3(total / MB), unit: "MB" },
          ratio: total / up,
          target: n / SLACK,
          extra: {
            metric: "upstream-bytes",
            filter: mode === "labels" ? "labels" : "shardselector",
            gate: mode === "labels" ? "off" : "on",
            n,
            pods,
            churn: churn.count,
            exact: exact ? "yes" : "no",
            meanMB: r3(mean(f.map((x) => x.upstreamBytes)) / MB),
            toControllerMaxMB: r3(maxOf(f.map((x) => x.bytesToController)) / MB),
            evenShareMB: r3(total / n / MB),
          },
        });
        if (!exact) throw new Error(`N=${n} ${what}: a cache does not hold exactly its shard`);
      }
    }
    return results;
  });
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
