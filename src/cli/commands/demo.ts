import { runDemo } from "../../demo/run.ts";
import { createLogger } from "../../log.ts";
import type { Command } from "../command.ts";
import { intFlag, parseFlags } from "../flags.ts";

export const demoCommand: Command = {
  name: "demo",
  summary: "run the demo: devapi, three sharded controller replicas, gate on and off",
  usage: `Usage: shardcar demo [--pods N] [--replicas N]

Starts the embedded devapi with N pods and a few controller replicas (real
@kubernetes/client-node informers), each behind its own shardcar proxy, then
walks through scenes (gate on, churn, gate off, gate on again), printing per
replica what it owns, what it caches, and who filtered. Exits 0 only if every
cache held exactly its shard in every scene.

Examples:
  shardcar demo
  shardcar demo --pods 10000 --replicas 4
`,
  async run(argv, io) {
    const { values } = parseFlags(argv, { pods: { type: "string" }, replicas: { type: "string" }, "log-level": { type: "string" } });
    if (values.help) {
      io.stdout.write(this.usage);
      return 0;
    }
    const pods = intFlag("--pods", values.pods, 3000, 1, 1_000_000);
    const replicas = intFlag("--replicas", values.replicas, 3, 1, 64);
    const logger = createLogger({ level: values["log-level"] ?? "warn", name: "shardcar-demo" });
    const { ok } = await runDemo({ out: io.stdout, logger, pods, replicas, signal: io.signal });
    return ok ? 0 : 1;
  },
};
