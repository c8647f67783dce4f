/**
 * A candidate against its baseline, in alternating rounds: the one way the
 * micro benches turn two code paths into a ratio.
 *
 * Each round runs one side, then the other (the order swaps every round),
 * each for at least `roundMs` of wall time and `runsPerRound` runs, and
 * keeps each run's CPU time (this process, all threads: GC included). A
 * side's figure is its cheapest run over every counted round. So:
 *
 * - a burst of load from elsewhere lands on a few runs of both sides, not
 *   on one side's only window, and the cheapest run of each is one the
 *   burst missed;
 * - CPU time, not wall time: waiting for a core is not the code's cost;
 * - the first `warmupRounds` are not counted, and rounds go on (up to
 *   `maxRounds`) while either side's cheapest run still improves by more
 *   than `settle` in the last round: on a loaded machine V8 compiles the
 *   hot loops later (its compiler threads wait for a core too), and a
 *   measurement that ends before then compares an interpreted candidate
 *   with a native JSON.parse (a quick P4 once read 0.92× where the same
 *   build reads 4.5×).
 *
 * - a run repeats the work until it costs at least {@link MIN_RUN_MS}
 *   (the same number of times for both sides), so that the CPU clock's
 *   granularity does not round a fast path down to nothing.
 *
 * The per-round ratios are returned as well, to show how noisy it was.
 */
export interface CompareOptions {
  readonly roundMs: number;
  /** Counted rounds at least (after the warm-up). */
  readonly rounds: number;
  readonly warmupRounds?: number;
  readonly maxRounds?: number;
  readonly runsPerRound?: number;
  /** Relative improvement of a side's best run that keeps the rounds going. Default 0.02. */
  readonly settle?: number;
}

export interface Comparison {
  /** Cheapest run of each side, in ms of CPU time per execution of its work. */
  readonly candidateMs: number;
  readonly baselineMs: number;
  /** baselineMs / candidateMs: how many times cheaper the candidate is (higher is better). */
  readonly ratio: number;
  /** Counted rounds. */
  readonly rounds: number;
  /** Each counted round's own ratio (its baseline's cheapest run over its candidate's): min, median, max. */
  readonly roundRatios: { readonly min: number; readonly median: number; readonly max: number };
}

type Work = () => unknown;

/** A run shorter than this is repeated within one measurement. */
export const MIN_RUN_MS = 10;

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** The cheapest of at least `runs` runs of `fn` over at least `minMs` of wall time, in CPU ms. */
async function cheapestRun(fn: Work, minMs: number, runs: number): Promise<number> {
  let best = Number.POSITIVE_INFINITY;
  let n = 0;
  const end = performance.now() + minMs;
  do {
    const c0 = cpuMs();
    await fn();
    // CPU time has a resolution of a few microseconds; never report zero.
    best = Math.min(best, Math.max(cpuMs() - c0, 0.001));
    n++;
  } while (performance.now() < end || n < runs);
  return best;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/** How many times one run repeats the work, so that the cheaper side's run lasts {@link MIN_RUN_MS}. */
async function repetitions(a: Work, b: Work): Promise<number> {
  let cheapest = Number.POSITIVE_INFINITY;
  for (const fn of [a, b]) {
    const t0 = performance.now();
    await fn();
    cheapest = Math.min(cheapest, performance.now() - t0);
  }
  return Math.max(1, Math.ceil(MIN_RUN_MS / Math.max(cheapest, 0.001)));
}

function repeated(fn: Work, times: number): Work {
  if (times === 1) return fn;
  return async () => {
    for (let i = 0; i < times; i++) await fn();
  };
}

export async function compare(candidateOnce: Work, baselineOnce: Work, opts: CompareOptions): Promise<Comparison> {
  const reps = await repetitions(candidateOnce, baselineOnce);
  const candidate = repeated(candidateOnce, reps);
  const baseline = repeated(baselineOnce, reps);
  const warmup = opts.warmupRounds ?? 2;
  const maxRounds = Math.max(opts.rounds, opts.maxRounds ?? opts.rounds * 3);
  const runs = opts.runsPerRound ?? 2;
  const settle = opts.settle ?? 0.02;
  let bestC = Number.POSITIVE_INFINITY;
  let bestB = Number.POSITIVE_INFINITY;
  const ratios: number[] = [];
  for (let round = 0; round < warmup + maxRounds; round++) {
    const first = round % 2 === 0 ? candidate : baseline;
    const second = first === candidate ? baseline : candidate;
    const a = await cheapestRun(first, opts.roundMs, runs);
    const b = await cheapestRun(second, opts.roundMs, runs);
    const [c, base] = first === candidate ? [a, b] : [b, a];
    if (round < warmup) continue;
    const improved = c < bestC * (1 - settle) || base < bestB * (1 - settle);
    bestC = Math.min(bestC, c);
    bestB = Math.min(bestB, base);
    ratios.push(base / c);
    if (ratios.length >= opts.rounds && !improved) break;
  }
  return {
    candidateMs: bestC / reps,
    baselineMs: bestB / reps,
    ratio: bestB / bestC,
    rounds: ratios.length,
    roundRatios: { min: Math.min(...ratios), median: median(ratios), max: Math.max(...ratios) },
  };
}

/** The comparison's figures for a result's `extra`: rounds and the spread of the per-round ratios. */
export function spread(c: Comparison): Record<string, number> {
  const r2 = (n: number): number => Math.round(n * 100) / 100;
  return { rounds: c.rounds, roundRatioMin: r2(c.roundRatios.min), roundRatioMedian: r2(c.roundRatios.median), roundRatioMax: r2(c.roundRatios.max) };
}
