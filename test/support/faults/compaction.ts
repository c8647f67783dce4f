/**
 * Fault: the history is compacted under the controllers, so what they resume
 * from is gone and the server answers 410 Expired.
 *
 * 1. Resuming watches: the controllers' watches are held by the link while
 *    the churn writes, the server compacts at the newest revision, and the
 *    held connections are cut; every controller resumes from a
 *    resourceVersion older than the compaction, gets 410 and relists.
 *    (realapi serves watches from its watch cache, which keeps the events in
 *    memory after an etcd compaction; it forgets them when the apiserver
 *    restarts, so there the compaction is followed by a restart.)
 * 2. A paged LIST (client-go's pager: limit, continue) across a compaction:
 *    the continue token names a compacted revision, the 410 passes through
 *    the proxy, and the controller falls back to a full list. (realapi 1.36
 *    serves continue tokens and exact-resourceVersion lists from its watch
 *    cache's snapshots, so there too the compaction is followed by a restart.)
 */
import type { Test } from "tap";
import { startHttpChurn } from "../http-churn.ts";
import { callJson, waitUntil } from "../http.ts";
import { FaultRig } from "./rig.ts";
import type { FaultServer } from "./servers.ts";

/** `clientGo`: the client-go controller's binary, to run one more controller, client-go's own (`RigOptions.clientGo`). */
export async function compactionScenario(t: Test, server: FaultServer, opts: { readonly clientGo?: string } = {}): Promise<void> {
  const compact = server.compact;
  if (compact === undefined) throw new Error(`${server.kind}: this server cannot be compacted by the test`);
  const rig = await FaultRig.start(t, server, { shards: 3, link: true, ...opts });
  const link = rig.link;
  if (link === undefined) throw new Error("the rig has no link");
  t.ok(await rig.waitExact(30_000), "every cache is exact before the fault");

  // 1. Resuming watches.
  const listsBefore = rig.shards.map((s) => FaultRig.controllerOf(s).lists());
  link.stallOpen(0);
  const churn = await startHttpChurn(t, server.target, { ratePerSec: 40, namespaces: server.namespaces, seed: 5 });
  await waitUntil("the churn wrote while the watches were held", () => churn.ops() >= 40, 20_000);
  const revision = await compact();
  if (server.watchCache && server.restart !== undefined) await server.restart();
  t.comment(`${server.kind} compacted at resourceVersion ${revision}${server.watchCache ? " and restarted (its watch cache had kept the events)" : ""}; ${link.cutStalled()} held watch connections cut`);
  // Writes go on while the controllers resume, get 410 and relist: counted, not timed.
  const writesAtCut = churn.ops();
  await waitUntil("the churn wrote while the controllers relisted", () => churn.ops() >= writesAtCut + 40, 20_000);
  const { ops, errors } = await churn.stop();
  t.comment(`the churn: ${ops} writes, ${errors} failed`);
  await rig.assertExactAndNeverOutOfRange(t, 45_000);
  rig.shards.forEach((s, i) => t.ok(FaultRig.controllerOf(s).lists() > (listsBefore[i] ?? 0), `${s.name} relisted after its resume got 410 (${FaultRig.controllerOf(s).lists()} LISTs)`));

  // 2. A paged LIST across a compaction.
  let compactedAt = "";
  const pager = await rig.addShard(1, 3, "in-process", {
    pageSize: 50,
    beforePage: async (page) => {
      if (page !== 1 || compactedAt !== "") return;
      // A write after the first page, then a compaction at it: the first page's snapshot is gone.
      const ns = server.namespaces[0] ?? "default";
      await callJson(server.target, "POST", `/api/v1/namespaces/${ns}/pods`, { apiVersion: "v1", kind: "Pod", metadata: { name: "compaction-marker", namespace: ns }, spec: { containers: [{ name: "main", image: "registry.invalid/app:1" }] } });
      compactedAt = await compact();
      // realapi serves continue tokens from its watch cache's snapshots, which
      // outlive an etcd compaction; a restart drops them, and the token then
      // goes to etcd.
      if (server.watchCache && server.restart !== undefined) await server.restart();
    },
  });
  const pagerController = FaultRig.controllerOf(pager);
  t.ok(compactedAt !== "", `the server compacted (at ${compactedAt})${server.watchCache ? " and restarted" : ""} between the first and the second page`);
  t.equal(pagerController.expiredContinues(), 1, "the continue token after the compaction got 410 through the proxy, and the pager fell back to a full list");
  await rig.assertExactAndNeverOutOfRange(t, 30_000);
}
