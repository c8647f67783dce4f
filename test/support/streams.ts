/**
 * Drives a Transform with chosen chunks and collects everything it did, so
 * tests can assert on output bytes, errors and the order of pushes.
 */
import type { Transform } from "node:stream";

export interface TransformRun {
  /** Everything pushed, concatenated. */
  readonly out: Buffer;
  /** Each push, in order. */
  readonly pushes: readonly Buffer[];
  /** The error the stream was destroyed with, if any. */
  readonly error: Error | undefined;
  /** Whether the readable side ended normally (`'end'`). */
  readonly ended: boolean;
  /** Custom events seen, by name, in order (e.g. `initial-events-end`). */
  readonly events: readonly string[];
}

/**
 * Writes `chunks` one by one (waiting for each write's callback, so input
 * arrives in exactly these pieces), ends the input, and resolves once the
 * stream has ended, errored or closed. Never rejects.
 */
export function runTransform(stream: Transform, chunks: Iterable<Buffer>, watchEvents: readonly string[] = []): Promise<TransformRun> {
  const pushes: Buffer[] = [];
  const events: string[] = [];
  let error: Error | undefined;
  let ended = false;
  for (const name of watchEvents) stream.on(name, () => events.push(name));
  stream.on("data", (b: Buffer) => pushes.push(b));
  const done = new Promise<void>((resolve) => {
    stream.on("end", () => {
      ended = true;
      resolve();
    });
    stream.on("error", (e: Error) => {
      error = e;
      resolve();
    });
    stream.on("close", () => resolve());
  });
  const feed = async (): Promise<void> => {
    for (const c of chunks) {
      if (stream.destroyed || stream.writableEnded) return;
      await new Promise<void>((resolve) => stream.write(c, () => resolve()));
    }
    if (!stream.destroyed && !stream.writableEnded) stream.end();
  };
  void feed();
  return done.then(() => ({ out: Buffer.concat(pushes), pushes, error, ended, events }));
}

/** `buf` cut into pieces of `size` bytes. */
export function chunksOf(buf: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let o = 0; o < buf.length; o += size) out.push(buf.subarray(o, Math.min(o + size, buf.length)));
  return out;
}

/** `buf` cut in two at `at`. */
export function splitAt(buf: Buffer, at: number): Buffer[] {
  return [buf.subarray(0, at), buf.subarray(at)];
}
