/**
 * Builds a small Go program offline, the way `../shared/realapi/setup.sh`
 * builds its server: the Go toolchain and the k8s.io library sources that
 * setup.sh unpacked into its cache, GOPATH mode, no module proxy, no cgo.
 *
 * The binary is cached under `~/.cache/shardcar-gobuild/` (override with
 * `SHARDCAR_GOBUILD_CACHE`), keyed by a hash of the program's sources, the
 * Go version and the library package set, so a test or bench pays the cold
 * build (about 2 minutes on 2 cores) once. The Go build cache is kept there
 * too: after an edit a rebuild takes seconds.
 *
 * When the toolchain is missing, {@link buildGoProgram} says why instead of
 * throwing: callers skip with that reason (a skipped test never passes).
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface GoToolchain {
  readonly goroot: string;
  /** GOPATH entry holding the k8s.io and other library sources. */
  readonly gocode: string;
  /** `go version` output, e.g. `go version go1.26.10 linux/amd64`. */
  readonly version: string;
  /** The unpacked package list (names and versions), so a new library upload rebuilds. */
  readonly packages: string;
}

export type GoBuild = { readonly ok: true; readonly binary: string; readonly cached: boolean } | { readonly ok: false; readonly reason: string };

function realapiCache(env: NodeJS.ProcessEnv): string {
  return env["SHARDCAR_REALAPI_CACHE"] ?? join(homedir(), ".cache", "shardcar-realapi");
}

/** The toolchain setup.sh unpacked, or why there is none. */
export async function findGoToolchain(env: NodeJS.ProcessEnv = process.env): Promise<GoToolchain | { readonly missing: string }> {
  const root = join(realapiCache(env), "root");
  const lib = join(root, "usr", "lib");
  const gos = existsSync(lib) ? readdirSync(lib).filter((d) => /^go-\d/.test(d)) : [];
  // The newest, as setup.sh picks it (`sort -V`).
  gos.sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
  const newest = gos.at(-1);
  if (newest === undefined) return { missing: `no Go toolchain under ${lib} (run ../shared/realapi/setup.sh, which unpacks it)` };
  const goroot = join(lib, newest);
  const gocode = join(root, "usr", "share", "gocode");
  if (!existsSync(join(gocode, "src", "k8s.io", "client-go"))) return { missing: `no client-go sources under ${gocode}/src/k8s.io (run ../shared/realapi/setup.sh)` };
  try {
    const { stdout } = await run(join(goroot, "bin", "go"), ["version"], { env: { ...goEnv(goroot, gocode, ""), HOME: homedir() } });
    const debs = join(root, ".debs");
    return { goroot, gocode, version: stdout.trim(), packages: existsSync(debs) ? readFileSync(debs, "utf8") : "" };
  } catch (e) {
    return { missing: `${goroot}/bin/go does not run: ${e instanceof Error ? e.message : String(e)}` };
  }
}

/** Offline GOPATH mode, as setup.sh: nothing is downloaded, no cgo, two compile jobs (a 2-core machine). */
function goEnv(goroot: string, gocode: string, gopath: string): NodeJS.ProcessEnv {
  return {
    PATH: `${join(goroot, "bin")}:/usr/bin:/bin`,
    GOROOT: goroot,
    GOPATH: gopath === "" ? gocode : `${gopath}:${gocode}`,
    GO111MODULE: "off",
    GOTOOLCHAIN: "local",
    GOPROXY: "off",
    GOFLAGS: "-p=2",
    CGO_ENABLED: "0",
  };
}

function sourceHash(sourceDir: string, tc: GoToolchain): string {
  const h = createHash("sha256");
  h.update(`${tc.version}\n${tc.packages}\n`);
  for (const f of readdirSync(sourceDir).filter((f) => f.endsWith(".go")).sort()) {
    h.update(`${f}\n`);
    h.update(readFileSync(join(sourceDir, f)));
  }
  return h.digest("hex").slice(0, 16);
}

const building = new Map<string, Promise<GoBuild>>();

/** The binary a {@link buildGoProgram} of these sources would return, if it is already built; else why not. */
export async function cachedGoProgram(name: string, sourceDir: string, env: NodeJS.ProcessEnv = process.env): Promise<GoBuild> {
  const tc = await findGoToolchain(env);
  if ("missing" in tc) return { ok: false, reason: tc.missing };
  const binary = join(binaryDir(name, sourceDir, tc, env), name);
  return existsSync(binary) ? { ok: true, binary, cached: true } : { ok: false, reason: `${name} is not built yet for these sources (${binary})` };
}

function binaryDir(name: string, sourceDir: string, tc: GoToolchain, env: NodeJS.ProcessEnv): string {
  return join(cacheDir(env), `${name}-${sourceHash(sourceDir, tc)}`);
}

function cacheDir(env: NodeJS.ProcessEnv): string {
  return env["SHARDCAR_GOBUILD_CACHE"] ?? join(homedir(), ".cache", "shardcar-gobuild");
}

/**
 * Builds the `package main` in `sourceDir` (its `.go` files) as `name`, or
 * returns the cached binary for the same sources and toolchain.
 */
export function buildGoProgram(name: string, sourceDir: string, env: NodeJS.ProcessEnv = process.env): Promise<GoBuild> {
  const key = `${name}\0${sourceDir}`;
  let p = building.get(key);
  if (p === undefined) {
    p = build(name, sourceDir, env);
    building.set(key, p);
  }
  return p;
}

async function build(name: string, sourceDir: string, env: NodeJS.ProcessEnv): Promise<GoBuild> {
  const tc = await findGoToolchain(env);
  if ("missing" in tc) return { ok: false, reason: tc.missing };
  const cache = cacheDir(env);
  const dir = binaryDir(name, sourceDir, tc, env);
  const binary = join(dir, name);
  if (existsSync(binary)) return { ok: true, binary, cached: true };
  // A private GOPATH per build: two processes building at once (tap runs
  // two files in parallel) do not share a half-written tree, and the last
  // rename wins with an identical binary.
  const work = join(cache, `tmp-${name}-${process.pid}-${Date.now()}`);
  const pkg = join(work, "src", name);
  try {
    mkdirSync(pkg, { recursive: true });
    for (const f of readdirSync(sourceDir).filter((f) => f.endsWith(".go"))) cpSync(join(sourceDir, f), join(pkg, f));
    const out = join(work, name);
    await run(join(tc.goroot, "bin", "go"), ["build", "-trimpath", "-ldflags", "-s -w", "-o", out, "."], {
      cwd: pkg,
      env: { ...goEnv(tc.goroot, tc.gocode, work), HOME: homedir(), GOCACHE: join(cache, "gocache") },
      maxBuffer: 16 * 1024 * 1024,
    });
    if (!statSync(out).isFile()) return { ok: false, reason: `go build of ${name} wrote no binary` };
    mkdirSync(dir, { recursive: true });
    renameSync(out, binary);
    return { ok: true, binary, cached: false };
  } catch (e) {
    const err = e as { stderr?: string; message?: string };
    // A compile error is this repository's bug, not a missing toolchain: say so loudly.
    throw new Error(`go build of ${name} (${sourceDir}) failed with ${tc.version}:\n${err.stderr ?? err.message ?? String(e)}`, { cause: e });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
