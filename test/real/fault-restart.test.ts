/**
 * Issue 12, faults, real-server lane: the real apiserver restarts
 * (`stop.sh` without --clean, `start.sh` again on the same run directory and
 * port, the same etcd data) while lists and watches are open. Runs on a
 * private realapi of its own, with the lane's gate. Every cache ends exact,
 * and no controller is ever handed an object outside its shard. The devapi
 * counterpart is test/e2e/fault-restart.test.ts; the scenario is shared.
 */
import t from "tap";
import { buildClientGoController } from "../support/client-go-controller.ts";
import { NAMESPACES } from "./support/dataset.ts";
import { realApiEnv } from "./support/realapi.ts";
import { apiserverRestartScenario } from "../support/faults/restart.ts";
import { privateRealapi } from "../support/faults/servers.ts";

const env = realApiEnv();
// One controller more, client-go's own reflector (protobuf, watch-list), when
// the kit's Go toolchain can build it; otherwise that part is skipped, with why.
const built = await buildClientGoController();
const clientGo = built.ok ? { clientGo: built.binary } : {};
if (!built.ok) t.test("with a client-go controller too", { skip: `client-go controller not built: ${built.reason}` }, () => {});

t.test(`gate ${env.gate}: a real apiserver restart under open lists and watches ends with exact caches and nothing out of range`, async (t) => {
  // Pods of ~8 kB (8 MiB in all), so the whole-keyspace LIST held mid-body at the restart
  // is larger than the socket buffers on the way: the restart cuts it.
  await apiserverRestartScenario(t, await privateRealapi({ pods: 1000, podBytes: 8192, namespaces: NAMESPACES }), clientGo);
});
