/**
 * Reads tap's TAP 14 output (what `npm test` prints when its output is not a
 * terminal) for the repeat script (test/support/repeat.ts): which tests
 * failed, named by their path from the file down, and the closing summary.
 */

/** One failed test: its names from the file down to the failed assertion. */
export type FailedTest = readonly string[];

export interface TapSummary {
  readonly total: number;
  readonly pass: number;
  readonly fail: number;
  readonly skip: number;
  readonly todo: number;
}

const SUBTEST = /^( *)# Subtest: (.*)$/;
const RESULT = /^( *)(not ok|ok) \d+(?: - (.*))?$/;
const YAML_START = /^( *)---$/;

/** Splits a test point's text into its description and its directive (`# TODO …`, `# SKIP …`, `# time=…`), honouring `\#`. */
function describe(text: string): { name: string; directive: string } {
  const m = /^((?:[^#\\]|\\.)*?)\s*(?:(?<!\\)#\s*(.*))?$/.exec(text);
  return { name: unescape((m?.[1] ?? text).trim()), directive: (m?.[2] ?? "").trim() };
}

function unescape(s: string): string {
  return s.replace(/\\([#\\])/g, "$1");
}

/**
 * Every failed test point whose children did not fail themselves (a failed
 * assertion, or a subtest that failed on its own: a timeout, a crash, a
 * missing plan), each as its path of names. TODO and SKIP points are not
 * failures.
 */
export function failedTests(tap: string): FailedTest[] {
  const open: string[] = []; // open[level] = the subtest announced at that depth
  const failed: string[][] = [];
  let yamlIndent: number | undefined;
  for (const line of tap.split("\n")) {
    if (yamlIndent !== undefined) {
      // A diagnostic block (source excerpts may contain anything) ends at its own "...".
      if (line === `${" ".repeat(yamlIndent)}...`) yamlIndent = undefined;
      continue;
    }
    const y = YAML_START.exec(line);
    if (y !== null) {
      yamlIndent = (y[1] ?? "").length;
      continue;
    }
    const s = SUBTEST.exec(line);
    if (s !== null) {
      const level = Math.floor((s[1] ?? "").length / 4);
      open.length = level;
      open[level] = unescape(s[2] ?? "");
      continue;
    }
    const r = RESULT.exec(line);
    if (r === null) continue;
    const level = Math.floor((r[1] ?? "").length / 4);
    open.length = level;
    if (r[2] !== "not ok") continue;
    const { name, directive } = describe(r[3] ?? "");
    if (/^(todo|skip)\b/i.test(directive)) continue;
    failed.push([...open, name]);
  }
  // A subtest's own "not ok" repeats its children's failures: keep the deepest.
  return failed.filter((p) => !failed.some((q) => q.length > p.length && p.every((n, i) => q[i] === n)));
}

/** tap's closing `# { total: N, pass: P, fail: F, … }` line, if the run got that far. */
export function tapSummary(tap: string): TapSummary | undefined {
  const lines = tap.split("\n").filter((l) => /^# \{ total: \d+/.test(l));
  const last = lines[lines.length - 1];
  if (last === undefined) return undefined;
  const field = (k: string): number => Number(new RegExp(`\\b${k}: (\\d+)`).exec(last)?.[1] ?? 0);
  return { total: field("total"), pass: field("pass"), fail: field("fail"), skip: field("skip"), todo: field("todo") };
}
