import { fnv1a64Hex } from "../../shard/hash.ts";
import { HashMatcher, split } from "../../shard/range.ts";
import type { Command } from "../command.ts";
import { intFlag, parseFlags, UsageError } from "../flags.ts";
import { FOR_OBJECT_FLAGS, FOR_OBJECT_HELP, runForObject } from "../for-object.ts";

export const hashCommand: Command = {
  name: "hash",
  usage: `Usage: shardcar hash [--shards N] VALUE...
       shardcar hash --for-object NS/NAME --resource RES [--shards N] [--ring NAME]

Prints the KEP-5866 hash (FNV-1a 64 over the raw UTF-8 bytes) of each VALUE,
a uid or a namespace name. With --shards N, also prints which of N equal
shards owns it. With --for-object, reads the object from the cluster and
prints its uid, the key it is sharded by and its hash, the range of N that
holds it, and with --ring the ring member that owns it.

Flags:
  --shards N              also print which of N equal ranges holds each hash
  --json                  JSON output (with --for-object)
${FOR_OBJECT_HELP}

Examples:
  shardcar hash 6f1d9e2c-3b7a-4c1e-9f0a-1234567890ab
  shardcar hash --shards 3 default kube-system
  shardcar hash --for-object shop/web-7d9f-abcde --resource pods --ring web --namespace shop
`,
  async run(argv, io) {
    const { values, positionals } = parseFlags(argv, { shards: { type: "string" }, json: { type: "boolean" }, ...FOR_OBJECT_FLAGS }, true);
    const n = values.shards === undefined ? undefined : intFlag("--shards", values.shards, 1, 1, 4096);
    if (values["for-object"] !== undefined) {
      if (positionals.length > 0) throw new UsageError("--for-object", "give either VALUEs or --for-object, not both");
      return runForObject(values, io, n);
    }
    for (const f of ["resource", "ring"] as const) if (values[f] !== undefined) throw new UsageError(`--${f}`, `--${f} only applies with --for-object`);
    if (positionals.length === 0) {
      io.stderr.write("shardcar hash: at least one VALUE (or --for-object) is required\n");
      return 2;
    }
    const matchers = n === undefined ? [] : split(n).map((r) => new HashMatcher([r]));
    for (const v of positionals) {
      const shard = matchers.findIndex((m) => m.matchesString(v));
      io.stdout.write(`${fnv1a64Hex(v)}  ${JSON.stringify(v)}${n === undefined ? "" : `  shard ${shard}/${n}`}\n`);
    }
    return 0;
  },
};
