/**
 * Logger construction. Redaction lives here, once: a controller's bearer token
 * passes through the proxy on every request and must never reach a log line.
 */
import { pino, type Logger, type DestinationStream } from "pino";

export type { Logger };

const REDACT = [
  "authorization",
  "Authorization",
  "*.authorization",
  "*.Authorization",
  "*.headers.authorization",
  "*.headers.Authorization",
  "req.headers.authorization",
  "token",
  "*.token",
];

export function createLogger(opts: { level?: string; name?: string; destination?: DestinationStream } = {}): Logger {
  return pino(
    {
      name: opts.name ?? "shardcar",
      level: opts.level ?? "info",
      redact: { paths: REDACT, censor: "[REDACTED]" },
      base: undefined,
    },
    opts.destination,
  );
}

/**
 * `parent.child(bindings)` without the keys `parent` already binds: pino
 * prints a binding again for every level that binds it, and a line with a
 * key twice is refused or mangled by some log pipelines. The caller's
 * binding wins: a component names itself only when nobody named it yet.
 */
export function childLogger(parent: Logger, bindings: Readonly<Record<string, unknown>>): Logger {
  const bound = parent.bindings();
  return parent.child(Object.fromEntries(Object.entries(bindings).filter(([k]) => !(k in bound))));
}

/** A logger that drops everything; for tests and benchmarks. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
