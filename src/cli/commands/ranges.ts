import { formatBound } from "../../shard/hash.ts";
import { split } from "../../shard/range.ts";
import { canonicalSelector } from "../../shard/selector.ts";
import type { Command } from "../command.ts";
import { UsageError, intFlag, parseFlags } from "../flags.ts";
import { FOR_OBJECT_FLAGS, FOR_OBJECT_HELP, runForObject } from "../for-object.ts";

export const rangesCommand: Command = {
  name: "ranges",
  usage: `Usage: shardcar ranges [--key uid|namespace] [--json] N
       shardcar ranges N --for-object NS/NAME --resource RES [--ring NAME]

Prints shard i of N as [floor(i*2^64/N), floor((i+1)*2^64/N)), with the exact
selector shardcar sends for it. Every participant must use this arithmetic.
With --for-object, prints which of the N ranges holds a live object (and,
with --ring, which ring member owns it) instead.

Flags:
  --key uid|namespace     the field the selectors hash (default uid)
  --json                  JSON output
${FOR_OBJECT_HELP}

Examples:
  shardcar ranges 3
  shardcar ranges --key namespace --json 4
  shardcar ranges 4 --for-object shop/web-0 --resource pods
`,
  async run(argv, io) {
    const { values, positionals } = parseFlags(argv, { key: { type: "string" }, json: { type: "boolean" }, ...FOR_OBJECT_FLAGS }, true);
    const key = values.key ?? "uid";
    if (key !== "uid" && key !== "namespace") throw new UsageError("--key", `invalid --key ${JSON.stringify(key)}: expected uid or namespace`);
    if (positionals.length !== 1) throw new UsageError("N", "exactly one N is required, e.g. shardcar ranges 3");
    const n = intFlag("N", positionals[0], 1, 1, 4096);
    if (values["for-object"] !== undefined) {
      if (values.key !== undefined) throw new UsageError("--key", "--key does not apply with --for-object: the key comes from --resource (e.g. configmaps=namespace)");
      return runForObject(values, io, n);
    }
    for (const f of ["resource", "ring"] as const) if (values[f] !== undefined) throw new UsageError(`--${f}`, `--${f} only applies with --for-object`);
    const rows = split(n).map((r, i) => ({
      shard: i,
      start: formatBound(r.start),
      end: formatBound(r.end),
      selector: canonicalSelector(key, [r]) ?? "",
    }));
    if (values.json) io.stdout.write(JSON.stringify(rows, null, 2) + "\n");
    else for (const r of rows) io.stdout.write(`${r.shard}/${n}  [${r.start}, ${r.end})  ${r.selector}\n`);
    return 0;
  },
};
