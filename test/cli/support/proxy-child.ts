/**
 * Runs `shardcar proxy` (src/cli/main.ts) in a process of its own and, when
 * told to stop, reports every specifier it resolved from
 * `@kubernetes/client-node`: the sidecar's footprint (P6) depends on never
 * loading it in ring mode unless the credentials need it.
 *
 * argv: the proxy's flags. IPC: any message stops it; it answers
 * `{ type: "done", code, clientNode }`.
 */
import { registerHooks } from "node:module";

const clientNode: string[] = [];
registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === "@kubernetes/client-node" || specifier.startsWith("@kubernetes/client-node/")) clientNode.push(specifier);
    return nextResolve(specifier, context);
  },
});

const { main } = await import("../../../src/cli/main.ts");
const stop = new AbortController();
process.once("message", () => stop.abort());
const code = await main(["proxy", ...process.argv.slice(2)], { stdout: process.stdout, stderr: process.stderr, env: process.env, signal: stop.signal });
process.send?.({ type: "done", code, clientNode });
process.disconnect();
