/**
 * How the sidecar's Node process runs: its V8 flags and allocator settings,
 * in one place. The webhook writes {@link SIDECAR_ENV} into every injected
 * container, the image's Dockerfile carries the same values (a test checks
 * they agree), and the benchmarks start their proxies with it, so the
 * figures in docs/performance.md are the shipped sidecar's. A `shardcar
 * proxy` started without them (by hand, outside the image, or in a pod
 * whose spec sets a NODE_OPTIONS of its own) restarts itself in place with
 * them added ({@link sidecarEnvToAdd}, src/cli/bin.ts): without them a
 * 100 MB list through the proxy grew its RSS by 41–54 MiB over idle, with
 * them by 22–29 MiB (issue 34), and P6b's bound is 32 MiB.
 *
 * Why each setting (measured on a `shardcar proxy` process with TLS on
 * both sides; docs/performance.md, "Where the memory goes"):
 *
 * - `--max-semi-space-size=1`: V8 grows the young generation to 8 MB at
 *   start and 16–32 MB under a stream of chunks, and keeps it. The proxy's
 *   live data is a few windows of bytes; what fills the young generation is
 *   garbage (chunk views, parser state) and, through it, dead Buffers whose
 *   memory is freed only when a scavenge finds them. A 1 MB semi-space
 *   scavenges sooner and holds less: −2.5 MB idle, −10 to −20 MB at the peak
 *   of a 100 MB list. It costs CPU on small requests (5–15% more proxy CPU
 *   per GET or small LIST, bench/tools/proxy-cost.ts), none measurable on
 *   a large list (the scanners allocate little per byte).
 * - `--invocation-count-for-turbofan=30000` (default 3000; Node refuses it
 *   in NODE_OPTIONS, so `shardcar proxy` sets it itself before it loads
 *   anything, src/cli/bin.ts): starting up
 *   (module resolution's path loops) crosses TurboFan's default budget, and
 *   compiling those few functions touches ~5 MB of TurboFan's own code in
 *   the node binary, resident for good in an idle sidecar. Ten times the
 *   budget keeps startup on the baseline tiers and Maglev; under traffic the
 *   scanners' loops still reach TurboFan within the first tens of MB
 *   (`--trace-opt`), and proxy CPU per request and per list was unchanged.
 * - `MALLOC_ARENA_MAX=2`: glibc gives each thread that allocates its own
 *   arena (V8's and libuv's worker threads, OpenSSL), and freed memory in
 *   one is not reused by another; two arenas bound that spread.
 *
 * Not set, and why: `--max-old-space-size` (a cap is a crash, not a saving:
 * the proxy's old generation is its code and a few MB of state);
 * `--optimize-for-size` and `--lite-mode`/`--jitless` (the scanners' loops
 * need the optimizing compilers: they are the proxy's throughput).
 */

import { setFlagsFromString } from "node:v8";

/** Node options (`NODE_OPTIONS`) of the sidecar process: read when V8 creates its heap. */
export const SIDECAR_NODE_OPTIONS = "--max-semi-space-size=1";

/** V8 flags Node does not accept in NODE_OPTIONS, set by the process itself before it loads its modules. */
export const SIDECAR_V8_FLAGS: readonly string[] = ["--invocation-count-for-turbofan=30000"];

/** Sets {@link SIDECAR_V8_FLAGS}; effective for code compiled afterwards. */
export function applySidecarV8Flags(): void {
  for (const f of SIDECAR_V8_FLAGS) setFlagsFromString(f);
}

/** The environment every sidecar process starts with, in the order the container spec lists it. */
export const SIDECAR_ENV: ReadonlyArray<{ readonly name: string; readonly value: string }> = [
  { name: "NODE_OPTIONS", value: SIDECAR_NODE_OPTIONS },
  { name: "MALLOC_ARENA_MAX", value: "2" },
];

/**
 * The environment to restart `shardcar proxy` with so that every sidecar
 * setting is in force, or undefined when `env` already has them all. What
 * the user set is kept: a NODE_OPTIONS of their own gets the sidecar's
 * options appended, except a flag it already sets (their
 * `--max-semi-space-size` wins), and a MALLOC_ARENA_MAX of theirs stays.
 */
export function sidecarEnvToAdd(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv | undefined {
  const added: Record<string, string> = {};
  for (const e of SIDECAR_ENV) {
    const have = env[e.name];
    if (e.name === "NODE_OPTIONS") {
      const mine = (have ?? "").split(/\s+/).filter((o) => o !== "");
      const missing = e.value.split(" ").filter((o) => !mine.some((m) => m.split("=")[0] === o.split("=")[0]));
      // Appended to their string as it is: its quoting is theirs.
      if (missing.length > 0) added[e.name] = [have ?? "", ...missing].join(" ").trim();
    } else if (have === undefined || have === "") {
      added[e.name] = e.value;
    }
  }
  return Object.keys(added).length === 0 ? undefined : { ...env, ...added };
}

/** `base` with {@link SIDECAR_ENV} applied: how a benchmark or test starts a sidecar as shipped. */
export function sidecarProcessEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...base, ...Object.fromEntries(SIDECAR_ENV.map((e) => [e.name, e.value])) };
}
