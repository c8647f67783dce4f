/**
 * The JSON WATCH filter, measured next to its baseline in one run:
 *
 * - P4: filtering a stream of ~2 KB pod events (about half in range, synthetic
 *   bookmarks on) vs the usual Node approach: an `ndjson` line splitter with
 *   JSON.parse per line, a filter on the parsed object, and `ndjson` stringify
 *   back to lines (target >= 4x).
 *
 * Input: realistic compact pod events from test/support/synthetic-pods, fed in
 * 64 KiB chunks; output to a null sink. Throughput is per second of CPU time,
 * candidate and baseline in alternating rounds (bench/lib/compare.ts).
 *
 * Usage: node bench/micro/json-watch-filter.bench.ts [--quick]
 */
import { createRequire } from "node:module";
import { Transform, type TransformCallback } from "node:stream";
import { createJsonWatchFilter } from "../../src/proxy/scan/json-watch-filter.ts";
import { HashMatcher } from "../../src/shard/range.ts";
import { parseSelector } from "../../src/shard/selector.ts";
import { pumpToNull, sliceChunks } from "../../test/support/measure.ts";
import { syntheticWatchStream } from "../../test/support/synthetic-pods.ts";
import type { Bench, BenchResult } from "../lib/bench.ts";
import { compare, spread } from "../lib/compare.ts";
import { candidateMatcher } from "../lib/handicap.ts";

// ndjson ships no types; these are the two entry points the baseline uses.
const load = createRequire(import.meta.url);
const ndjson = load("ndjson") as { parse(opts?: { strict?: boolean }): Transform; stringify(): Transform };

const LOW = parseSelector("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')");
const CHUNK = 64 * 1024;
const MB = 1e6;

interface Event {
  type?: string;
  object?: { metadata?: { uid?: string } };
}

/** The baseline's filter stage, on parsed events (object mode). */
function objectFilter(matcher: HashMatcher): Transform {
  return new Transform({
    objectMode: true,
    transform(ev: Event, _encoding: BufferEncoding, callback: TransformCallback): void {
      const keep = ev.type === "BOOKMARK" || ev.type === "ERROR" || matcher.matchesString(ev.object?.metadata?.uid ?? "");
      callback(null, keep ? ev : undefined);
    },
  });
}

export const bench: Bench = async ({ quick }) => {
  const bytes = quick ? 10 * MB : 100 * MB;
  const roundMs = quick ? 150 : 1000;
  const matcher = new HashMatcher(LOW.ranges);
  const filterMatcher = candidateMatcher(LOW.ranges);
  const stream = syntheticWatchStream(bytes, 3, { small: true });
  const chunks = sliceChunks(stream, CHUNK);
  const events = stream.toString("latin1").split("\n").length - 1;

  let passed = 0;
  let bookmarks = 0;
  const c = await compare(
    async () => {
      const f = createJsonWatchFilter({ matcher: filterMatcher, key: "uid", allowBookmarks: true, initialEvents: false });
      await pumpToNull(chunks, [f]);
      if (f.stats.errors > 0) throw new Error("the filter failed on valid input");
      passed = f.stats.passed;
      bookmarks = f.stats.syntheticBookmarks;
    },
    () => pumpToNull(chunks, [ndjson.parse({ strict: true }), objectFilter(matcher), ndjson.stringify()]),
    { roundMs, rounds: quick ? 5 : 7 },
  );
  const candidate = stream.length / MB / (c.candidateMs / 1000);
  const baseline = stream.length / MB / (c.baselineMs / 1000);

  const round = (n: number): number => Math.round(n * 10) / 10;
  const result: BenchResult = {
    id: "P4",
    name: "JSON WATCH filter vs ndjson split+JSON.parse+filter+stringify",
    candidate: { label: "createJsonWatchFilter", value: round(candidate), unit: "MB/s" },
    baseline: { label: "ndjson.parse+filter+ndjson.stringify", value: round(baseline), unit: "MB/s" },
    ratio: c.ratio,
    target: 4,
    extra: {
      ...spread(c),
      inputMB: round(stream.length / MB),
      events,
      avgEventBytes: Math.round(stream.length / events),
      passed,
      syntheticBookmarks: bookmarks,
      candidateEventsPerSec: Math.round((candidate * MB) / (stream.length / events)),
    },
  };
  return [result];
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
