#!/usr/bin/env node
// The process edge: argv, environment, signals and the exit code. Everything
// else lives in main.ts so tests can call it without a child process.
import { main } from "./main.ts";

const controller = new AbortController();
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => controller.abort(new Error(`received ${sig}`)));
}
const code = await main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  signal: controller.signal,
});
process.exitCode = code;
