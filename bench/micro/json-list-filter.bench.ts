/**
 * The JSON LIST filter, measured next to its baselines in one run:
 *
 * - P3: filter path (no shardInfo; about half the pods kept) on a ~200 MB
 *   compact PodList (quick: ~20 MB) vs JSON.parse + filter + JSON.stringify
 *   of the same body (target >= 4x), and the peak RSS growth of a filter run
 *   (target <= 64 MiB), measured in a child process so that nothing else the
 *   benchmark allocates counts;
 * - P2: fast path (shardInfo confirmed) vs a raw byte pipe (target >= 0.8x).
 *
 * Input: realistic compact pods (2–6 KB) from test/support/synthetic-pods,
 * fed in 64 KiB chunks as a socket delivers them; output to a null sink.
 *
 * Usage: node bench/micro/json-list-filter.bench.ts [--quick]
 */
import { execFile } from "node:child_process";
import { PassThrough, Transform, type TransformCallback } from "node:stream";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { createJsonListFilter } from "../../src/proxy/scan/json-list-filter.ts";
import { HashMatcher } from "../../src/shard/range.ts";
import { formatSelector, parseSelector } from "../../src/shard/selector.ts";
import { pumpToNull, sliceChunks } from "../../test/support/measure.ts";
import { syntheticPodList } from "../../test/support/synthetic-pods.ts";
import type { Bench, BenchResult } from "../lib/bench.ts";
import { compare, spread } from "../lib/compare.ts";
import { candidateMatcher } from "../lib/handicap.ts";

const LOW = parseSelector("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')");
const SENT = formatSelector(LOW);
/** What a socket read typically hands over. */
const CHUNK = 64 * 1024;
/** Data sizes in MB (10^6 bytes); memory in MiB (2^20 bytes). */
const MB = 1e6;
const MiB = 1024 * 1024;

interface Parsed {
  metadata?: { remainingItemCount?: number };
  items: Array<{ metadata?: { uid?: string } }>;
}

/** The baseline: what a proxy without a scanner does. Collect, parse, filter, re-serialise. */
class ParseFilterStringify extends Transform {
  readonly #parts: Buffer[] = [];
  readonly #matcher: HashMatcher;

  constructor(matcher: HashMatcher) {
    super();
    this.#matcher = matcher;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#parts.push(chunk);
    callback();
  }

