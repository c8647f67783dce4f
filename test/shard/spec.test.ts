/**
 * The resources annotation and flag accept the owner key, and the slot
 * label parses strictly, naming the bad value.
 */
import t from "tap";
import { parseLabelKey, parseResources } from "../../src/shard/spec.ts";

t.test("resources may be keyed by uid, namespace or owner", async (t) => {
  t.same(parseResources("widgets.example.com, configmaps=owner, deployments.apps=owner, pods=namespace"), [
    { resource: "widgets", group: "example.com", key: "uid" },
    { resource: "configmaps", group: "", key: "owner" },
    { resource: "deployments", group: "apps", key: "owner" },
    { resource: "pods", group: "", key: "namespace" },
  ]);
  t.throws(() => parseResources("pods=owners"), { message: /key must be uid, namespace or owner, got "owners"/ });
});

t.test("an explicit slot label is a valid label key", async (t) => {
  for (const ok of ["shard.shardcar.io/widgets", "example.com/slot", "slot", "a.b/C_d-e.9"]) t.equal(parseLabelKey(ok), ok);
  for (const bad of ["", "/x", "Example.com/x", "a/b/c", "x/", "x/-a", `x/${"a".repeat(64)}`, "has space"]) t.throws(() => parseLabelKey(bad), { message: new RegExp(`--slot-label ${JSON.stringify(bad).replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}`) }, bad);
});
