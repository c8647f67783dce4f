import t from "tap";
import { MATCH_NOTHING_LABEL_SELECTOR, rewriteQuery } from "../../src/proxy/rewrite.ts";
import { makeRange, shardRange } from "../../src/shard/range.ts";
import { parseSelector } from "../../src/shard/selector.ts";

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
