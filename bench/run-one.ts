/**
 * Runs one benchmark module in this (child) process and writes its results
 * as JSON to a file: `node bench/run-one.ts <module> <out.json> [--quick]`.
 *
 * bench/run.ts starts one of these per benchmark, so that every bench gets
 * a fresh heap and event loop, its own children are stopped with it, and a
 * crash or hang in one bench is reported without taking the others down.
 * Exit code 0 when the bench returned results, 1 when it threw.
 */
import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { BenchSkipped, type Bench } from "./lib/bench.ts";
import { stopAll } from "./lib/proc.ts";

const [modulePath, outFile] = process.argv.slice(2);
if (modulePath === undefined || outFile === undefined) {
  process.stderr.write("usage: node bench/run-one.ts <module> <out.json> [--quick]\n");
  process.exit(2);
}
const quick = process.argv.includes("--quick");
try {
  const mod = (await import(pathToFileURL(modulePath).href)) as { bench?: Bench };
  if (typeof mod.bench !== "function") throw new Error(`${modulePath} does not export \`bench\``);
  const results = await mod.bench({ quick });
  writeFileSync(outFile, JSON.stringify({ ok: true, results }));
  process.exitCode = 0;
} catch (e) {
  if (e instanceof BenchSkipped) {
    // Not a failure, and not a pass: no figure, and the reason.
    writeFileSync(outFile, JSON.stringify({ ok: true, results: [], error: `skipped: ${e.message}` }));
    process.exitCode = 0;
  } else {
    writeFileSync(outFile, JSON.stringify({ ok: false, error: e instanceof Error ? (e.stack ?? e.message) : String(e) }));
    process.exitCode = 1;
  }
}
// A bench that left a timer or socket open must not keep its slot: stop
// whatever children remain and leave.
await stopAll();
process.exit();
