/**
 * The results file a run writes (bench/results/latest.json, quick.json):
 * one entry per bench run, with the machine, the results and the verdicts.
 * Written by bench/run.ts and read by ./report.ts, so it lives here, where
 * both import it, and neither imports the other.
 */
import type { BenchResult } from "./bench.ts";
import type { Check } from "./checks.ts";
import type { Machine } from "./machine.ts";

export type RunStatus = "ok" | "failed" | "missing";

export interface BenchRun {
  readonly name: string;
  readonly file: string;
  readonly covers: readonly string[];
  readonly status: RunStatus;
  readonly error?: string;
  readonly date: string;
  readonly seconds: number;
  readonly quick: boolean;
  readonly load1Before: number;
  readonly load1After: number;
  readonly machine: Machine;
  readonly results: readonly BenchResult[];
  readonly checks: readonly Check[];
}

export interface ResultsFile {
  readonly generated: string;
  readonly quick: boolean;
  readonly tolerance: number;
  readonly runs: readonly BenchRun[];
}
