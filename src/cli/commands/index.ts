import type { Command } from "../command.ts";
import { auditCommand } from "./audit.ts";
import { devapiCommand } from "./devapi.ts";
import { demoCommand } from "./demo.ts";
import { hashCommand } from "./hash.ts";
import { managerCommand } from "./manager.ts";
import { preflightCommand } from "./preflight.ts";
import { proxyCommand } from "./proxy.ts";
import { rangesCommand } from "./ranges.ts";

/** Every subcommand, in the order `shardcar --help` lists them. Add one line per command. */
export const COMMANDS: readonly Command[] = [
  proxyCommand,
  demoCommand,
  hashCommand,
  rangesCommand,
  preflightCommand,
  auditCommand,
  managerCommand,
  devapiCommand,
];
