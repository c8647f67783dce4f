/**
 * The hand-written half of docs/performance.md: why a target is missed and
 * what will fix it, how a figure is measured when that is not obvious, and
 * the profiling log (before/after of each hot-path change). The prose lives
 * in bench/notes/*.md, one file per section, next to the benches so that a
 * change to a measurement and to its explanation land together; this module
 * reads it for the report. Figures quoted there come from the targeted
 * measurements named next to them (profiles, A/B runs), not from the
 * tables, which every run regenerates.
 */
import { readFileSync } from "node:fs";

export interface Notes {
  /** Under the summary table. */
  readonly summary: string;
  /** Under each target's section, by id. */
  readonly sections: Readonly<Record<string, string>>;
  /** Shown instead of figures when a target has none yet, by id. */
  readonly pending: Readonly<Record<string, string>>;
  /** The "Where the memory goes" section. */
  readonly memory: string;
  /** The "Profiling the hot paths" section. */
  readonly profile: string;
}

/**
 * The notes are wrapped at about 100 columns to be read and reviewed; the
 * report joins each paragraph and list item back into one line, so that
 * rewrapping a note never changes docs/performance.md. A line break inside
 * a paragraph or a list item (its continuation lines indented or not) is a
 * space; a blank line, and a line that starts a list item (`- `) or a table
 * row (`|`), keep their place, and a table row is never joined to.
 */
export function unwrap(md: string): string {
  const out: string[] = [];
  for (const line of md.replace(/\n+$/, "").split("\n")) {
    const prev = out.at(-1);
    const startsBlock = line === "" || line.startsWith("- ") || line.startsWith("|");
    if (prev !== undefined && prev !== "" && !prev.startsWith("|") && !startsBlock) out[out.length - 1] = `${prev} ${line.trimStart()}`;
    else out.push(line);
  }
  return out.join("\n");
}

/** bench/notes/<name>.md, unwrapped. */
function note(name: string): string {
  return unwrap(readFileSync(new URL(`../notes/${name}.md`, import.meta.url), "utf8"));
}

const p2p4 = note("p2-p4");

export const NOTES: Notes = {
  summary: note("summary"),
  sections: {
    P1: note("p1"),
    P2: p2p4,
    P3: p2p4,
    P4: p2p4,
    P5: note("p5"),
    P5m: note("p5m"),
    P6: note("p6"),
    P6b: note("p6b"),
    P7: note("p7"),
    P8: note("p8"),
    S1: note("s1"),
    S2: note("s2"),
    S3: note("s3"),
    S4: note("s4"),
    S5: note("s5"),
  },
  pending: {
    P7: "Pending: the ring is not integrated with the proxy yet.",
  },
  memory: note("memory"),
  profile: note("profile"),
};
