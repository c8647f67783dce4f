/**
 * Issue 12, faults, real-server lane: a controller that stops reading a big
 * LIST or a busy WATCH of the real apiserver (80 MiB of pods of ~200 kB in a
 * namespace of their own, removed at the end). The proxy (a `shardcar proxy`
 * process, TLS on both sides as in a pod) must hold a bounded amount and
 * pass the backpressure to the apiserver: owning the whole keyspace (every
 * byte accounted for), and with the gate off also a real shard whose filter
 * drops half of what it reads. The devapi counterpart is test/e2e/fault-slow-reader.test.ts;
 * the scenario is shared.
 */
import t from "tap";
import { realApiEnv } from "./support/realapi.ts";
import { sharedRealapi } from "../support/faults/servers.ts";
import { bigPods, slowReaderScenario } from "../support/faults/slow-reader.ts";

const env = realApiEnv();
const server = sharedRealapi(env, ["fault-slow-reader"]);
// realapi's metadata validation caps a pod's annotations at 256 kB.
const data = await bigPods(server, "fault-slow-reader", 400, 200 * 1024);
t.teardown(() => data.cleanUp());

for (const shards of env.gate === "on" ? (["0/1"] as const) : (["0/1", "0/2"] as const)) {
  for (const what of ["list", "watch"] as const) {
    t.test(`gate ${env.gate}: a controller that stops reading a ${what === "list" ? "big LIST" : "busy WATCH"} (proxy ${shards}) leaves the proxy bounded, with backpressure to the apiserver`, (t) => slowReaderScenario(t, server, data, what, shards));
  }
}
