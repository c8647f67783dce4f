/**
 * Issue 12, faults, real-server lane: the real apiserver restarts
 * (`stop.sh` without --clean, `start.sh` again on the same run directory and
 * port, the same etcd data) while lists and watches are open. Runs on a
 * private realapi of its own, with the lane's gate. Every cache ends exact,
 * and no controller is ever handed an object outside its shard. The devapi
 * counterpart is test/e2e/fault-restart.test.ts; the scenario is shared.
 */
import t from "tap";
import { NAMESPACES } from "./support/dataset.ts";
import { realApiEnv } from "./support/realapi.ts";
import { apiserverRestartScenario } from "../support/faults/restart.ts";
import { privateRealapi } from "../support/faults/servers.ts";

const env = realApiEnv();

t.test(`gate ${env.gate}: a real apiserver restart under open lists and watches ends with exact caches and nothing out of range`, async (t) => {
  // Pods of ~8 kB (8 MiB in all), so the whole-keyspace LIST held mid-body at the restart
  // is larger than the socket buffers on the way: the restart cuts it.
  await apiserverRestartScenario(t, await privateRealapi({ pods: 1000, podBytes: 8192, namespaces: NAMESPACES }));
});
