/**
 * Issue 12, faults: a controller that stops reading a big LIST or a busy
 * WATCH. The proxy (a `shardcar proxy` process) must hold a bounded amount
 * (RSS, heap, bytes it took from the server and did not pass on) and pass
 * the backpressure to the apiserver instead of buffering. The real-server
 * counterpart is test/real/fault-slow-reader.test.ts; the scenario is shared.
 */
import t from "tap";
import { devapiServer } from "../support/faults/servers.ts";
import { bigPods, slowReaderScenario } from "../support/faults/slow-reader.ts";

for (const gate of ["on", "off"] as const) {
  t.test(`gate ${gate}`, async (t) => {
    const server = await devapiServer({ gate, pods: 0, namespaces: ["big"] });
    t.teardown(() => server.stop());
    // 77 MiB of pods: far more than any bound, and more than the socket buffers on the way.
    const data = await bigPods(server, "big", 1200, 64 * 1024);
    for (const what of ["list", "watch"] as const) {
      await t.test(`a controller that stops reading a ${what === "list" ? "big LIST" : "busy WATCH"} leaves the proxy bounded, with backpressure to the apiserver`, (t) => slowReaderScenario(t, server, data, what));
    }
  });
}
