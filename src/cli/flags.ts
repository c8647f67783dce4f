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
    throw new UsageError(flag, msg.replace(/\. To specify a positional argument.*$/, ""), { cause: e });
  }
  // `help` is in every command's options (above), though O does not show it.
  const values: { readonly help?: unknown } = parsed.values;
  if (values.help === true) throw new HelpRequested("--help");
  return parsed;
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
