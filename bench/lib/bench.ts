/**
 * Shared shapes for benchmarks. Every performance target is reported as a
 * candidate measured next to its baseline in the same run, never as an
 * absolute number compared with a constant from another day.
 */

export interface Measurement {
  readonly label: string;
  readonly value: number;
  /** e.g. "MB/s", "events/s", "ms", "MB". */
  readonly unit: string;
}

export interface BenchResult {
  /** Target id from design.md, e.g. "P3". */
  readonly id: string;
  readonly name: string;
  readonly candidate: Measurement;
  readonly baseline: Measurement;
  /** candidate/baseline for throughputs, baseline/candidate for costs: higher is better. */
  readonly ratio: number;
  /** The ratio design.md asks for; undefined when the figure is informational. */
  readonly target?: number;
  /** Extra figures worth publishing (RSS growth, p99, ...). */
  readonly extra?: Readonly<Record<string, number | string>>;
}

export interface BenchOptions {
  /** Small inputs and few iterations: the CI regression run (all benches < 2 min together). */
  readonly quick: boolean;
}

export type Bench = (opts: BenchOptions) => Promise<BenchResult[]>;

/**
 * Thrown by a bench that cannot run on this machine (a toolchain or a kit
 * it needs is missing): the run records the reason and no figure, so the
 * target shows as not measured, never as met.
 */
export class BenchSkipped extends Error {
  override readonly name = "BenchSkipped";
}

/** Runs `fn` repeatedly for at least `minMs`, returns operations per second. */
export async function opsPerSecond(fn: () => Promise<void> | void, minMs: number): Promise<number> {
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < minMs) {
    await fn();
    n++;
  }
  return (n * 1000) / (performance.now() - start);
}
