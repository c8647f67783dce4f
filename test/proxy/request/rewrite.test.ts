/** What the apiserver is asked to filter by (src/proxy/request/rewrite.ts), in shardselector and labels mode. */
import t from "tap";
import { MATCH_NOTHING_LABEL_SELECTOR, rewriteQuery } from "../../../src/proxy/request/rewrite.ts";
import { makeRange, shardRange } from "../../../src/shard/range.ts";
import { slotsToRanges } from "../../../src/shard/table.ts";
import { parseSelector } from "../../../src/shard/selector.ts";

const LOW = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";

t.test("the pod's canonical selector is added, other parameters kept, encoded like client-go", async (t) => {
  const r = rewriteQuery(new URLSearchParams("limit=500&resourceVersion=0"), "uid", [shardRange(0, 2)]);
  if (!r.ok) return t.fail("rewrite failed");
  t.equal(r.query.get("shardSelector"), LOW);
  t.equal(r.query.get("limit"), "500");
  t.equal(r.sentSelector, LOW);
  t.match(r.query.toString(), /shardSelector=shardRange%28object\.metadata\.uid%2C\+%270x0000000000000000%27/);
});

t.test("the controller's own selector is intersected with the pod's", async (t) => {
  const client = "shardRange(object.metadata.uid, '0x4000000000000000', '0xc000000000000000')";
  const r = rewriteQuery(new URLSearchParams({ shardSelector: client }), "uid", [shardRange(0, 2)]);
  if (!r.ok) return t.fail("rewrite failed");
  t.same(parseSelector(r.query.get("shardSelector") ?? "").ranges, [makeRange(0x4000000000000000n, 0x8000000000000000n)]);
  t.equal(r.query.getAll("shardSelector").length, 1, "exactly one selector goes upstream");
});

t.test("owning nothing sends a match-nothing label selector ANDed with the client's, and no shardSelector", async (t) => {
  const r = rewriteQuery(new URLSearchParams({ labelSelector: "app=x" }), "uid", []);
  if (!r.ok) return t.fail("rewrite failed");
  t.equal(r.query.get("shardSelector"), null);
  t.equal(r.query.get("labelSelector"), `app=x,${MATCH_NOTHING_LABEL_SELECTOR}`);
  const disjoint = rewriteQuery(new URLSearchParams({ shardSelector: LOW }), "uid", [shardRange(1, 2)]);
  t.equal(disjoint.ok && disjoint.query.get("labelSelector"), MATCH_NOTHING_LABEL_SELECTOR, "disjoint client and pod ranges own nothing");
});

t.test("an empty shardSelector is absent; an invalid one is answered like a gate-on server", async (t) => {
  const empty = rewriteQuery(new URLSearchParams("shardSelector="), "uid", [shardRange(0, 2)]);
  t.equal(empty.ok && empty.query.get("shardSelector"), LOW);
  const bad = rewriteQuery(new URLSearchParams({ shardSelector: "this is not cel (((" }), "uid", [shardRange(0, 2)]);
  t.same(bad, { ok: false, status: 500, message: "invalid shard selector: CEL parse error: Syntax error: mismatched input 'is' expecting <EOF>" });
  const mixed = rewriteQuery(new URLSearchParams({ shardSelector: LOW }), "namespace", [shardRange(0, 2)]);
  t.equal(mixed.ok, false);
  t.equal(!mixed.ok && mixed.status, 400);
});

t.test("owner key, shardselector mode: no shard selector is sent, the proxy filters by design", async (t) => {
  const r = rewriteQuery(new URLSearchParams({ labelSelector: "app=x", limit: "5" }), "owner", [shardRange(0, 2)]);
  if (!r.ok) return t.fail("rewrite failed");
  t.equal(r.query.get("shardSelector"), null, "no shardSelector can hash an ownerReference");
  t.equal(r.query.get("labelSelector"), "app=x", "the controller's own selector unchanged");
  t.same([r.proxyFilters, r.objectKey, r.sentSelector], [true, "owner", undefined]);
  t.same(r.ranges, [shardRange(0, 2)]);
  const none = rewriteQuery(new URLSearchParams(), "owner", []);
  t.same(none.ok && [none.query.get("labelSelector"), none.proxyFilters], [MATCH_NOTHING_LABEL_SELECTOR, false], "owning nothing still asks the server for nothing");
  const client = rewriteQuery(new URLSearchParams({ shardSelector: LOW }), "owner", [shardRange(0, 2)]);
  t.same(client.ok ? undefined : [client.status, /ownerReference/.test(client.message)], [400, true], "a controller's own shardSelector cannot be combined with an owner key");
  const uid = rewriteQuery(new URLSearchParams(), "uid", [shardRange(0, 2)]);
  t.equal(uid.ok && uid.proxyFilters, false, "uid keys are the server's to filter");
});

t.test("labels mode: the owned slots as a label selector ANDed with the controller's, whole slots, no shard selector", async (t) => {
  const labels = { labelKey: "shard.shardcar.io/ring-a", slotCount: 8 };
  const r = rewriteQuery(new URLSearchParams({ labelSelector: "app=x" }), "uid", slotsToRanges([1, 2, 5], 8), labels);
  if (!r.ok) return t.fail("rewrite failed");
  t.equal(r.query.get("labelSelector"), "app=x,shard.shardcar.io/ring-a in (1,2,5)");
  t.equal(r.query.get("shardSelector"), null);
  t.same(r.objectKey, { label: "shard.shardcar.io/ring-a", slotCount: 8 });
  t.same([r.sentSelector, r.proxyFilters], [undefined, false]);
  const alone = rewriteQuery(new URLSearchParams(), "owner", slotsToRanges([3], 8), labels);
  t.equal(alone.ok && alone.query.get("labelSelector"), "shard.shardcar.io/ring-a in (3)", "any key, the owner's included: the label holds the slot");
  const none = rewriteQuery(new URLSearchParams({ labelSelector: "app=x" }), "uid", [], labels);
  t.equal(none.ok && none.query.get("labelSelector"), `app=x,${MATCH_NOTHING_LABEL_SELECTOR}`, "owning nothing: the match-nothing selector");
  // A controller's shardSelector for [0, 1/2) ∩ slots 1..6: slots 1, 2, 3, then whole slots only.
  const client = rewriteQuery(new URLSearchParams({ shardSelector: LOW }), "uid", slotsToRanges([1, 2, 3, 4, 5, 6], 8), labels);
  if (!client.ok) return t.fail("rewrite failed");
  t.equal(client.query.get("labelSelector"), "shard.shardcar.io/ring-a in (1,2,3)", "intersected as today, then the slots");
  t.same(client.ranges, slotsToRanges([1, 2, 3], 8), "the ranges enforced are those slots");
  const cut = rewriteQuery(new URLSearchParams({ shardSelector: "shardRange(object.metadata.uid, '0x0000000000000000', '0x3000000000000000')" }), "uid", slotsToRanges([0, 1, 2], 8), labels);
  t.equal(cut.ok && cut.query.get("labelSelector"), "shard.shardcar.io/ring-a in (0,1)", "a slot cut by the client's bounds goes to whoever holds its start");
});
