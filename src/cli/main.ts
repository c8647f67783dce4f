/**
 * The `shardcar` executable: picks a subcommand, wires process signals to an
 * AbortSignal, and maps errors to exit codes (2 for bad usage or config).
 */
import { ConfigError } from "../errors.ts";
import type { Command, CommandIO } from "./command.ts";
import { HelpRequested } from "./flags.ts";
import { COMMANDS } from "./commands/index.ts";

function topUsage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return `Usage: shardcar <command> [flags]

Shard-scoped caches for unmodified Kubernetes controllers.

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join("\n")}

Run 'shardcar <command> --help' for a command's flags and examples.
`;
}

export async function main(argv: readonly string[], io: CommandIO): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    io.stdout.write(topUsage());
    return name === undefined ? 2 : 0;
  }
  const entry = COMMANDS.find((c) => c.name === name);
  if (entry === undefined) {
    io.stderr.write(`shardcar: unknown command ${JSON.stringify(name)}\n\n${topUsage()}`);
    return 2;
  }
  const cmd: Command = await entry.load();
  try {
    return await cmd.run(rest, io);
  } catch (e) {
    if (e instanceof HelpRequested) {
      io.stdout.write(cmd.usage);
      return 0;
    }
    if (e instanceof ConfigError) {
      io.stderr.write(`shardcar ${cmd.name}: ${e.message}\n`);
      return 2;
    }
    io.stderr.write(`shardcar ${cmd.name}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    return 1;
  }
}

