/**
 * The leak reports' own tool: an upstream request left in use is named by
 * its method, path and token, and one that ended is no longer listed.
 */
import t from "tap";
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { describeAgentRequests } from "./live-proxy.ts";

t.test("an upstream request in use is named by its method, path and token, until it ends", async (t) => {
  const server = createServer(() => {
    // Never answers: the request stays in use.
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const agent = new Agent({ keepAlive: true });
  t.teardown(() => agent.destroy());
  const arrived = new Promise<void>((r) => server.once("request", () => r()));
  const req = request({ host: "127.0.0.1", port: (server.address() as AddressInfo).port, path: "/api/v1/pods?watch=1", agent, headers: { authorization: "Bearer fuzz-7-42-0" } });
  req.on("error", () => undefined);
  req.end();
  await arrived;
  t.same(describeAgentRequests(agent), ['GET "/api/v1/pods?watch=1" (token fuzz-7-42-0)']);
  const closed = new Promise<void>((r) => req.once("close", () => r()));
  req.destroy();
  await closed;
  t.same(describeAgentRequests(agent), [], "an ended request is not listed");
});
