/**
 * The recorded kube-apiserver transcripts, kept in this repository under
 * `test/fixtures/kube-apiserver/` (copies of the read-only shared folder's
 * recordings; provenance and how to refresh them: test/fixtures/README.md).
 *
 * A file over 16 KiB is stored gzipped as `NAME.gz`: read through
 * {@link readFixture}, {@link hasFixture} and {@link fixtureNames}, which
 * take the name without `.gz` and answer for either form. A missing input
 * throws at once with its path, so a test without its input fails on the
 * spot instead of half-starting.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";

/** `test/fixtures/kube-apiserver/`, absolute. */
export const FIXTURES_ROOT = fileURLToPath(new URL("../fixtures/kube-apiserver/", import.meta.url));

/** A path relative to the fixtures root; an absolute path is kept as it is. */
export function fixturePath(rel: string): string {
  return resolve(FIXTURES_ROOT, rel);
}

function missing(what: string, path: string): Error {
  return new Error(`test input missing: ${what} ${path} does not exist (the recorded inputs are in the repository under test/fixtures/; see test/fixtures/README.md)`);
}

/** Whether the file is recorded, plain or as `NAME.gz`. */
export function hasFixture(file: string): boolean {
  const path = fixturePath(file);
  return existsSync(path) || existsSync(`${path}.gz`);
}

/** A recorded file's exact bytes (ungzipped when stored as `NAME.gz`); throws, naming the path, when it is not there. */
export function readFixture(file: string): Buffer {
  const path = fixturePath(file);
  if (existsSync(path)) return readFileSync(path);
  if (existsSync(`${path}.gz`)) return gunzipSync(readFileSync(`${path}.gz`));
  throw missing("file", `${path}[.gz]`);
}

export function readFixtureText(file: string): string {
  return readFixture(file).toString("utf8");
}

/** The names in a recorded folder, without `.gz`, sorted; throws, naming the path, when the folder is not there. */
export function fixtureNames(dir: string): string[] {
  const path = fixturePath(dir);
  if (!existsSync(path)) throw missing("folder", path);
  return readdirSync(path)
    .map((n) => (n.endsWith(".gz") ? n.slice(0, -".gz".length) : n))
    .sort();
}

/** Every recorded file whose name ends with `suffix`, as paths relative to the root (without `.gz`), sorted. */
export function findFixtures(suffix: string): string[] {
  if (!existsSync(FIXTURES_ROOT)) throw missing("folder", FIXTURES_ROOT);
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      const name = e.name.endsWith(".gz") ? p.slice(0, -".gz".length) : p;
      if (e.isDirectory()) walk(p);
      else if (name.endsWith(suffix)) out.push(relative(FIXTURES_ROOT, name));
    }
  };
  walk(FIXTURES_ROOT);
  return out.sort();
}
