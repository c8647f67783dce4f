/**
 * Fault: the sidecar is SIGKILLed under a live controller and restarted on
 * the same port, as the kubelet restarts a native sidecar (the controller's
 * kubeconfig keeps pointing at it). Each shard's proxy is a real
 * `shardcar proxy` process. The controllers' streams break without a
 * goodbye, their requests are refused while the proxy is down, writes go on,
 * and each controller must come back to an exact cache through the new
 * process, with nothing out of range in between.
 */
import type { Test } from "tap";
import { startHttpChurn } from "../http-churn.ts";
import { waitUntil } from "../http.ts";
import { FaultRig } from "./rig.ts";
import type { FaultServer } from "./servers.ts";

export async function proxyKillScenario(t: Test, server: FaultServer): Promise<void> {
  const rig = await FaultRig.start(t, server, { shards: 3, proxies: "process" });
  t.ok(await rig.waitExact(30_000), "every cache is exact before the fault");
  let writes = 0;
  for (const round of [1, 2]) {
    // Round 1 kills one proxy, round 2 all of them at once (a node-wide OOM kill).
    const victims = round === 1 ? rig.shards.slice(1, 2) : rig.shards;
    const churn = await startHttpChurn(t, server.target, { ratePerSec: 40, namespaces: server.namespaces, seed: 7 + round });
    const pids = victims.map((s) => FaultRig.processOf(s).pid);
    const errorsBefore = victims.map((s) => FaultRig.controllerOf(s).errors.length);
    await Promise.all(victims.map((s) => FaultRig.processOf(s).kill("SIGKILL")));
    const killedAt = Date.now();
    await waitUntil("every controller of a killed proxy noticed", () => victims.every((s, i) => FaultRig.controllerOf(s).errors.length > (errorsBefore[i] ?? 0)), 20_000);
    t.comment(`round ${round}: the controllers noticed after ${Date.now() - killedAt} ms`);
    const writesAt = churn.ops();
    await waitUntil("the churn wrote while the proxies were down", () => churn.ops() >= writesAt + 20, 20_000);
    await Promise.all(victims.map((s) => FaultRig.processOf(s).restart()));
    t.ok(
      victims.every((s, i) => FaultRig.processOf(s).pid !== undefined && FaultRig.processOf(s).pid !== pids[i]),
      `round ${round}: ${victims.map((s) => s.name).join(", ")} SIGKILLed and restarted as new processes on the same port (${victims.map((s) => s.proxy.url).join(", ")})`,
    );
    // A little churn through the new processes (counted, not timed), then quiet, so "exact" has a fixed target.
    const writesAtRestart = churn.ops();
    await waitUntil("the churn wrote through the restarted proxies' server", () => churn.ops() >= writesAtRestart + 40, 20_000);
    const { ops, errors } = await churn.stop();
    writes += ops;
    t.equal(errors, 0, `round ${round}: every write succeeded (${ops})`);
    const t0 = Date.now();
    t.ok(await rig.waitExact(45_000), `round ${round}: every cache is exact again through the restarted proxies (after ${Date.now() - t0} ms)`);
  }
  t.comment(`the churn: ${writes} writes in both rounds`);
  await rig.assertExactAndNeverOutOfRange(t, 45_000);
}
