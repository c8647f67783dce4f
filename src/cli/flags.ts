/**
 * Flag parsing shared by every command: node:util's parseArgs in strict mode,
 * with its errors turned into a {@link UsageError} that names the flag, so
 * every command exits 2 with the same kind of message.
 */
import type { ParseArgsConfig } from "node:util";
import { util } from "../node-builtins.ts";
import { ConfigError } from "../errors.ts";

export class UsageError extends ConfigError {}

type Options = NonNullable<ParseArgsConfig["options"]>;

/**
 * Thrown by {@link parseFlags} for `--help`/`-h`: `main` answers it with the
 * command's usage and exit 0, so no command spells that answer out itself.
 */
export class HelpRequested extends Error {}

export function parseFlags<O extends Options>(argv: readonly string[], options: O, allowPositionals = false) {
  let parsed;
  try {
    parsed = util.parseArgs({ args: [...argv], options: { ...options, help: { type: "boolean", short: "h" } }, strict: true, allowPositionals });
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    const flag = /'(-[^' ]+)/.exec(msg)?.[1] ?? "argument";
    const near = msg.startsWith("Unknown option '--") ? nearestFlag(flag.slice(2), Object.keys(options)) : undefined;
    const hint = near === undefined ? "" : `; did you mean --${near}?`;
    throw new UsageError(flag, `${msg.replace(/\. To specify a positional argument.*$/, "")}${hint}`, { cause: e });
  }
  // `help` is in every command's options (above), though O does not show it.
  const values: { readonly help?: unknown } = parsed.values;
  if (values.help === true) throw new HelpRequested("--help");
  return parsed;
}

/**
 * The known flag a mistyped one most likely meant (`--shard` for
 * `--shards`): the closest by edit distance, if within a third of its
 * length (at least 1), or one that starts with what was typed.
 */
export function nearestFlag(typed: string, known: readonly string[]): string | undefined {
  let best: { name: string; d: number } | undefined;
  for (const name of known) {
    const d = name.startsWith(typed) || typed.startsWith(name) ? Math.abs(name.length - typed.length) : editDistance(typed, name);
    if (best === undefined || d < best.d) best = { name, d };
  }
  return best !== undefined && best.d <= Math.max(1, Math.floor(typed.length / 3)) ? best.name : undefined;
}

/** Levenshtein distance: insertions, deletions and substitutions, one each. */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row.push(Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1)));
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}

/** Parses a positive integer flag value, naming the flag on failure. */
export function intFlag(flag: string, value: string | undefined, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max) {
    throw new UsageError(flag, `invalid ${flag} ${JSON.stringify(value)}: expected an integer from ${min} to ${max}`);
  }
  return n;
}

/** Parses a duration like `500ms`, `10s`, `2m` into milliseconds. */
export function durationFlag(flag: string, value: string | undefined, fallbackMs: number): number {
  if (value === undefined) return fallbackMs;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(value);
  if (!m) throw new UsageError(flag, `invalid ${flag} ${JSON.stringify(value)}: expected a duration like 500ms, 10s, 2m or 8760h`);
  const unit = m[2] === "ms" ? 1 : m[2] === "s" ? 1000 : m[2] === "m" ? 60_000 : 3_600_000;
  return Number(m[1]) * unit;
}
