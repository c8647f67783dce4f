import t from "tap";
import { RingEnv } from "./harness.ts";

t.test("one member behind a coordinator ends up owning the whole keyspace", async (t) => {
  const env = await RingEnv.start();
  t.teardown(() => env.stop());
  env.startCoordinator();
  await env.addMember("web-0");
  await env.settled(["web-0"]);
  t.equal(env.uncovered(), 0);
});
