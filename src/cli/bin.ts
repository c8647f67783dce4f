#!/usr/bin/env node
// The process edge: argv, environment, signals and the exit code. Everything
// else lives in main.ts so tests can call it without a child process.
import { nodeVersionProblem } from "./node-version.ts";
import { applySidecarV8Flags, sidecarEnvToAdd } from "../sidecar-runtime.ts";

// First: an older Node would fail later and say something else (the V8 flag below, for one).
const tooOld = nodeVersionProblem(process.version, process.execPath);
if (tooOld !== undefined) {
  process.stderr.write(`${tooOld}\n`);
  process.exit(2);
}

if (process.argv[2] === "proxy") {
  // A proxy started without the sidecar's NODE_OPTIONS and allocator setting
  // (by hand, outside the image) grows by half as much again under a large
  // list: restart in place (same pid, same stdio) with them added. Nothing
  // has been opened or loaded yet but these few modules.
  const env = sidecarEnvToAdd(process.env);
  if (env !== undefined && process.execve !== undefined) process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], env);
  // Before anything else loads: the sidecar's startup is what these flags are for.
  applySidecarV8Flags();
}
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
