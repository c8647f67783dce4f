/**
 * Drives a filter Transform with given chunks and collects what it emits,
 * including how it ended. Shared by the protobuf filter tests.
 */
import type { Transform } from "node:stream";

export interface RunResult {
  /** Everything emitted, concatenated. */
  readonly out: Buffer;
  /** The chunks as emitted. */
  readonly pieces: readonly Buffer[];
  /** The error the stream was destroyed with, if any. */
  readonly error: Error | undefined;
}

/** Writes `chunks` in order, ends the input, and waits for the end or an error. */
export async function runFilter(filter: Transform, chunks: Iterable<Uint8Array>): Promise<RunResult> {
  const pieces: Buffer[] = [];
  filter.on("data", (b: Buffer) => pieces.push(b));
  const ended = new Promise<Error | undefined>((resolve) => {
    filter.once("end", () => resolve(undefined));
    filter.once("error", (e: Error) => resolve(e));
  });
  for (const c of chunks) {
    if (filter.destroyed) break;
    filter.write(c);
  }
  if (!filter.destroyed) filter.end();
  const error = await ended;
  return { out: Buffer.concat(pieces), pieces, error };
}

/** `body` cut into pieces of `size` bytes. */
export function* chunksOf(body: Uint8Array, size: number): Generator<Uint8Array> {
  for (let o = 0; o < body.length; o += size) yield body.subarray(o, Math.min(body.length, o + size));
}

/** `body` cut once, at `at`. */
export function splitAt(body: Uint8Array, at: number): Uint8Array[] {
  return [body.subarray(0, at), body.subarray(at)];
}

/**
 * Writes `chunks` honouring backpressure and discards the output (a null
 * sink, so benchmarks measure the filter and not the collection).
 */
export async function runToNull(filter: Transform, chunks: Iterable<Uint8Array>): Promise<{ bytesOut: number; error: Error | undefined }> {
  let bytesOut = 0;
  filter.on("data", (b: Buffer) => {
    bytesOut += b.length;
  });
  const ended = new Promise<Error | undefined>((resolve) => {
    filter.once("end", () => resolve(undefined));
    filter.once("error", (e: Error) => resolve(e));
  });
  for (const c of chunks) {
    if (filter.destroyed) break;
    if (!filter.write(c)) await new Promise((r) => filter.once("drain", r));
  }
  if (!filter.destroyed) filter.end();
  const error = await ended;
  return { bytesOut, error };
}
