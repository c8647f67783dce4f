#!/usr/bin/env node
// The process edge: argv, environment, signals and the exit code. Everything
// else lives in main.ts so tests can call it without a child process.
import { applySidecarV8Flags } from "../sidecar-runtime.ts";

// Before anything else loads: the sidecar's startup is what these flags are for.
if (process.argv[2] === "proxy") applySidecarV8Flags();
const { main } = await import("./main.ts");

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
