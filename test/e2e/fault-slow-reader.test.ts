/**
 * Issue 12, faults: a controller that stops reading a big LIST or a busy
 * WATCH. The proxy (a `shardcar proxy` process, TLS on both sides as in a
 * pod) must hold a bounded amount (RSS, heap, bytes it took from the server
 * and did not pass on) and pass the backpressure to the apiserver instead of
 * buffering. Gate on, the proxy owns the whole keyspace and passes the
 * server's bytes through (every byte accounted for); gate off, it owns a
 * real shard and its filter drops half of what it reads. The real-server
 * counterpart (test/real/fault-slow-reader.test.ts) also runs the whole
 * keyspace with the gate off; the scenario is shared.
 */
import t from "tap";
import { devapiServer } from "../support/faults/servers.ts";
import { bigPods, slowReaderScenario } from "../support/faults/slow-reader.ts";

for (const gate of ["on", "off"] as const) {
  t.test(`gate ${gate}`, async (t) => {
    const server = await devapiServer({ gate, pods: 0, namespaces: ["big"], tls: true });
    t.teardown(() => server.stop());
    // 77 MiB of pods: far more than any bound, and more than the socket buffers on the way.
    const data = await bigPods(server, "big", 1200, 64 * 1024);
    const shards = gate === "on" ? "0/1" : "0/2";
    for (const what of ["list", "watch"] as const) {
      await t.test(`a controller that stops reading a ${what === "list" ? "big LIST" : "busy WATCH"} (proxy ${shards}) leaves the proxy bounded, with backpressure to the apiserver`, (t) => slowReaderScenario(t, server, data, what, shards));
    }
  });
}
