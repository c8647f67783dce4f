/**
 * Where a benchmark ran: CPU, cores, memory, Node, OS, the commit, and the
 * load average (the machine may be shared; ratios measured side by side
 * survive contention better than absolute numbers, but a reader should know).
 */
import { execFileSync } from "node:child_process";
import { availableParallelism, cpus, loadavg, release, totalmem, type } from "node:os";

export interface Machine {
  readonly cpu: string;
  readonly cores: number;
  readonly memoryGB: number;
  readonly node: string;
  readonly os: string;
  readonly commit: string;
}

export function machine(): Machine {
  let commit = "unknown";
  try {
    const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim() !== "";
    commit = dirty ? `${head} (with uncommitted changes)` : head;
  } catch {
    // not a git checkout
  }
  return {
    cpu: cpus()[0]?.model.trim() ?? "unknown",
    cores: availableParallelism(),
    memoryGB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    os: `${type()} ${release()}`,
    commit,
  };
}

/** 1-minute load average, rounded. */
export function load1(): number {
  return Math.round((loadavg()[0] ?? 0) * 100) / 100;
}
