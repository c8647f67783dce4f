import t from "tap";
import { decodeLabelSpec, labelSlotConfig, labelSlotCount, labelState, ringsLabelling, wantedSlot, type LabelSlotRing } from "../../src/ring/label-slots.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, shardRange } from "../../src/shard/range.ts";

const ring = (namespace: string, name: string, spec: unknown, status?: unknown): { metadata: { namespace: string; name: string }; spec: unknown; status?: unknown } => ({ metadata: { namespace, name }, spec, ...(status === undefined ? {} : { status }) });

t.test("spec.filter and spec.resources: defaults, and refusals that quote the value and say what is allowed", async (t) => {
  t.same(decodeLabelSpec(undefined), { ok: true, value: { filter: "shardselector", resources: [] } });
  t.same(decodeLabelSpec({ slots: 64 }), { ok: true, value: { filter: "shardselector", resources: [] } }, "the handoff fields are not this decoder's business");
  t.same(decodeLabelSpec({ filter: "labels", resources: "widgets.example.com, configmaps=namespace" }), {
    ok: true,
    value: {
      filter: "labels",
      resources: [
        { resource: "widgets", group: "example.com", key: "uid" },
        { resource: "configmaps", group: "", key: "namespace" },
      ],
    },
  });
  const bad: Array<[unknown, RegExp]> = [
    [{ filter: "label" }, /invalid spec\.filter "label": allowed values are "shardselector" .* and "labels"/],
    [{ filter: true }, /invalid spec\.filter true/],
    [{ filter: "labels" }, /spec\.filter is "labels" but spec\.resources is not set: .*e\.g\. resources: "widgets\.example\.com, configmaps=owner"/],
    [{ filter: "labels", resources: "Widgets" }, /invalid spec\.resources "Widgets": .*"Widgets" is not a lowercase plural resource name .*allowed: the vocabulary of shardcar\.io\/resources/],
    [{ filter: "labels", resources: "widgets,,pods" }, /invalid spec\.resources "widgets,,pods": empty entry/],
    [{ filter: "labels", resources: "widgets=name" }, /invalid spec\.resources "widgets=name": .*got "name"/],
    [{ filter: "labels", resources: ["widgets"] }, /invalid spec\.resources \["widgets"\]: expected a string/],
    [{ resources: "pods, pods" }, /"pods" is listed twice/],
    [{ filter: "labels", resources: `${"a,".repeat(3000)}b` }, /6001 characters, at most 4096/],
  ];
  for (const [spec, message] of bad) {
    const r = decodeLabelSpec(spec);
    t.equal(r.ok, false, JSON.stringify(spec).slice(0, 60));
    if (!r.ok) t.match(r.message, message);
  }
});

t.test("the slot count labels are computed with: the tables' (status.slotCount), else spec.slots, else 256", async (t) => {
  t.equal(labelSlotCount(ring("a", "r", { slots: 64 }, { slotCount: 128 })), 128, "a recorded slot count wins: the leader never changes it once a table exists");
  t.equal(labelSlotCount(ring("a", "r", { slots: 64 })), 64);
  t.equal(labelSlotCount(ring("a", "r", {})), 256);
  t.equal(labelSlotCount(ring("a", "r", { slots: 0 })), undefined);
  t.equal(labelSlotCount(ring("a", "r", { slots: 64 }, { slotCount: "x" })), 64, "an unreadable status falls back to the spec");
});

t.test("labels-mode rings only; broken specs and label conflicts say which rings and why", async (t) => {
  const c = labelSlotConfig([
    ring("shop", "web", { filter: "labels", slots: 64, resources: "widgets.example.com, configmaps=namespace" }),
    ring("shop", "plain", { resources: "widgets.example.com" }),
    ring("shop", "typo", { filter: "labels", resources: "Widgets" }),
    ring("a", "dup", { filter: "labels", resources: "leases.coordination.k8s.io, pods" }),
    ring("b", "dup", { filter: "labels", resources: "leases.coordination.k8s.io" }),
  ]);
  t.same(c.rings.map((r) => [`${r.namespace}/${r.name}`, r.label, r.slotCount, r.resources.map((x) => x.resource)]), [
    ["shop/web", "shard.shardcar.io/web", 64, ["widgets", "configmaps"]],
    ["a/dup", "shard.shardcar.io/dup", 256, ["pods"]],
  ]);
  t.same(c.problems.map((p) => [`${p.namespace}/${p.name}`, p.reason]), [
    ["shop/typo", "SpecInvalid"],
    ["a/dup", "LabelConflict"],
    ["b/dup", "LabelConflict"],
  ]);
  t.match(c.problems[1]?.message, /ring a\/dup and b\/dup both label leases\.coordination\.k8s\.io with shard\.shardcar\.io\/dup; neither labels it/);
  t.same(ringsLabelling(c, "", "configmaps").map((x) => [x.ring.name, x.key]), [["web", "namespace"]]);
  t.same(ringsLabelling(c, "", "secrets"), []);
});

t.test("the wanted slot is the slot whose range holds the key's hash; a uid not yet assigned has none", async (t) => {
  const r: LabelSlotRing = { namespace: "n", name: "web", label: "shard.shardcar.io/web", slotCount: 24, resources: [] };
  const scan = (v: string): string => String([...Array(24).keys()].find((s) => contains([shardRange(s, 24)], fnv1a64(v))));
  for (const uid of ["a", "7c9e6679-7425-40de-944b-e07fc1f90ae7", "ffffffff"]) t.equal(wantedSlot(r, "uid", { uid }), scan(uid));
  t.equal(wantedSlot(r, "uid", {}), undefined);
  t.equal(wantedSlot(r, "owner", {}), undefined, "an owner-keyed root before its uid");
  t.equal(wantedSlot(r, "owner", { ownerReferences: [{ uid: "p", controller: true }] }), scan("p"));
  t.equal(wantedSlot(r, "namespace", {}), scan(""), "cluster-scoped: the empty namespace");
  const want = scan("u");
  t.same(labelState(r, "uid", { uid: "u" }, { [r.label]: want }), { state: "labelled", want });
  t.same(labelState(r, "uid", { uid: "u" }, {}), { state: "unlabelled", want });
  t.same(labelState(r, "uid", { uid: "u" }, { [r.label]: "99" }), { state: "mislabelled", want }, "a slot beyond the count");
  t.same(labelState(r, "uid", { uid: "u" }, { [r.label]: ` ${want}` }), { state: "mislabelled", want });
  t.same(labelState(r, "uid", {}, { [r.label]: "1" }), { state: "unlabelled", want: undefined }, "no uid: nothing can be right");
});
