import t from "tap";
import { LEAVING_ANNOTATION, memberLeaseName } from "../../src/ring/names.ts";
import { LEASE_REF, NS, RingEnv } from "./harness.ts";

// A terminating pod's controller must keep its slots covered until they are
// handed on (issue 32, "Rolling update without a gap"): its preStop hook asks
// the sidecar to step aside while the controller still runs, and only then
// does the kubelet stop the controller. A step aside not followed by the
// pod's end (a liveness restart of the controller) is taken back.

t.test("a member that steps aside hands every slot on while it still holds its Lease, with no uncovered sample", async (t) => {
  const env = await RingEnv.start("aside");
  t.teardown(() => env.stop());
  env.createRing({ handoff: "overlap", slots: 256 });
  env.startCoordinator();
  for (const n of ["web-0", "web-1"]) await env.addMember(n);
  // A leave timeout no test waits out: the step aside must end by the handoff.
  await env.addMember("web-2", { leaveTimeoutMs: 600_000 });
  await env.settled(["web-0", "web-1", "web-2"]);
  env.phase = "graceful";
  env.startSampling();

  const leaver = env.members.get("web-2");
  if (leaver === undefined) throw new Error("no web-2");
  // Asked twice at once (a hook retried): both answers come when the slots are handed on.
  await Promise.all([leaver.member.stepAside(), leaver.member.stepAside()]);
  t.same(leaver.member.current().ranges, [], "it owns nothing once the step aside resolves");
  t.equal(leaver.member.leaving, true, "its Lease says leaving");
  await env.settled(["web-0", "web-1"]);
  const lease = env.api.store.get(LEASE_REF, NS, memberLeaseName("aside", "web-2"));
  t.ok(lease !== undefined, "its Lease is still held: the member runs on until the pod ends");
  t.equal(lease?.metadata?.annotations?.[LEAVING_ANNOTATION], "true");

  // The pod's end: SIGTERM after the hook only finishes the leave.
  await env.leave("web-2");
  t.equal(env.api.store.get(LEASE_REF, NS, memberLeaseName("aside", "web-2")), undefined, "leave() after a step aside deletes the Lease");
  env.phase = "done";
  t.same(env.samples.filter((s) => s.phase === "graceful" && s.uncovered > 0), [], "no sample saw an uncovered slot");
});

t.test("a step aside not followed by the pod's end is taken back: the member rejoins and is given slots again", async (t) => {
  const env = await RingEnv.start("rejoin");
  t.teardown(() => env.stop());
  env.createRing({ handoff: "overlap", slots: 256 });
  env.startCoordinator();
  for (const n of ["web-0", "web-1"]) await env.addMember(n);
  await env.settled(["web-0", "web-1"]);
  const m = env.members.get("web-1");
  if (m === undefined) throw new Error("no web-1");
  await m.member.stepAside();
  await env.settled(["web-0"]);
  m.member.rejoin();
  t.equal(m.member.leaving, false, "its Lease no longer says leaving");
  await env.settled(["web-0", "web-1"]);
  t.ok(m.member.current().ranges.length > 0, "it owns slots again");
});
