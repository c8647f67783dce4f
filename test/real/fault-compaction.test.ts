/**
 * Issue 12, faults, real-server lane: etcd compacts (through etcd's HTTP
 * gateway, `POST /v3/kv/compaction`; the kit has no etcdctl), so a resuming
 * watch gets 410 and relists (the apiserver restarts after the compaction,
 * or its watch cache would still serve the events from memory), and a paged
 * LIST's continue token expires mid-list. Runs on a private realapi of its
 * own, with the lane's gate. The devapi counterpart is
 * test/e2e/fault-compaction.test.ts; the scenario is shared.
 */
import t from "tap";
import { buildClientGoController } from "../support/client-go-controller.ts";
import { NAMESPACES } from "./support/dataset.ts";
import { realApiEnv } from "./support/realapi.ts";
import { compactionScenario } from "../support/faults/compaction.ts";
import { privateRealapi } from "../support/faults/servers.ts";

const env = realApiEnv();
// One controller more, client-go's own reflector (protobuf, watch-list), when
// the kit's Go toolchain can build it; otherwise that part is skipped, with why.
const built = await buildClientGoController();
const clientGo = built.ok ? { clientGo: built.binary } : {};
if (!built.ok) t.test("with a client-go controller too", { skip: `client-go controller not built: ${built.reason}` }, () => {});

t.test(`gate ${env.gate}: after an etcd compaction, resumes get 410 and relist, a paged LIST falls back to a full one, and caches end exact with nothing out of range`, async (t) => {
  await compactionScenario(t, await privateRealapi({ pods: 300, namespaces: NAMESPACES }), clientGo);
});
