import type { CommandEntry } from "../command.ts";

/**
 * Every subcommand, in the order `shardcar --help` lists them. Each is
 * loaded only when run: the sidecar must not pay at start for the manager,
 * the demo or devapi (design target P6, idle RSS).
 */
export const COMMANDS: readonly CommandEntry[] = [
  { name: "proxy", summary: "run the sharding proxy in front of one controller (the sidecar)", load: async () => (await import("./proxy.ts")).proxyCommand },
  { name: "demo", summary: "run the demo: devapi, controller replicas in ring mode, scale, kill, gate off and on, an HTML report", load: async () => (await import("./demo.ts")).demoCommand },
  { name: "hash", summary: "print the FNV-1a 64 hash of values, as the apiserver computes it, or locate a live object", load: async () => (await import("./hash.ts")).hashCommand },
  { name: "ranges", summary: "print the N equal shard ranges and their canonical selectors, or which one holds a live object", load: async () => (await import("./ranges.ts")).rangesCommand },
  { name: "preflight", summary: "check a cluster before enabling shardcar for a controller (gate, RBAC, lock, webhook, labels)", load: async () => (await import("./preflight.ts")).preflightCommand },
  { name: "audit", summary: "check that every object is served by exactly one replica (silent gaps, duplicates, skew, canaries)", load: async () => (await import("./audit.ts")).auditCommand },
  { name: "manager", summary: "serve the injection webhook (and the label-slot one), coordinate shard rings and label their objects, in shardcar-system", load: async () => (await import("./manager.ts")).managerCommand },
  { name: "devapi", summary: "run the in-memory API server (KEP-5866 sharding, switchable gate) for tests and demos", load: async () => (await import("./devapi.ts")).devapiCommand },
];
