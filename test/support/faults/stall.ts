/**
 * Fault: the upstream stalls (a network path that stops delivering, an
 * apiserver that hangs) in the middle of a LIST and in the middle of a
 * WATCH. The link between the proxies and the server stops forwarding the
 * server's bytes after a point; the stall then ends (held bytes flow again),
 * or the connection is cut, or the controller's own request times out.
 *
 * What must hold: a controller never caches a partial list (a truncated
 * body must not reach it as a short, well-formed list), never sees an object
 * outside its shard, and ends with an exact cache; and a request the
 * controller gave up on is given up upstream too (no stalled connection is
 * left behind).
 */
import type { Test } from "tap";
import { startHttpChurn } from "../http-churn.ts";
import { waitUntil } from "../http.ts";
import { clusterClock } from "../wait.ts";
import { FaultRig } from "./rig.ts";
import type { FaultServer } from "./servers.ts";

/** Each proxy's first upstream connection carries its controller's LIST; it stalls after this much of the body. */
const LIST_STALL_AFTER_BYTES = 16 * 1024;

export async function midListStallScenario(t: Test, server: FaultServer, end: "resume" | "cut"): Promise<void> {
  const rig = await FaultRig.start(t, server, { shards: 3, link: true, startControllers: false, controller: { awaitStart: false } });
  const link = rig.link;
  if (link === undefined) throw new Error("the rig has no link");
  link.stallNext(LIST_STALL_AFTER_BYTES, rig.shards.length);
  await rig.startControllers();
  await waitUntil("every controller's LIST is held mid-body", () => link.open().filter((c) => c.stalled && c.down >= LIST_STALL_AFTER_BYTES).length === rig.shards.length, 20_000);
  // While held: nothing of the partial lists reaches a controller. A
  // window for the proxy to get it wrong in (end the response short, say),
  // on the cluster clock: a starved process still gets its second.
  await clusterClock.sleep(1000);
  t.same(
    rig.shards.map((s) => FaultRig.controllerOf(s).idents().size),
    rig.shards.map(() => 0),
    "while their LISTs are held mid-body, no controller has cached anything",
  );
  t.equal(rig.witness.total(), 0, "and no handler was called");
  if (end === "resume") {
    link.resume();
    t.comment("the stall ended: the held bytes flow again");
  } else {
    t.comment(`${link.cutStalled()} held LIST connections cut`);
  }
  await rig.assertExactAndNeverOutOfRange(t, 45_000);
  if (end === "cut") t.ok(rig.shards.every((s) => FaultRig.controllerOf(s).lists() >= 2), `every controller whose LIST was cut listed again (${rig.shards.map((s) => FaultRig.controllerOf(s).lists()).join(", ")} LISTs)`);
  else t.same(rig.shards.map((s) => FaultRig.controllerOf(s).lists()), rig.shards.map(() => 1), "every held LIST completed once the stall ended (one LIST each)");
}

/** How long a controller's watch may stay silent before client-node aborts it (its default is 30 s). */
const WATCH_TIMEOUT_MS = 3000;

export async function midWatchStallScenario(t: Test, server: FaultServer, end: "resume" | "client-timeout"): Promise<void> {
  const rig = await FaultRig.start(t, server, { shards: 3, link: true, ...(end === "client-timeout" ? { controller: { watchTimeoutMs: WATCH_TIMEOUT_MS } } : {}) });
  const link = rig.link;
  if (link === undefined) throw new Error("the rig has no link");
  t.ok(await rig.waitExact(30_000), "every cache is exact before the fault");
  const churn = await startHttpChurn(t, server.target, { ratePerSec: 40, namespaces: server.namespaces, seed: 11 });
  await waitUntil("the churn wrote before the stall", () => churn.ops() >= 20, 20_000);
  link.stallOpen(0);
  const held = link.open().filter((c) => c.stalled);
  t.ok(held.length >= rig.shards.length, `every watch's upstream connection is held (${held.length} connections)`);
  const writesAt = churn.ops();
  if (end === "resume") {
    await waitUntil("the churn wrote while the watches were held", () => churn.ops() >= writesAt + 60, 20_000);
    link.resume();
    t.comment(`the stall ended after ${churn.ops() - writesAt} writes`);
  } else {
    // The controllers give up on their silent watches and watch again, on
    // new upstream connections that are not held.
    await waitUntil("every controller re-watched after its watch timed out", () => link.connections().length >= held.length + rig.shards.length, WATCH_TIMEOUT_MS * 5);
    await waitUntil(
      "the proxies closed the upstream requests their controllers gave up on",
      () => held.every((c) => c.closed),
      20_000,
    );
    t.pass(`every held upstream watch was closed by its proxy once its controller timed out (${held.length} connections)`);
  }
  // Writes after the stall, counted, not timed.
  const writesAfter = churn.ops();
  await waitUntil("the churn wrote after the stall", () => churn.ops() >= writesAfter + 40, 20_000);
  const { ops, errors } = await churn.stop();
  t.comment(`the churn: ${ops} writes, ${errors} failed`);
  await rig.assertExactAndNeverOutOfRange(t, 45_000);
}
