import { formatBound } from "../../shard/hash.ts";
import { split } from "../../shard/range.ts";
import { canonicalSelector } from "../../shard/selector.ts";
import type { Command } from "../command.ts";
import { UsageError, intFlag, parseFlags } from "../flags.ts";

export const rangesCommand: Command = {
  name: "ranges",
  summary: "print the N equal shard ranges and their canonical selectors",
  usage: `Usage: shardcar ranges [--key uid|namespace] [--json] N

Prints shard i of N as [floor(i*2^64/N), floor((i+1)*2^64/N)), with the exact
selector shardcar sends for it. Every participant must use this arithmetic.

Examples:
  shardcar ranges 3
  shardcar ranges --key namespace --json 4
`,
  run(argv, io) {
    const { values, positionals } = parseFlags(argv, { key: { type: "string" }, json: { type: "boolean" } }, true);
    if (values.help) {
      io.stdout.write(this.usage);
      return Promise.resolve(0);
    }
    const key = values.key ?? "uid";
    if (key !== "uid" && key !== "namespace") throw new UsageError("--key", `invalid --key ${JSON.stringify(key)}: expected uid or namespace`);
    if (positionals.length !== 1) throw new UsageError("N", "exactly one N is required, e.g. shardcar ranges 3");
    const n = intFlag("N", positionals[0], 1, 1, 4096);
    const rows = split(n).map((r, i) => ({
      shard: i,
      start: formatBound(r.start),
      end: formatBound(r.end),
      selector: canonicalSelector(key, [r]) ?? "",
    }));
    if (values.json) io.stdout.write(JSON.stringify(rows, null, 2) + "\n");
    else for (const r of rows) io.stdout.write(`${r.shard}/${n}  [${r.start}, ${r.end})  ${r.selector}\n`);
    return Promise.resolve(0);
  },
};
