/**
 * Golden files for the webhook tests: compare, or with `REFRESH_GOLDEN=1`
 * rewrite (atomically), and find the stale ones no case produced.
 */
import { readFileSync, readdirSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const REFRESH = process.env["REFRESH_GOLDEN"] === "1" || process.env["REFRESH_GOLDEN"] === "true";

interface Asserts {
  equal(a: unknown, b: unknown, ...msg: [] | [string]): void;
  same(a: unknown, b: unknown, ...msg: [] | [string]): void;
  pass(...msg: [] | [string]): void;
  fail(...msg: [] | [string]): void;
}

export class Goldens {
  readonly #dir: string;
  readonly #testFile: string;
  readonly #produced: Set<string>;

  /** `kept`: files of `dir` that are inputs, not goldens. */
  constructor(dir: string, testFile: string, kept: Iterable<string>) {
    this.#dir = dir;
    this.#testFile = testFile;
    this.#produced = new Set(kept);
  }

  check(t: Asserts, name: string, actual: string): void {
    this.#produced.add(name);
    const path = join(this.#dir, name);
    let expected: string | undefined;
    try {
      expected = readFileSync(path, "utf8");
    } catch {
      expected = undefined;
    }
    if (REFRESH) {
      if (expected !== actual) {
        // Write then rename, so an interrupted refresh never leaves half a golden.
        writeFileSync(`${path}.tmp`, actual);
        renameSync(`${path}.tmp`, path);
      }
      t.pass(`${name} refreshed`);
      return;
    }
    if (expected === undefined) {
      t.fail(`${name} is missing; run REFRESH_GOLDEN=1 npx tap ${this.#testFile} and review the new file`);
      return;
    }
    t.equal(actual, expected, `${name} matches (REFRESH_GOLDEN=1 to rewrite)`);
  }

  /** Run last: golden files no case produced fail (and are deleted by a refresh). */
  checkStale(t: Asserts): void {
    const stale = readdirSync(this.#dir).filter((f) => !this.#produced.has(f));
    if (REFRESH) {
      for (const f of stale) unlinkSync(join(this.#dir, f));
      t.pass(`removed ${stale.length} stale file(s)`);
      return;
    }
    t.same(stale, [], "stale golden files found (REFRESH_GOLDEN=1 removes them)");
  }
}
