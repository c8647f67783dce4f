/**
 * Runs `shardcar proxy` (src/cli/main.ts) in a process of its own, as the
 * sidecar container runs it, with a small IPC face for the tests:
 *
 * - `{ type: "stop" }`: stops it as SIGTERM would (it leaves the ring, then
 *   closes); it answers `{ type: "done", code, clientNode }`, where
 *   `clientNode` lists every specifier it resolved from
 *   `@kubernetes/client-node` (the sidecar's footprint, P6, depends on never
 *   loading it in ring mode unless the credentials need it);
 * - `{ type: "sample", gc? }`: answers `{ type: "sample", memory }` with
 *   `process.memoryUsage()`, the heap figures only the process itself can
 *   read (RSS, file descriptors and sockets are read from /proc by the
 *   parent); with `gc: true` and `--expose-gc`, after a full collection, so
 *   the heap is what is live (a leak), not what is garbage yet;
 * - `{ type: "heap-snapshot", file }`: writes a V8 heap snapshot there and
 *   answers `{ type: "heap-snapshot", file }` (to look into a failing slope).
 *
 * argv: the proxy's flags. A SIGKILL is a SIGKILL: nothing here runs then.
 */
import { registerHooks } from "node:module";
import { writeHeapSnapshot } from "node:v8";

const clientNode: string[] = [];
registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === "@kubernetes/client-node" || specifier.startsWith("@kubernetes/client-node/")) clientNode.push(specifier);
    return nextResolve(specifier, context);
  },
});

const { main } = await import("../../src/cli/main.ts");
const stop = new AbortController();
process.on("message", (m: { type?: string }) => {
  if (m.type === "heap-snapshot") {
    // Diagnostics for a slope that fails: compare two snapshots' constructors.
    (globalThis as { gc?: () => void }).gc?.();
    process.send?.({ type: "heap-snapshot", file: writeHeapSnapshot((m as { file?: string }).file) });
  } else if (m.type === "sample") {
    if ((m as { gc?: boolean }).gc === true) (globalThis as { gc?: () => void }).gc?.();
    process.send?.({ type: "sample", memory: process.memoryUsage() });
  }
  else stop.abort();
});
const code = await main(["proxy", ...process.argv.slice(2)], { stdout: process.stdout, stderr: process.stderr, env: process.env, signal: stop.signal });
process.send?.({ type: "done", code, clientNode });
process.disconnect();
