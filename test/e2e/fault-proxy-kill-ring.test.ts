/**
 * Issue 12, faults, ring mode: ring members are real `shardcar proxy
 * --shards ring` processes; one, then both, are SIGKILLed under their live
 * client-node informers and restarted on the same port with the same pod
 * name, as the kubelet restarts a native sidecar. The new process takes its
 * member Lease over at once (same member, new incarnation), gets its ranges
 * from the ShardRing, and refuses the old cache's resume with 410 (it cannot
 * place it), so the controller relists. Every cache ends exact, and no
 * controller is ever handed an object outside the ranges its member was
 * given. The static-shard variant is test/e2e/fault-proxy-kill.test.ts.
 */
import t from "tap";
import { Fleet } from "../ring/fleet.ts";
import { eventually, startChurn } from "../support/cluster.ts";
import { Witness } from "../support/witness.ts";

const NAMESPACES = ["alpha", "beta", "gamma"];

t.test("ring mode: a SIGKILLed member proxy restarted on its port brings its controller back to an exact cache, with nothing outside its ranges", async (t) => {
  const fleet = await Fleet.start({ ring: "kill", pods: 2000, namespaces: NAMESPACES });
  t.teardown(() => fleet.stop());
  const witness = new Witness();
  for (const name of ["m-0", "m-1"]) await fleet.join(name, witness);
  t.ok(await eventually(() => fleet.exact(), 60_000), "the ring settled with exact caches");
  let writes = 0;
  for (const [round, victims] of [[1, ["m-1"]], [2, ["m-0", "m-1"]]] as const) {
    const churn = startChurn(t, fleet.env.api, { ratePerSec: 40, namespaces: NAMESPACES, seed: 29 + round, prefix: `churn-${round}` });
    const lists = victims.map((n) => fleet.members.get(n)?.controller.lists() ?? 0);
    const pids = victims.map((n) => fleet.members.get(n)?.proxy.pid);
    for (const n of victims) await fleet.kill(n);
    const writesAt = churn.ops();
    t.ok(await eventually(() => churn.ops() >= writesAt + 40, 20_000), `round ${round}: writes went on while ${victims.join(", ")} were down`);
    for (const n of victims) await fleet.restart(n);
    t.ok(victims.every((n, i) => fleet.members.get(n)?.proxy.pid !== pids[i]), `round ${round}: ${victims.join(", ")} restarted as new processes on the same port`);
    // A little churn through the new processes (counted, not timed), then quiet, so "exact" has a fixed target.
    await churn.reached(churn.ops() + 20);
    writes += await churn.stop();
    t.ok(await eventually(() => fleet.exact(), 60_000), `round ${round}: every cache holds exactly its member's committed ranges again`);
    t.ok(
      victims.every((n, i) => (fleet.members.get(n)?.controller.lists() ?? 0) > (lists[i] ?? 0)),
      `round ${round}: each restarted member's controller relisted (its resume was refused: the new process cannot place it)`,
    );
  }
  t.comment(`the churn: ${writes} writes in both rounds`);
  t.same(witness.outOfRange.slice(0, 10), [], `no controller was ever handed an object outside the ranges its member was given (${witness.total()} handler calls checked)`);
});
