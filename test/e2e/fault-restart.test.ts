/**
 * Issue 12, faults: the apiserver restarts while lists and watches are open
 * (devapi closes every connection, refuses new ones, and comes back on the
 * same port and data). Every cache ends exact, and no controller is ever
 * handed an object outside its shard. The real-server counterpart is
 * test/real/fault-restart.test.ts; the scenario is shared.
 */
import t from "tap";
import { apiserverRestartScenario } from "../support/faults/restart.ts";
import { devapiServer } from "../support/faults/servers.ts";

const NAMESPACES = ["alpha", "beta", "gamma", "delta"];

for (const gate of ["on", "off"] as const) {
  t.test(`gate ${gate}: an apiserver restart under open lists and watches ends with exact caches and nothing out of range`, async (t) => {
    await apiserverRestartScenario(t, await devapiServer({ gate, pods: 3000, podBytes: 4096, namespaces: NAMESPACES }));
  });
}
