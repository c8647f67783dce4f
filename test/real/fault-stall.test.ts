/**
 * Issue 12, faults, real-server lane: the real apiserver's bytes stall
 * mid-list and mid-watch (a TCP link between the proxies and the server
 * stops forwarding; TLS passes through it untouched), then recover, are
 * cut, or are given up on by the controller's own timeout. The devapi
 * counterpart is test/e2e/fault-stall.test.ts; the scenarios are shared.
 */
import t from "tap";
import { NAMESPACES } from "./support/dataset.ts";
import { realApiEnv } from "./support/realapi.ts";
import { sharedRealapi } from "../support/faults/servers.ts";
import { midListStallScenario, midWatchStallScenario } from "../support/faults/stall.ts";

const env = realApiEnv();

for (const end of ["resume", "cut"] as const) {
  t.test(`gate ${env.gate}: a LIST stalled mid-body, then ${end === "resume" ? "resumed" : "cut"}: no partial cache, exact in the end, nothing out of range`, async (t) => {
    await midListStallScenario(t, sharedRealapi(env, NAMESPACES), end);
  });
}
for (const end of ["resume", "client-timeout"] as const) {
  t.test(`gate ${env.gate}: a WATCH stalled mid-stream, then ${end === "resume" ? "resumed" : "timed out by the controller"}: exact in the end, nothing out of range`, async (t) => {
    await midWatchStallScenario(t, sharedRealapi(env, NAMESPACES), end);
  });
}
