/**
 * Measurement helpers for the micro-benchmarks: stream chunks through a
 * pipeline into a null sink, and take the best of several timed runs.
 */
import { Readable, Writable, type Transform } from "node:stream";
import { pipeline } from "node:stream/promises";

/** A sink that drops everything (strings are not converted to Buffers). */
export function nullSink(onChunk?: () => void): Writable {
  return new Writable({
    objectMode: true,
    decodeStrings: false,
    write(_chunk: unknown, _encoding, callback): void {
      onChunk?.();
      callback();
    },
  });
}

/** Streams `chunks` through `stages` into a null sink, as a proxy would pipe a response. Rejects on a stream error. */
export async function pumpToNull(chunks: readonly Buffer[], stages: readonly Transform[], onChunk?: () => void): Promise<void> {
  await pipeline([Readable.from(chunks), ...stages, nullSink(onChunk)]);
}

/**
 * Throughput in MB/s for an input of `bytes`, per second of this process's
 * CPU time (user + system, GC threads included), not wall time: on a shared
 * machine wall time mostly measures how often we were descheduled, and that
 * would skew a fast candidate against a slow baseline at random.
 *
 * Warms up for half of `minMs` and at least two runs (the scanners' hot loops
 * need a few MB before V8 has optimised them), then runs for at least `minMs`
 * of wall time and `minRuns` runs, and keeps the cheapest run.
 */
export async function bestThroughput(bytes: number, minMs: number, fn: () => Promise<void> | void, minRuns = 3): Promise<number> {
  const warm = performance.now() + minMs / 2;
  let warmRuns = 0;
  do {
    await fn();
    warmRuns++;
  } while (performance.now() < warm || warmRuns < 2);
  let best = Number.POSITIVE_INFINITY;
  let runs = 0;
  const end = performance.now() + minMs;
  do {
    const c0 = process.cpuUsage();
    await fn();
    const c = process.cpuUsage(c0);
    best = Math.min(best, (c.user + c.system) / 1000);
    runs++;
  } while (performance.now() < end || runs < minRuns);
  // CPU time has a resolution of a few microseconds; never divide by zero.
  return bytes / 1e6 / (Math.max(best, 0.001) / 1000);
}

/** Chunks of `size` bytes (views, no copies). */
export function sliceChunks(buf: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let o = 0; o < buf.length; o += size) out.push(buf.subarray(o, Math.min(o + size, buf.length)));
  return out;
}
