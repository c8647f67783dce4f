/**
 * Issue 2, acceptance (c): a client that drops a watch mid-stream leaves no
 * open upstream watch (the http-proxy 1.18 leak this project must not have).
 */
import t from "tap";
import { request } from "node:http";
import { startDevApi, seedPods } from "../../src/devapi/index.ts";
import { silentLogger } from "../../src/log.ts";
import { StaticOwnership } from "../../src/shard/ownership.ts";
import { startProxy } from "../../src/proxy/run.ts";
import { makeUpstream } from "../../src/proxy/serving/upstream.ts";
import { shardRange } from "../../src/shard/range.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { eventually } from "../support/cluster.ts";

for (const target of ["/api/v1/pods?watch=true", "/api/v1/services?watch=true", "/api/v1/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"]) {
  t.test(`a client that disconnects mid-stream closes the upstream watch (${target})`, async (t) => {
    const api = await startDevApi({ gate: "off" });
    seedPods(api, { count: 200, namespaces: 2 });
    api.registerResource({ group: "", version: "v1", resource: "services", kind: "Service", namespaced: true });
    // A service too, so that every one of these watches has initial events to stream.
    api.store.create({ group: "", version: "v1", resource: "services" }, { metadata: { name: "web", namespace: "ns-0" }, spec: { ports: [{ port: 80 }] } });
    const proxy = await startProxy({
      listen: { host: "127.0.0.1", port: 0 },
      upstream: makeUpstream(api.url),
      resources: parseResources("pods"),
      ownership: new StaticOwnership([shardRange(0, 2)]),
      fallback: "filter",
      logger: silentLogger(),
    });
    t.teardown(async () => {
      await proxy.close();
      await api.close();
    });
    const url = new URL(target, proxy.url);
    let bytes = 0;
    const req = request(url, { headers: { authorization: "Bearer x" } }, (res) => {
      res.on("data", (b: Buffer) => {
        bytes += b.length;
      });
    });
    req.on("error", () => undefined);
    req.end();
    t.ok(await eventually(() => api.stats.openWatches === 1), "the watch is open upstream");
    t.ok(await eventually(() => bytes > 0), "the client is mid-stream: events arrived");
    // Vanish without a goodbye, mid-stream.
    req.destroy();
    t.comment(`the client read ${bytes} bytes before leaving`);
    t.ok(await eventually(() => api.stats.openWatches === 0), "devapi has no open watch left");
  });
}
