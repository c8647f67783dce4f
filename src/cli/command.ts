/**
 * The shape of a `shardcar` subcommand. Commands are thin: they parse flags,
 * build library objects, and run them until `signal` aborts. Only `src/cli`
 * touches `process` (argv, env, signals, exit codes).
 */
import type { Writable } from "node:stream";

export interface CommandIO {
  readonly stdout: Writable;
  readonly stderr: Writable;
  readonly env: NodeJS.ProcessEnv;
  /** Aborted on SIGINT/SIGTERM; long-running commands return when it fires. */
  readonly signal: AbortSignal;
}

/** How `shardcar --help` lists a command, and how to load it. */
export interface CommandEntry {
  readonly name: string;
  /** One line for `shardcar --help`. */
  readonly summary: string;
  /** Imports the command's module; called only for the command being run. */
  load(): Promise<Command>;
}

export interface Command {
  readonly name: string;
  /** Full `--help` text, with examples. */
  readonly usage: string;
  /**
   * Runs the command; resolves to the exit code. 0 success, 1 failure,
   * 2 bad usage (a flag or value was wrong; the message must name it).
   */
  run(argv: readonly string[], io: CommandIO): Promise<number>;
}