  override _flush(callback: TransformCallback): void {
    const list = JSON.parse(Buffer.concat(this.#parts).toString("utf8")) as Parsed;
    list.items = list.items.filter((it) => this.#matcher.matchesString(it.metadata?.uid ?? ""));
    if (list.metadata !== undefined) delete list.metadata.remainingItemCount;
    callback(null, Buffer.from(JSON.stringify(list)));
  }
}

/** Child mode: RSS growth of one streaming filter run over a freshly built body. Prints JSON. */
async function rssChild(bytes: number, which: "filter" | "baseline"): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  const body = syntheticPodList(bytes, { seed: 7 });
  const chunks = sliceChunks(body, CHUNK);
  const matcher = new HashMatcher(LOW.ranges);
  gc?.();
  gc?.();
  const before = process.memoryUsage.rss();
  let peak = before;
  const sample = (): void => {
    const rss = process.memoryUsage.rss();
    if (rss > peak) peak = rss;
  };
  const timer = setInterval(sample, 5);
  const stage = which === "filter" ? createJsonListFilter({ matcher, key: "uid", sentSelector: SENT }) : new ParseFilterStringify(matcher);
  // Sampled on every input chunk too: the filter never yields to the timer for long.
  const tap = new PassThrough();
  tap.on("data", sample);
  await pumpToNull(chunks, [tap, stage], sample);
  sample();
  clearInterval(timer);
  process.stdout.write(JSON.stringify({ growthMiB: (peak - before) / MiB, inputMB: body.length / MB }));
}

async function measureRss(bytes: number, which: "filter" | "baseline"): Promise<{ growthMiB: number; inputMB: number }> {
  const self = fileURLToPath(import.meta.url);
  const { stdout } = await promisify(execFile)(process.execPath, ["--expose-gc", self, "--rss-child", String(bytes), which], { maxBuffer: 1 << 20 });
  return JSON.parse(stdout) as { growthMiB: number; inputMB: number };
}

export const bench: Bench = async ({ quick }) => {
  const bytes = quick ? 20 * MB : 200 * MB;
  const roundMs = quick ? 150 : 1000;
  const rounds = quick ? 5 : 7;
  const matcher = new HashMatcher(LOW.ranges);
  const filterMatcher = candidateMatcher(LOW.ranges);
  const unfiltered = syntheticPodList(bytes, { seed: 7 });
  const chunks = sliceChunks(unfiltered, CHUNK);

  let kept = 0;
  let items = 0;
  const filterPath = await compare(
    async () => {
      const f = createJsonListFilter({ matcher: filterMatcher, key: "uid", sentSelector: SENT });
      await pumpToNull(chunks, [f]);
      if (f.stats.path !== "filter") throw new Error("expected the filter path");
      kept = f.stats.kept;
      items = f.stats.items;
    },
    () => pumpToNull(chunks, [new ParseFilterStringify(matcher)]),
    { roundMs, rounds },
  );
  const mbps = (bytes: number, ms: number): number => bytes / MB / (ms / 1000);

  // Fast path: same pods, with the server's confirmation in the list metadata.
  const confirmed = syntheticPodList(quick ? 20 * MB : 100 * MB, { seed: 7, selector: SENT });
  const confirmedChunks = sliceChunks(confirmed, CHUNK);
  const fastPath = await compare(
    async () => {
      const f = createJsonListFilter({ matcher: filterMatcher, key: "uid", sentSelector: SENT });
      await pumpToNull(confirmedChunks, [f]);
      if (f.stats.path !== "fast") throw new Error("fast path not taken");
    },
    () => pumpToNull(confirmedChunks, [new PassThrough()]),
    { roundMs, rounds, runsPerRound: 5 },
  );

  const rss = await measureRss(bytes, "filter");
  const baselineRss = await measureRss(bytes, "baseline");

  const round = (n: number): number => Math.round(n * 10) / 10;
  const results: BenchResult[] = [
    {
      id: "P3",
      name: "JSON LIST filter path vs JSON.parse+filter+JSON.stringify",
      candidate: { label: "createJsonListFilter", value: round(mbps(unfiltered.length, filterPath.candidateMs)), unit: "MB/s" },
      baseline: { label: "JSON.parse+filter+JSON.stringify", value: round(mbps(unfiltered.length, filterPath.baselineMs)), unit: "MB/s" },
      ratio: filterPath.ratio,
      target: 4,
      extra: { inputMB: round(unfiltered.length / MB), items, kept, ...spread(filterPath) },
    },
    {
      id: "P3-rss",
      name: "JSON LIST filter path: peak RSS growth while filtering",
      candidate: { label: "createJsonListFilter", value: round(rss.growthMiB), unit: "MiB" },
      baseline: { label: "JSON.parse+filter+JSON.stringify", value: round(baselineRss.growthMiB), unit: "MiB" },
      ratio: baselineRss.growthMiB / Math.max(rss.growthMiB, 0.1),
      extra: { inputMB: round(rss.inputMB), targetMaxMiB: 64, withinTarget: rss.growthMiB <= 64 ? "yes" : "no" },
    },
    {
      id: "P2",
      name: "JSON LIST fast path (shardInfo confirmed) vs a raw byte pipe",
      candidate: { label: "createJsonListFilter (fast path)", value: round(mbps(confirmed.length, fastPath.candidateMs)), unit: "MB/s" },
      baseline: { label: "PassThrough", value: round(mbps(confirmed.length, fastPath.baselineMs)), unit: "MB/s" },
      ratio: fastPath.ratio,
      target: 0.8,
      extra: { inputMB: round(confirmed.length / MB), ...spread(fastPath) },
    },
  ];
  return results;
};

if (import.meta.main) {
  const at = process.argv.indexOf("--rss-child");
  if (at >= 0) {
    await rssChild(Number(process.argv[at + 1]), process.argv[at + 2] === "baseline" ? "baseline" : "filter");
  } else {
    const results = await bench({ quick: process.argv.includes("--quick") });
    console.log(JSON.stringify(results, null, 2));
  }
}
