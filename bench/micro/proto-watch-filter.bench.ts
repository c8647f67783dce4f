/**
 * The protobuf WATCH filter next to its baseline in one run (P4's protobuf
 * counterpart): a stream of realistic pod events (2-6 KB each, encoded with
 * protobufjs from the upstream .proto), half of them in range, fed in
 * 64 KiB chunks, output to a null sink.
 *
 * Baseline: what a proxy without a wire scanner would do per frame: split
 * the frames, decode WatchEvent, the envelope and the Pod with protobufjs,
 * test the uid, and encode the passing ones back. CPU time, candidate and
 * baseline in alternating rounds (bench/lib/compare.ts).
 *
 * Usage: node bench/micro/proto-watch-filter.bench.ts [--quick]
 */
import { createProtoWatchFilter } from "../../src/proxy/scan/proto-watch-filter.ts";
import { HashMatcher } from "../../src/shard/range.ts";
import { parseSelector } from "../../src/shard/selector.ts";
import { decodeEnvelope, encodeEnvelope, frame, loadK8sProto, splitFrames } from "../../test/support/proto/k8s.ts";
import { podWatchFrames } from "../../test/support/proto/pods.ts";
import { chunksOf, runToNull } from "../../test/support/proto/run.ts";
import type { Bench, BenchResult } from "../lib/bench.ts";
import { compare, spread } from "../lib/compare.ts";
import { candidateMatcher } from "../lib/handicap.ts";

const LOW = parseSelector("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')");
const CHUNK = 64 * 1024;

export const bench: Bench = async ({ quick }) => {
  const pb = loadK8sProto();
  const events = quick ? 2_000 : 20_000;
  const roundMs = quick ? 150 : 1000;
  const matcher = new HashMatcher(LOW.ranges);
  const filterMatcher = candidateMatcher(LOW.ranges);
  const stream = Buffer.concat(podWatchFrames(pb, events));
  const chunks = [...chunksOf(stream, CHUNK)];

  let passed = 0;
  let bookmarks = 0;
  const Pod = pb.type("Pod");
  const c = await compare(async () => {
    const f = createProtoWatchFilter({ matcher: filterMatcher, key: "uid", allowBookmarks: true, initialEvents: false });
    const r = await runToNull(f, chunks);
    if (r.error !== undefined || f.stats.errors > 0) throw new Error("watch filter failed");
    passed = f.stats.passed;
    bookmarks = f.stats.syntheticBookmarks;
  }, () => {
    for (const body of splitFrames(Buffer.concat(chunks))) {
      const ev = pb.WatchEvent.decode(body) as unknown as { type: string; object: { raw: Uint8Array } };
      const env = decodeEnvelope(pb, ev.object.raw);
      const pod = Pod.decode(env.raw) as unknown as { metadata?: { uid?: string } };
      if (!matcher.matchesString(pod.metadata?.uid ?? "")) continue;
      const raw = encodeEnvelope(pb, env.apiVersion, env.kind, Pod.encode(pod).finish());
      frame(pb.WatchEvent.encode(pb.WatchEvent.create({ type: ev.type, object: { raw } })).finish());
    }
  }, { roundMs, rounds: quick ? 5 : 7 });
  const candidate = Math.round(events / (c.candidateMs / 1000));
  const baseline = Math.round(events / (c.baselineMs / 1000));

  const result: BenchResult = {
    id: "P4",
    name: "protobuf WATCH filter vs protobufjs frame decode+filter+encode",
    candidate: { label: "createProtoWatchFilter", value: candidate, unit: "events/s" },
    baseline: { label: "protobufjs decode+filter+encode", value: baseline, unit: "events/s" },
    ratio: c.ratio,
    target: 4,
    extra: {
      ...spread(c),
      events,
      meanEventBytes: Math.round(stream.length / events),
      candidateMBps: Math.round(((candidate * stream.length) / events / 1e6) * 10) / 10,
      passed,
      syntheticBookmarks: bookmarks,
    },
  };
  return [result];
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
