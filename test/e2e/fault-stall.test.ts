/**
 * Issue 12, faults: an upstream that stalls mid-list and mid-watch (a TCP
 * link between the proxies and devapi stops forwarding after a point), then
 * recovers, is cut, or is given up on by the controller's own timeout. No
 * controller caches a partial list, none is handed an object outside its
 * shard, every cache ends exact, and the proxy gives up upstream what its
 * controller gave up. The real-server counterpart is
 * test/real/fault-stall.test.ts; the scenarios are shared.
 */
import t from "tap";
import { devapiServer } from "../support/faults/servers.ts";
import { midListStallScenario, midWatchStallScenario } from "../support/faults/stall.ts";

const NAMESPACES = ["alpha", "beta", "gamma", "delta"];
const server = (gate: "on" | "off") => devapiServer({ gate, pods: 2000, namespaces: NAMESPACES });

for (const gate of ["on", "off"] as const) {
  for (const end of ["resume", "cut"] as const) {
    t.test(`gate ${gate}: a LIST stalled mid-body, then ${end === "resume" ? "resumed" : "cut"}: no partial cache, exact in the end, nothing out of range`, async (t) => {
      await midListStallScenario(t, await server(gate), end);
    });
  }
  for (const end of ["resume", "client-timeout"] as const) {
    t.test(`gate ${gate}: a WATCH stalled mid-stream, then ${end === "resume" ? "resumed" : "timed out by the controller"}: exact in the end, nothing out of range`, async (t) => {
      await midWatchStallScenario(t, await server(gate), end);
    });
  }
}
