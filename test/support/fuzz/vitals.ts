/**
 * What a leak shows in: resident memory and heap after a forced full GC, and
 * open file descriptors. Sampled before and after a fuzz run and compared
 * with bounds the test states.
 */
import { readdirSync } from "node:fs";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

export interface Vitals {
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
  /** What V8 holds from the system for its heap, used or not. */
  readonly heapTotalBytes: number;
  /** Buffers and other memory outside the JS heap that JS objects hold. */
  readonly externalBytes: number;
  readonly fds: number;
}

let gc: (() => void) | undefined;

/** A full, synchronous collection, without `--expose-gc` on the command line. */
export function forceGc(): void {
  if (gc === undefined) {
    setFlagsFromString("--expose-gc");
    gc = runInNewContext("gc") as () => void;
  }
  // Twice: the first pass runs finalizers that free more on the second.
  gc();
  gc();
}

export function openFds(): number {
  return readdirSync("/proc/self/fd").length;
}

export function vitals(): Vitals {
  forceGc();
  const m = process.memoryUsage();
  return { rssBytes: m.rss, heapUsedBytes: m.heapUsed, heapTotalBytes: m.heapTotal, externalBytes: m.external, fds: openFds() };
}

const MiB = 1024 * 1024;

export function formatVitals(v: Vitals): string {
  return `rss ${(v.rssBytes / MiB).toFixed(1)} MiB, heap ${(v.heapUsedBytes / MiB).toFixed(1)} of ${(v.heapTotalBytes / MiB).toFixed(1)} MiB, external ${(v.externalBytes / MiB).toFixed(1)} MiB, ${v.fds} fds`;
}

/**
 * Growth beyond the bounds, as problems (none when flat). RSS is measured
 * from `rssBefore` (by default `before`), heap and descriptors from `before`.
 */
export function growth(before: Vitals, after: Vitals, bounds: { readonly rssMiB: number; readonly heapMiB: number; readonly fds: number }, rssBefore: Vitals = before): string[] {
  const problems: string[] = [];
  const rss = (after.rssBytes - rssBefore.rssBytes) / MiB;
  // What JS keeps alive, on the heap or in Buffers: where a leak shows.
  const heap = (after.heapUsedBytes + after.externalBytes - before.heapUsedBytes - before.externalBytes) / MiB;
  if (rss > bounds.rssMiB) problems.push(`RSS grew by ${rss.toFixed(1)} MiB (bound ${bounds.rssMiB} MiB): ${formatVitals(rssBefore)} -> ${formatVitals(after)}`);
  if (heap > bounds.heapMiB) problems.push(`heap and external memory grew by ${heap.toFixed(1)} MiB (bound ${bounds.heapMiB} MiB): ${formatVitals(before)} -> ${formatVitals(after)}`);
  if (after.fds - before.fds > bounds.fds) problems.push(`open file descriptors grew by ${after.fds - before.fds} (bound ${bounds.fds}): ${formatVitals(before)} -> ${formatVitals(after)}`);
  return problems;
}

/**
 * Samples taken between cases: one once the run is warm (a third of a
 * count-bound run's cases; a fifth of a time-bound run's time, at most 2
 * minutes in: JIT, TLS and caches have filled by then), and one every
 * `every` cases for the table a run prints.
 */
export class VitalsLog {
  readonly samples: Array<{ readonly cases: number; readonly vitals: Vitals }>;
  #warm: Vitals | undefined;
  #warmIndex = -1;
  readonly #bound: { readonly cases: number | undefined; readonly seconds: number | undefined };
  readonly #every: number;
  readonly #read: () => Vitals;

  /** `read` takes a sample (tests give their own). */
  constructor(bound: { readonly cases: number | undefined; readonly seconds: number | undefined }, every = 2000, read: () => Vitals = vitals) {
    this.#bound = bound;
    this.#every = every;
    this.#read = read;
    this.samples = [{ cases: 0, vitals: read() }];
  }

  /** Between cases; true when this was the warm sample. */
  sample(p: { readonly cases: number; readonly seconds: number }): boolean {
    const b = this.#bound;
    const isWarm = b.cases === undefined ? p.seconds >= Math.min(120, (b.seconds ?? 0) / 5) : p.cases >= b.cases / 3;
    if (this.#warm === undefined && isWarm) {
      this.#warm = this.#read();
      this.#warmIndex = this.samples.length;
      this.samples.push({ cases: p.cases, vitals: this.#warm });
      return true;
    }
    if (p.cases % this.#every === 0) this.samples.push({ cases: p.cases, vitals: this.#read() });
    return false;
  }

  /**
   * Where RSS is measured from: the last sample at or before half the run,
   * and not before the warm one. RSS keeps the high-water mark of a burst
   * of large bodies (glibc keeps the pages it was given), and a long run
   * meets such a burst once, anywhere: one at 30,000 of 78,000 cases stayed
   * +113 MiB with the heap flat. A leak grows in the second half as in the
   * first; a high-water mark set in the first half does not. A short run
   * has no sample between its warm one and its end: there it is the warm one.
   */
  #rssBaseline(): Vitals | undefined {
    const last = this.samples.at(-1)?.cases ?? 0;
    let from: Vitals | undefined;
    for (let i = this.#warmIndex; i >= 0 && i < this.samples.length; i++) {
      const s = this.samples[i];
      if (s === undefined || s.cases > last / 2) break;
      from = s.vitals;
    }
    return from ?? this.#warm;
  }

  /**
   * Growth from the warm sample to `after` (RSS: from {@link #rssBaseline}),
   * as problems (none when flat). A run that ended before its warm sample
   * compares with a cold start, where JIT and caches still fill: when a
   * finding (or a reproduction's one case) ended it early that says nothing
   * and is skipped, with the reason; a run that simply never got warm is a
   * problem.
   */
  judge(after: Vitals, bounds: { readonly rssMiB: number; readonly heapMiB: number; readonly fds: number }, endedEarly: boolean): { readonly problems: readonly string[] } | { readonly skipped: string } {
    if (this.#warm !== undefined) return { problems: growth(this.#warm, after, bounds, this.#rssBaseline()) };
    if (endedEarly) return { skipped: "memory not judged: the run ended before its warm sample" };
    return { problems: ["the run ended before its warm sample: memory cannot be judged (more cases, or a longer run)"] };
  }

  /** The last sample, taken now. */
  final(cases: number): Vitals {
    const v = this.#read();
    this.samples.push({ cases, vitals: v });
    return v;
  }

  lines(): string[] {
    return this.samples.map((s) => `vitals after ${s.cases} cases: ${formatVitals(s.vitals)}`);
  }
}
