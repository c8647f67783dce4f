import { fnv1a64Hex } from "../../shard/hash.ts";
import { HashMatcher, split } from "../../shard/range.ts";
import type { Command } from "../command.ts";
import { intFlag, parseFlags } from "../flags.ts";

export const hashCommand: Command = {
  name: "hash",
  summary: "print the FNV-1a 64 hash of values, as the apiserver computes it",
  usage: `Usage: shardcar hash [--shards N] VALUE...

Prints the KEP-5866 hash (FNV-1a 64 over the raw UTF-8 bytes) of each VALUE,
a uid or a namespace name. With --shards N, also prints which of N equal
shards owns it.

Examples:
  shardcar hash 6f1d9e2c-3b7a-4c1e-9f0a-1234567890ab
  shardcar hash --shards 3 default kube-system
`,
  run(argv, io) {
    const { values, positionals } = parseFlags(argv, { shards: { type: "string" } }, true);
    if (values.help) {
      io.stdout.write(this.usage);
      return Promise.resolve(0);
    }
    if (positionals.length === 0) {
      io.stderr.write("shardcar hash: at least one VALUE is required\n");
      return Promise.resolve(2);
    }
    const n = values.shards === undefined ? undefined : intFlag("--shards", values.shards, 1, 1, 4096);
    const matchers = n === undefined ? [] : split(n).map((r) => new HashMatcher([r]));
    for (const v of positionals) {
      const shard = matchers.findIndex((m) => m.matchesString(v));
      io.stdout.write(`${fnv1a64Hex(v)}  ${JSON.stringify(v)}${n === undefined ? "" : `  shard ${shard}/${n}`}\n`);
    }
    return Promise.resolve(0);
  },
};
