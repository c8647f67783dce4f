/**
 * Issue 12, faults: the proxy (a real `shardcar proxy` process) is SIGKILLed
 * under a live client-node informer and restarted on the same port, as a
 * native sidecar restarts; once for one shard, once for all at once. Every
 * cache ends exact, and no controller is ever handed an object outside its
 * shard. The real-server counterpart is test/real/fault-proxy-kill.test.ts;
 * the scenario is shared.
 */
import t from "tap";
import { proxyKillScenario } from "../support/faults/proxy-kill.ts";
import { devapiServer } from "../support/faults/servers.ts";

const NAMESPACES = ["alpha", "beta", "gamma", "delta"];

for (const gate of ["on", "off"] as const) {
  t.test(`gate ${gate}: a SIGKILLed proxy restarted on its port brings its controller back to an exact cache with nothing out of range`, async (t) => {
    await proxyKillScenario(t, await devapiServer({ gate, pods: 2000, namespaces: NAMESPACES }));
  });
}
