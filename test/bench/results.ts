/**
 * Bench results as the benches write them, for the judges' tests, and the
 * verdict a quick (CI) or full run gives a result.
 */
import type { BenchResult } from "../../bench/lib/bench.ts";
import { checksOf, quickChecksOf, type Check } from "../../bench/lib/checks.ts";

/** A result with a candidate of `value` and `ratio`; the rest from `over`. */
export function result(over: Partial<BenchResult> & Pick<BenchResult, "id" | "name">, value = 1, unit = "ms"): BenchResult {
  return {
    candidate: { label: "candidate", value, unit },
    baseline: { label: "baseline", value: 1, unit },
    ratio: 1,
    ...over,
  };
}

export type Verdict = "pass" | "fail" | "not judged";

const verdictOf = (checks: readonly Check[]): Verdict => (checks.length === 0 ? "not judged" : checks.every((c) => c.pass) ? "pass" : "fail");

/** What the quick run (`npm run bench -- --quick`, CI) says of `r`. */
export const quick = (r: BenchResult): Verdict => verdictOf(quickChecksOf(r));

/** What a full run (no tolerance, no ratchets) says of `r`. */
export const full = (r: BenchResult): Verdict => verdictOf(checksOf(r, 0));
