import { resolve } from "node:path";
import { runDemo } from "../../demo/run.ts";
import { createLogger } from "../../log.ts";
import type { Command } from "../command.ts";
import { intFlag, parseFlags } from "../flags.ts";

export const demoCommand: Command = {
  name: "demo",
  usage: `Usage: shardcar demo [--pods N] [--replicas N] [--quick] [--report FILE]

Starts the embedded devapi with N pods, the manager's ring coordinator and
controller replicas (real @kubernetes/client-node informers), each behind its
own shardcar proxy in ring mode, and each with an unsharded twin as the
baseline for bytes. Then walks through scenes: start the replicas, scale up by
one, kill one (no goodbye), turn the apiserver's gate off (the apiserver sends
every proxy every byte), switch the ring to labels mode with the gate still
off, as on a managed cluster (the manager labels every pod with its slot; the
apiserver sends each proxy its share), and scale out again while Deployments
are created, whose ReplicaSets (keyed by owner) an unmodified controller
creates exactly once. Each scene prints a table per replica (ring slots, pods
cached and expected, bytes, who filtered), checks in plain words that every
pod is cached by exactly the replica that owns it, and shows the bytes saved.
Ends with an operator's audit and canaries, writes an HTML report with
charts, and prints its path. Exits 0 only if every invariant held.

Flags:
  --pods N          pods to seed (default 3000; 600 with --quick)
  --replicas N      replicas to start with (default 3); scaled to N+1, one killed, N+1 again
  --quick           a smaller, faster run (for CI)
  --report FILE     where to write the report (default ./demo-report.html)
  --log-level LEVEL pino level for the components (default error: the demo narrates)

Examples:
  shardcar demo
  shardcar demo --quick --report /tmp/demo.html
  shardcar demo --pods 10000 --replicas 4
`,
  async run(argv, io) {
    const { values } = parseFlags(argv, { pods: { type: "string" }, replicas: { type: "string" }, quick: { type: "boolean" }, report: { type: "string" }, "log-level": { type: "string" } });
    const pods = intFlag("--pods", values.pods, values.quick === true ? 600 : 3000, 1, 1_000_000);
    const replicas = intFlag("--replicas", values.replicas, 3, 2, 32);
    const logger = createLogger({ level: values["log-level"] ?? "error", name: "shardcar-demo" });
    const { ok } = await runDemo({ out: io.stdout, logger, pods, replicas, signal: io.signal, reportPath: resolve(values.report ?? "demo-report.html") });
    return ok ? 0 : 1;
  },
};
