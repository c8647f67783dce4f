/**
 * The fuzz loop shared by every fuzzer: seeded cases run a few at a time for
 * a bounded count (the short run in `npm test`) or a bounded time (the long
 * lane, `SHARDCAR_FUZZ_SECONDS`), each case judged as it ends. A process-level
 * failure (an exception nobody caught: the server would have died) is a
 * finding too, reported with the cases that were in flight.
 *
 * Knobs (environment):
 * - `SHARDCAR_FUZZ_SECONDS`: the long lane's length; a fuzzer then runs for
 *   its share of it (see {@link fuzzSettings}); otherwise a fixed number of
 *   cases with a fixed seed, the same every run.
 * - `SHARDCAR_FUZZ_CASES`: the number of cases (short run).
 * - `SHARDCAR_FUZZ_SEED`: the seed (the long lane picks and prints a fresh one).
 * - `SHARDCAR_FUZZ_CASE`: run only this case of the seed: the reproduction.
 * - `SHARDCAR_FUZZ_CONCURRENCY`: cases in flight at once.
 */
import { Random, seedFromEnv } from "./random.ts";

export interface FuzzSettings {
  readonly seed: number;
  /** The count bound; undefined in the long lane. */
  readonly cases: number | undefined;
  /** The time bound; undefined in the short run. */
  readonly seconds: number | undefined;
  /** Only this case (a reproduction). */
  readonly only: number | undefined;
  readonly concurrency: number;
}

function envNumber(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name}=${JSON.stringify(raw)}: expected a non-negative number`);
  return n;
}

/**
 * The run's settings: `short` unless the environment asks for the long lane
 * or a reproduction. In the lane a fuzzer runs for `share` of
 * `SHARDCAR_FUZZ_SECONDS` (default all of it): the lane runs two test files
 * at a time, so fuzzers that follow each other on one job split its time.
 */
export function fuzzSettings(short: { readonly cases: number; readonly seed: number; readonly concurrency: number; readonly share?: number }): FuzzSettings {
  const lane = envNumber("SHARDCAR_FUZZ_SECONDS");
  const seconds = lane === undefined ? undefined : lane * (short.share ?? 1);
  const only = envNumber("SHARDCAR_FUZZ_CASE");
  return {
    seed: seedFromEnv(seconds === undefined ? short.seed : undefined),
    cases: seconds === undefined ? (envNumber("SHARDCAR_FUZZ_CASES") ?? short.cases) : undefined,
    seconds,
    only,
    concurrency: only !== undefined ? 1 : (envNumber("SHARDCAR_FUZZ_CONCURRENCY") ?? short.concurrency),
  };
}

export interface FuzzCase {
  /** The input as sent, readable and exact enough to replay by hand. */
  readonly description: string;
  /** Requests in it (several when pipelined). */
  readonly requests: number;
  /** Sends it and judges the answer: the problems found, none when all is well. */
  run(): Promise<readonly string[]>;
}

export interface Finding {
  /** The case number, or -1 for a process-level failure. */
  readonly case: number;
  readonly description: string;
  readonly problems: readonly string[];
}

export interface FuzzOutcome {
  readonly cases: number;
  readonly requests: number;
  readonly seconds: number;
  readonly findings: readonly Finding[];
}

/**
 * Runs cases `make(Random.forCase(seed, i), i)` until a bound or the first
 * finding. `between` runs after every `every` cases (a liveness probe, a
 * memory sample); a problem it reports is a finding.
 */
export async function runFuzz(settings: FuzzSettings, make: (rnd: Random, i: number) => FuzzCase, between?: { every: number; check: (progress: { cases: number; seconds: number }) => Promise<readonly string[]> }): Promise<FuzzOutcome> {
  const started = performance.now();
  const deadline = settings.seconds === undefined ? Infinity : started + settings.seconds * 1000;
  const findings: Finding[] = [];
  const inFlight = new Map<number, FuzzCase>();
  let next = settings.only ?? 0;
  const last = settings.only !== undefined ? settings.only + 1 : (settings.cases ?? Infinity);
  let cases = 0;
  let requests = 0;
  let crashes = 0;
  const crashed = (err: unknown): void => {
    // The first few say it all; an error in a loop would flood the report.
    if (++crashes > 3) return;
    const cases = [...inFlight].map(([i, c]) => `case ${i}:\n${c.description}`).join("\n");
    findings.push({ case: -1, description: cases, problems: [`an exception reached the process (the server would have exited): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`] });
  };
  process.on("uncaughtException", crashed);
  process.on("unhandledRejection", crashed);
  const more = (): boolean => findings.length === 0 && next < last && performance.now() < deadline;
  const worker = async (): Promise<void> => {
    while (more()) {
      const i = next++;
      let c: FuzzCase = { description: "(the case could not be made)", requests: 0, run: () => Promise.resolve([]) };
      let problems: readonly string[];
      try {
        c = make(Random.forCase(settings.seed, i), i);
        inFlight.set(i, c);
        problems = await c.run();
      } catch (e) {
        problems = [`the case itself failed (a bug in the fuzzer): ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`];
      }
      inFlight.delete(i);
      cases++;
      requests += c.requests;
      if (problems.length > 0) findings.push({ case: i, description: c.description, problems });
      if (between !== undefined && cases % between.every === 0 && findings.length === 0) {
        const p = await between.check({ cases, seconds: (performance.now() - started) / 1000 });
        if (p.length > 0) findings.push({ case: i, description: `(checked after case ${i})`, problems: p });
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: settings.concurrency }, () => worker()));
  } finally {
    process.off("uncaughtException", crashed);
    process.off("unhandledRejection", crashed);
  }
  return { cases, requests, seconds: (performance.now() - started) / 1000, findings };
}

/** A finding as the test prints it: the problem, the input, and how to replay it. */
export function formatFinding(settings: FuzzSettings, file: string, f: Finding): string {
  const replay = f.case >= 0 ? `SHARDCAR_FUZZ_SEED=${settings.seed} SHARDCAR_FUZZ_CASE=${f.case} tap --disable-coverage ${file}` : `SHARDCAR_FUZZ_SEED=${settings.seed} tap --disable-coverage ${file} (the cases above were in flight)`;
  return [`seed ${settings.seed}, case ${f.case}:`, ...f.problems.map((p) => `  problem: ${p}`), "  input:", ...f.description.split("\n").map((l) => `    ${l}`), `  replay: ${replay}`].join("\n");
}

/** The one summary line per fuzzer that the fuzz lane (and docs/testing.md) counts. */
export function summaryLine(name: string, settings: FuzzSettings, o: FuzzOutcome): string {
  return `fuzz ${name}: ${o.requests} requests tried in ${o.cases} cases, ${o.findings.length} findings, seed ${settings.seed}, ${o.seconds.toFixed(1)} s`;
}
