/**
 * The CLI in-process, as the tests run it: `captureIo` gives a command its
 * streams and collects what it writes; `runCli` runs one command to its end.
 */
import { PassThrough } from "node:stream";
import { main } from "../../src/cli/main.ts";

export interface CapturedIo {
  readonly io: { stdout: PassThrough; stderr: PassThrough; env: NodeJS.ProcessEnv; signal: AbortSignal };
  out(): string;
  err(): string;
}

export function captureIo(signal = new AbortController().signal, env: NodeJS.ProcessEnv = {}): CapturedIo {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (d: Buffer) => (out += d.toString()));
  stderr.on("data", (d: Buffer) => (err += d.toString()));
  return { io: { stdout, stderr, env, signal }, out: () => out, err: () => err };
}

export async function runCli(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; out: string; err: string }> {
  const c = captureIo(new AbortController().signal, env);
  const code = await main(argv, c.io);
  return { code, out: c.out(), err: c.err() };
}
