/**
 * The protobuf LIST filter, measured next to its baselines in one run:
 *
 * - filter path (server ignored the selector, half the pods kept) vs
 *   protobufjs decode + filter + re-encode of the same body;
 * - fast path (shardInfo confirmed) vs a raw byte pipe (P2: >= 0.8x).
 *
 * Input: realistic pods (2-6 KB) encoded with protobufjs from the upstream
 * .proto, fed in 64 KiB chunks as a socket would deliver them; output goes
 * to a null sink. CPU time, candidate and baseline in alternating rounds
 * (bench/lib/compare.ts).
 *
 * Usage: node bench/micro/proto-list-filter.bench.ts [--quick]
 */
import { PassThrough } from "node:stream";
import { createProtoListFilter } from "../../src/proxy/scan/proto-list-filter.ts";
import { HashMatcher } from "../../src/shard/range.ts";
import { formatSelector, parseSelector } from "../../src/shard/selector.ts";
import { decodeEnvelope, encodeEnvelope, loadK8sProto } from "../../test/support/proto/k8s.ts";
import { podListBody } from "../../test/support/proto/pods.ts";
import { chunksOf, runToNull } from "../../test/support/proto/run.ts";
import type { Bench, BenchResult } from "../lib/bench.ts";
import { compare, spread } from "../lib/compare.ts";
import { candidateMatcher } from "../lib/handicap.ts";

const LOW = parseSelector("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')");
const SENT = formatSelector(LOW);
/** What a kernel socket read typically hands over. */
const CHUNK = 64 * 1024;

export const bench: Bench = async ({ quick }) => {
  const pb = loadK8sProto();
  const pods = quick ? 2_000 : 20_000;
  const roundMs = quick ? 150 : 1000;
  const rounds = quick ? 5 : 7;
  const matcher = new HashMatcher(LOW.ranges);
  const filterMatcher = candidateMatcher(LOW.ranges);
  const unfiltered = podListBody(pb, pods, { continue: "eyJydiI6MX0", remainingItemCount: 1234 });
  const confirmed = podListBody(pb, pods / 2, { shardSelector: SENT });
  const chunks = [...chunksOf(unfiltered, CHUNK)];
  const confirmedChunks = [...chunksOf(confirmed, CHUNK)];

  let kept = 0;
  const PodList = pb.type("PodList");
  const filterPath = await compare(async () => {
    const f = createProtoListFilter({ matcher: filterMatcher, key: "uid", sentSelector: SENT });
    const r = await runToNull(f, chunks);
    if (r.error !== undefined) throw r.error;
    kept = f.stats.kept;
  }, () => {
    // What a proxy without a wire scanner would do: decode it all, filter, encode.
    const body = Buffer.concat(chunks);
    const env = decodeEnvelope(pb, body);
    const list = PodList.decode(env.raw) as unknown as { metadata?: { remainingItemCount?: unknown }; items: Array<{ metadata?: { uid?: string } }> };
    list.items = list.items.filter((it) => matcher.matchesString(it.metadata?.uid ?? ""));
    if (list.metadata !== undefined) delete list.metadata.remainingItemCount;
    const raw = PodList.encode(list).finish();
    encodeEnvelope(pb, env.apiVersion, env.kind, raw);
  }, { roundMs, rounds });

  const fastPath = await compare(
    async () => {
      const f = createProtoListFilter({ matcher: filterMatcher, key: "uid", sentSelector: SENT });
      const r = await runToNull(f, confirmedChunks);
      if (r.error !== undefined || f.stats.path !== "fast") throw new Error("fast path not taken");
    },
    async () => {
      const r = await runToNull(new PassThrough(), confirmedChunks);
      if (r.error !== undefined) throw r.error;
    },
    { roundMs, rounds, runsPerRound: 5 },
  );
  const mbps = (bytes: number, ms: number): number => Math.round((bytes / 1e6 / (ms / 1000)) * 10) / 10;

  const mb = (n: number): number => Math.round((n / 1e6) * 10) / 10;
  const results: BenchResult[] = [
    {
      id: "P3",
      name: "protobuf LIST filter path vs protobufjs decode+filter+encode",
      candidate: { label: "createProtoListFilter", value: mbps(unfiltered.length, filterPath.candidateMs), unit: "MB/s" },
      baseline: { label: "protobufjs decode+filter+encode", value: mbps(unfiltered.length, filterPath.baselineMs), unit: "MB/s" },
      ratio: filterPath.ratio,
      extra: { inputMB: mb(unfiltered.length), pods, kept, ...spread(filterPath) },
    },
    {
      id: "P2",
      name: "protobuf LIST fast path (shardInfo confirmed) vs a raw byte pipe",
      candidate: { label: "createProtoListFilter (fast path)", value: mbps(confirmed.length, fastPath.candidateMs), unit: "MB/s" },
      baseline: { label: "PassThrough", value: mbps(confirmed.length, fastPath.baselineMs), unit: "MB/s" },
      ratio: fastPath.ratio,
      target: 0.8,
      extra: { inputMB: mb(confirmed.length), ...spread(fastPath) },
    },
  ];
  return results;
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
