/**
 * npm run test:repeat -- [K] [--keep]
 *
 * Runs the full `npm test` K times (default 10) on a clean clone of HEAD, as
 * a newcomer's first runs would: `git clone` of the current commit into a
 * fresh directory beside this checkout (`npm test` needs nothing beside it,
 * but there the optional realapi kit, `../shared/realapi`, which
 * test/manifests/crd.test.ts runs when it is built, resolves the same),
 * `npm ci`, then `npm test` K times in a row. Every failed test is printed
 * with its name (file › subtest › assertion, read from tap's output), each
 * failed run's full output is kept, and the last line is the summary:
 *
 *   test:repeat: K runs, F failed (N failed tests), clone of <commit>
 *
 * Exits 1 if any run failed. Uncommitted changes are not in the clone: it
 * tests what was committed. The clone is removed at the end unless --keep.
 */
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { failedTests, tapSummary } from "./tap-failures.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

function usage(message: string): never {
  console.error(`test:repeat: ${message}\nusage: npm run test:repeat -- [K] [--keep]`);
  process.exit(2);
}

function parseArgs(argv: readonly string[]): { runs: number; keep: boolean } {
  let runs = 10;
  let keep = false;
  for (const a of argv) {
    if (a === "--keep") keep = true;
    else if (/^\d+$/.test(a) && Number(a) > 0) runs = Number(a);
    else usage(`unknown argument ${JSON.stringify(a)} (K must be a positive whole number)`);
  }
  return { runs, keep };
}

/** Runs `cmd` in `cwd`, teeing its output to `log` (and to ours when `echo`); resolves with its exit code and output. */
function run(cmd: string, args: readonly string[], cwd: string, log: string | undefined, echo: boolean): Promise<{ code: number; output: string }> {
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { cwd, stdio: ["ignore", "pipe", "pipe"], env: process.env });
    const file = log === undefined ? undefined : createWriteStream(log);
    const chunks: Buffer[] = [];
    const take = (b: Buffer): void => {
      chunks.push(b);
      file?.write(b);
      if (echo) process.stdout.write(b);
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.on("error", fail);
    child.on("close", (code, signal) => {
      file?.end();
      done({ code: code ?? (signal === null ? 1 : 128), output: Buffer.concat(chunks).toString("utf8") });
    });
  });
}

/** The step of `npm test` that failed before tap ran (typecheck, lint, build): npm announces each as "> name@version step". */
function failedStep(output: string): string {
  const steps = [...output.matchAll(/^> \S+@\S+ (\S+)$/gm)].map((m) => m[1]);
  const last = steps[steps.length - 1];
  return `npm test ended before tap reported${last === undefined ? "" : ` (last step: npm run ${last})`}`;
}

async function main(): Promise<void> {
  const { runs, keep } = parseArgs(process.argv.slice(2));
  const parent = dirname(ROOT);
  const head = (await run("git", ["rev-parse", "--short", "HEAD"], ROOT, undefined, false)).output.trim();
  const clone = await mkdtemp(join(parent, `${basename(ROOT)}-repeat-`));
  const logs = await mkdtemp(join(tmpdir(), "shardcar-repeat-logs-"));
  console.log(`test:repeat: cloning ${head} into ${clone}`);
  let failedRuns = 0;
  let failedCount = 0;
  try {
    const cloned = await run("git", ["clone", "--quiet", "--no-local", ROOT, clone], parent, undefined, true);
    if (cloned.code !== 0) throw new Error(`git clone exited ${cloned.code}`);
    console.log("test:repeat: npm ci");
    const ci = await run("npm", ["ci", "--no-audit", "--no-fund"], clone, join(logs, "npm-ci.log"), false);
    if (ci.code !== 0) throw new Error(`npm ci exited ${ci.code}; see ${join(logs, "npm-ci.log")}`);
    for (let i = 1; i <= runs; i++) {
      const log = join(logs, `run-${i}.log`);
      const t0 = Date.now();
      const { code, output } = await run("npm", ["test"], clone, log, false);
      const secs = ((Date.now() - t0) / 1000).toFixed(0);
      const summary = tapSummary(output);
      const failed = failedTests(output);
      const counts = summary === undefined ? "no tap summary" : `${summary.pass} passed, ${summary.fail} failed, ${summary.skip} skipped, ${summary.todo} todo`;
      if (code === 0 && failed.length === 0 && summary !== undefined) {
        console.log(`run ${i}/${runs}: ok (${counts}) in ${secs} s`);
        continue;
      }
      failedRuns++;
      const names = failed.length > 0 ? failed.map((p) => p.join(" › ")) : [summary === undefined ? failedStep(output) : `npm test exited ${code}`];
      failedCount += names.length;
      console.log(`run ${i}/${runs}: FAILED (${counts}, exit ${code}) in ${secs} s; output: ${log}`);
      for (const n of names) console.log(`  not ok: ${n}`);
    }
  } finally {
    if (!keep) await rm(clone, { recursive: true, force: true });
    else console.log(`test:repeat: clone kept at ${clone}`);
    if (failedRuns === 0) await rm(logs, { recursive: true, force: true });
  }
  console.log(`test:repeat: ${runs} runs, ${failedRuns} failed (${failedCount} failed tests), clone of ${head}`);
  process.exitCode = failedRuns === 0 ? 0 : 1;
}

main().catch((e: unknown) => {
  console.error(`test:repeat: ${e instanceof Error ? e.message : String(e)}`);
  console.log("test:repeat: aborted before every run finished");
  process.exitCode = 1;
});
