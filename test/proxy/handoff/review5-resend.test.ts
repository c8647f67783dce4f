/**
 * Fifth review: 3a07445 ("a watch resuming from before a narrowing's
 * DELETEDs is sent them again"). Same scripted upstream as review4. Each
 * test failed on the code as reviewed; the names say what they keep:
 *
 *   R1  a LIST of the lineage that completes a snapshot (a one-off LIST by
 *       the controller's uncached client, no watch of the lineage open)
 *       between the cut and the re-watch clears the kept narrowings
 *       (`completeSnapshot` assumes it rebuilt "the lineage's one cache"),
 *       yet the ledger still accepts the cut cache's resume
 *   R2  the index is pruned as idle (10 min) between the cut and the
 *       re-watch: the narrowings go with it, the ledger still places the
 *       resume (its book survives the prune)
 *   R3  narrowings are recorded once per narrowed WATCH, not per
 *       narrowing: with three caches of a lineage, two later narrowings
 *       push the first out of the "last four"
 */
import t, { type Test } from "tap";
import { MutableOwnership } from "../../../src/shard/ownership.ts";
import { FULL_RANGE, shardRange } from "../../../src/shard/range.ts";
import { uidIn, pod, listBody, get, event, type ClientWatch, watch, until, setup, LOW, HIGH } from "../support/scripted-upstream.ts";

const deletedNames = (w: ClientWatch): string[] => w.events.filter((e) => e.type === "DELETED").map((e) => e.object.metadata?.name ?? "");

/** Q4's opening: a cache (x, z) at RV 10 whose watch is cut in the turn it is narrowed to LOW, before reading z's DELETED. */
async function cutAtNarrowing(t: Test) {
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const s = await setup(t, own);
  const x = pod("x", uidIn(LOW, HIGH, "x"), "5");
  const z = pod("z", uidIn(HIGH, LOW, "z"), "7");
  s.f.lists = [{ body: listBody([x, z], "10") }];
  t.equal((await get(`${s.proxy.url}/api/v1/pods`)).status, 200, "informer LIST (cache: x, z)");
  const w = watch(`${s.proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.ok(await until(() => s.f.watches.length === 1), "informer watching");
  t.equal(await w.status, 200, "served");
  own.set({ generation: 2, ranges: LOW });
  w.abort();
  await w.ended;
  t.same(deletedNames(w), [], "premise: the client never read z's DELETED (its cache: x, z; its RV: 10)");
  t.same(own.applied, [2], "premise: narrowed in place");
  return { ...s, own, x, z };
}

t.test("R1: a LIST of the lineage between a cut and its re-watch does not cost the cut cache its DELETEDs sent again", async (t) => {
  const { proxy } = await cutAtNarrowing(t);
  // The controller's uncached client (controller-runtime's APIReader, say)
  // lists the same collection while no watch of the lineage is open.
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "a one-off LIST under LOW (x only)");
  const w2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.equal(await w2.status, 200, "the cut cache's re-watch from 10 is accepted (no relist)");
  t.ok(await until(() => deletedNames(w2).includes("z"), 1000), `so z's DELETED must be sent again (got: ${JSON.stringify(w2.events)})`);
  w2.abort();
});

t.test("R2: an index pruned as idle between a cut and its re-watch does not cost the cut cache its DELETEDs sent again", async (t) => {
  const { proxy, clock } = await cutAtNarrowing(t);
  // The client comes back late (a suspended node, a long partition; the
  // apiserver's watch cache still serves RV 10 on a quiet resource).
  clock.advance(11 * 60 * 1000);
  const w2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.equal(await w2.status, 200, "the ledger still places the resume (its book outlives the index)");
  t.ok(await until(() => deletedNames(w2).includes("z"), 1000), `so z's DELETED must be sent again (got: ${JSON.stringify(w2.events)})`);
  w2.abort();
});

t.test("R3: each of a lineage's last four narrowings is sent again, however many of its caches each one narrowed", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const { f, proxy, clock } = await setup(t, own);
  const Q0 = [shardRange(0, 4)];
  const Q1 = [shardRange(1, 4)];
  const E0 = [shardRange(0, 8)];
  const E1 = [shardRange(1, 8)];
  const xUid = uidIn(E0, E1, "x");
  const x = pod("x", xUid, "5");
  const z = pod("z", uidIn(HIGH, LOW, "z"), "6"); // leaves at LOW
  const y = pod("y", uidIn(Q1, Q0, "y"), "7"); // leaves at Q0
  const v = pod("v", uidIn(E1, E0, "v"), "8"); // leaves at E0
  f.lists = [{ body: listBody([x, z, y, v], "10") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "informer LIST");
  // Three informers of the same query (one process's two controllers' caches and a metadata-less tool, say).
  const ws = [0, 1, 2].map(() => watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`));
  t.ok(await until(() => f.watches.length === 3), "three watches");
  for (const w of ws) t.equal(await w.status, 200);
  for (const u of f.watches) u.write(event("MODIFIED", pod("x", xUid, "11")) + event("MODIFIED", pod("x", xUid, "12")));
  t.ok(await until(() => ws.every((w) => w.events.length === 2)), "x's MODIFIEDs at 11 and 12 reached all three");
  const [a, b, c] = ws as [ClientWatch, ClientWatch, ClientWatch];
  own.set({ generation: 2, ranges: LOW });
  t.ok(await until(() => deletedNames(a).includes("z")), "narrowing 1 (z) written to a");
  t.same(own.applied, [2], "narrowing 1 applied");
  a.abort(); // reset with 12 and z's DELETED unread: its RV is 11
  await a.ended;
  own.set({ generation: 3, ranges: Q0 });
  t.ok(await until(() => deletedNames(b).includes("y") && deletedNames(c).includes("y")), "narrowing 2 (y)");
  own.set({ generation: 4, ranges: E0 });
  t.ok(await until(() => deletedNames(b).includes("v") && deletedNames(c).includes("v")), "narrowing 3 (v)");
  t.same(own.applied, [2, 3, 4], "premise: all applied");
  clock.advance(61_000);
  const a2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=11`);
  t.equal(await a2.status, 200, "a's re-watch from 11 (an event's RV) is accepted under the newest epoch");
  t.ok(await until(() => deletedNames(a2).length >= 2, 1000), "DELETEDs sent again");
  t.same(deletedNames(a2).sort(), ["v", "y", "z"], "for z too: three narrowings are within the last four");
  a2.abort();
  b.abort();
  c.abort();
});
