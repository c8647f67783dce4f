/**
 * Fault: the apiserver restarts while lists and watches are open. Three
 * shards under steady churn; one more controller's LIST is held mid-body by
 * the link when the server goes down, so a list is open at that moment as
 * well as every watch. The proxies see their upstream connections end in the
 * middle of a list and of every watch, the churn's writes fail while the
 * server is down, and the server comes back on the same address and data.
 */
import type { Test } from "tap";
import { startHttpChurn } from "../http-churn.ts";
import { waitUntil } from "../http.ts";
import { FaultRig } from "./rig.ts";
import type { FaultServer } from "./servers.ts";

/** `clientGo`: the client-go controller's binary, to run one more controller, client-go's own (`RigOptions.clientGo`). */
export async function apiserverRestartScenario(t: Test, server: FaultServer, opts: { readonly clientGo?: string } = {}): Promise<void> {
  const restart = server.restart;
  if (restart === undefined) throw new Error(`${server.kind}: this server cannot be restarted by the test`);
  const rig = await FaultRig.start(t, server, { shards: 3, link: true, ...opts });
  t.ok(await rig.waitExact(30_000), "every cache is exact before the fault");
  const churn = await startHttpChurn(t, server.target, { ratePerSec: 40, namespaces: server.namespaces, seed: 3 });

  // A fourth controller, owning the whole keyspace (the largest LIST), whose
  // LIST is mid-body when the server stops: more than the sockets on the way
  // can absorb is still unsent, so the restart cuts it.
  const link = rig.link;
  if (link === undefined) throw new Error("the rig has no link");
  link.stallNext(64 * 1024);
  const late = await rig.addShard(0, 1, "in-process", { awaitStart: false });
  await waitUntil("the late controller's LIST is held mid-body", () => link.open().some((c) => c.stalled && c.down > 0), 20_000);
  const listsBefore = FaultRig.controllerOf(late).lists();
  t.equal(FaultRig.controllerOf(late).idents().size, 0, "a controller whose LIST is cut off mid-body has cached nothing yet");

  const openAtRestart = link.open().length;
  const writesBefore = churn.ops();
  // The late controller's held LIST notices only once the link lets go.
  const watching = rig.shards.filter((s) => s !== late);
  const errorsBefore = watching.map((s) => FaultRig.controllerOf(s).errors.length);
  await restart(async () => {
    // Down until every watching controller noticed: its watch ended, its
    // re-watch or relist was refused. And writes were tried meanwhile.
    await waitUntil("every watching controller noticed the server was down", () => watching.every((s, i) => FaultRig.controllerOf(s).errors.length > (errorsBefore[i] ?? 0)), 20_000);
    await waitUntil("the churn tried writes while the server was down", () => churn.ops() >= writesBefore + 20, 20_000);
  });
  const writesDown = churn.ops() - writesBefore;
  t.comment(`${server.kind} restarted with ${openAtRestart} upstream connections open (lists and watches), ${writesDown} writes attempted meanwhile`);
  link.resume();
  // Writes through the restarted server while the controllers come back: counted, not timed.
  const writesAtRestart = churn.ops();
  await waitUntil("the churn wrote through the restarted server", () => churn.ops() >= writesAtRestart + 60, 20_000);
  const { ops, errors } = await churn.stop();
  // That it wrote before, during and after is what the waits above ensured.
  t.comment(`the churn: ${ops} writes, ${errors} failed while the server was down`);
  await rig.assertExactAndNeverOutOfRange(t, 45_000);
  t.ok(FaultRig.controllerOf(late).lists() > listsBefore, `the controller whose LIST was cut by the restart listed again (${FaultRig.controllerOf(late).lists()} LISTs)`);
}
