/**
 * Issue 12, faults, real-server lane: each shard's proxy is a real `shardcar
 * proxy` process in front of the real apiserver (verified TLS); it is
 * SIGKILLed under a live client-node informer and restarted on the same port,
 * as a native sidecar restarts. Every cache ends exact, and no controller is
 * ever handed an object outside its shard. The devapi counterpart is
 * test/e2e/fault-proxy-kill.test.ts; the scenario is shared.
 */
import t from "tap";
import { NAMESPACES } from "./support/dataset.ts";
import { realApiEnv } from "./support/realapi.ts";
import { proxyKillScenario } from "../support/faults/proxy-kill.ts";
import { sharedRealapi } from "../support/faults/servers.ts";

const env = realApiEnv();

t.test(`gate ${env.gate}: a SIGKILLed proxy restarted on its port brings its controller back to an exact cache with nothing out of range`, async (t) => {
  await proxyKillScenario(t, sharedRealapi(env, NAMESPACES));
});
