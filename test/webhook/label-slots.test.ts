/**
 * Golden tests for the stamping webhook (`/label-slots`), after the
 * injection goldens: every `<case>.review.json` in testdata/label-slots is an
 * AdmissionReview as the apiserver sends it, answered against the rings of
 * `rings.json` (ShardRing objects, decoded as the manager decodes them).
 * The answer (outcome and JSON Patch) is the golden `<case>.review.json.answer`.
 *
 * Each case runs through the pure function and through a POST to the real
 * HTTPS server. Then, stated independently of the code: the patched object
 * differs from the input in slot labels only; every slot label is the slot
 * whose range (`shardRange(slot, S)`, scanned, not computed) holds the FNV-1a
 * hash of the key's value — the parent's uid for a child, so parent and
 * child share a slot; and an UPDATE of the patched object changes nothing.
 * `REFRESH_GOLDEN=1` rewrites the goldens.
 */
import t from "tap";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import jsonpatch from "fast-json-patch";
import { reviewLabelAdmission, type LabelOutcome } from "../../src/webhook/label-review.ts";
import { Goldens } from "./goldens.ts";
import { slotByScan, startTestWebhook, testLabelSlotConfig, type TestWebhook } from "./support.ts";

const DIR = fileURLToPath(new URL("./testdata/label-slots/", import.meta.url));

type Json = Record<string, unknown>;
interface Meta {
  name?: string;
  namespace?: string;
  uid?: string;
  labels?: Record<string, string>;
  ownerReferences?: Array<{ uid?: string; controller?: boolean }>;
}
interface Review {
  request: { uid: string; operation: string; namespace?: string; subResource?: string; resource: { group: string; resource: string }; object: { metadata?: Meta } | null; oldObject: { metadata?: Meta } | null };
}

const config = testLabelSlotConfig();

/** The result each case must have, and which ring labels it must end with (label → key). */
const EXPECT: Record<string, { result: LabelOutcome["result"]; labels?: Record<string, "uid" | "namespace" | "owner" | "absent"> }> = {
  "create-uid-keyed-is-deferred": { result: "deferred", labels: { "shard.shardcar.io/web": "absent", "shard.shardcar.io/audit": "absent" } },
  "create-uid-keyed-copied-label-is-removed": { result: "stamped", labels: { "shard.shardcar.io/web": "absent", "shard.shardcar.io/audit": "absent" } },
  "create-namespace-keyed-configmap": { result: "stamped", labels: { "shard.shardcar.io/web": "namespace" } },
  "create-namespace-keyed-no-labels-map": { result: "stamped", labels: { "shard.shardcar.io/web": "namespace" } },
  "create-owner-child-with-generate-name": { result: "stamped", labels: { "shard.shardcar.io/web": "owner" } },
  "create-owner-root-is-deferred": { result: "deferred", labels: { "shard.shardcar.io/web": "absent" } },
  "create-copied-object-keeps-no-slot-of-its-old-uid": { result: "stamped", labels: { "shard.shardcar.io/web": "absent", "shard.shardcar.io/audit": "absent" } },
  "create-owner-root-with-a-copied-uid-is-deferred": { result: "deferred", labels: { "shard.shardcar.io/web": "absent" } },
  "create-owner-reference-without-controller-is-a-root": { result: "deferred", labels: { "shard.shardcar.io/web": "absent" } },
  "create-dry-run-is-stamped-too": { result: "stamped", labels: { "shard.shardcar.io/web": "owner" } },
  "update-full-update-drops-the-labels-map": { result: "stamped", labels: { "shard.shardcar.io/web": "uid", "shard.shardcar.io/audit": "uid" } },
  "update-changed-label-is-restored": { result: "stamped", labels: { "shard.shardcar.io/web": "uid", "shard.shardcar.io/audit": "uid" } },
  "update-body-without-uid-uses-the-stored-one": { result: "stamped", labels: { "shard.shardcar.io/web": "uid", "shard.shardcar.io/audit": "uid" } },
  "update-child-reparented-follows-its-new-owner": { result: "stamped", labels: { "shard.shardcar.io/web": "owner" } },
  "update-status-subresource-is-skipped": { result: "skipped" },
  "delete-is-skipped": { result: "skipped" },
  "create-resource-no-labels-ring-shards-is-skipped": { result: "skipped" },
  "create-cluster-scoped-namespace-key-hashes-the-empty-namespace": { result: "stamped", labels: { "shard.shardcar.io/web": "namespace" } },
  "create-resource-of-two-rings-with-one-name-is-skipped": { result: "skipped" },
};

const SLOTS: Record<string, number> = { "shard.shardcar.io/web": 64, "shard.shardcar.io/audit": 256 };

const inputs = readdirSync(DIR)
  .filter((f) => f.endsWith(".review.json"))
  .sort();
const goldens = new Goldens(DIR, "test/webhook/label-slots.test.ts", [...inputs, "rings.json"]);
let webhook: TestWebhook;

t.before(async () => {
  webhook = await startTestWebhook(t, undefined, { labelSlots: { config: () => config } });
});


for (const file of inputs) {
  const name = file.replace(/\.review\.json$/, "");
  t.test(name, async (t) => {
    const body = JSON.parse(readFileSync(join(DIR, file), "utf8")) as Review;
    const answer = reviewLabelAdmission(body, config);
    const ops = answer.review.response.patch === undefined ? [] : (JSON.parse(Buffer.from(answer.review.response.patch, "base64").toString("utf8")) as jsonpatch.Operation[]);
    goldens.check(t, `${file}.answer`, `${JSON.stringify({ outcome: answer.outcome, allowed: answer.review.response.allowed, patch: ops }, null, 2)}\n`);

    const http = await webhook.send({ path: "/label-slots", body: JSON.stringify(body) });
    t.equal(http.status, 200);
    t.same(JSON.parse(http.body), answer.review, "the HTTPS endpoint answers exactly the same");
    t.equal(answer.review.response.uid, body.request.uid, "the response echoes the request's uid");
    t.equal(answer.review.response.allowed, true, "a well-formed review is never denied: the webhook must not block writes");

    const expect = EXPECT[name];
    if (expect === undefined) {
      t.fail(`add ${name} to EXPECT`);
      return;
    }
    t.equal(answer.outcome.result, expect.result);
    const input = body.request.object;
    if (input === null) {
      t.same(ops, [], "nothing to patch");
      return;
    }
    const out = jsonpatch.applyPatch(structuredClone(input), structuredClone(ops), true, false).newDocument;
    const strip = (o: { metadata?: Meta }): unknown => {
      const labels = Object.fromEntries(Object.entries(o.metadata?.labels ?? {}).filter(([k]) => !k.startsWith("shard.shardcar.io/")));
      return { ...o, metadata: { ...o.metadata, labels: Object.keys(labels).length === 0 ? undefined : labels } };
    };
    t.same(strip(out), strip(input), "nothing but slot labels changed");
    for (const [label, key] of Object.entries(expect.labels ?? {})) {
      const have = out.metadata?.labels?.[label];
      if (key === "absent") {
        t.equal(have, undefined, `${label} is absent: its slot needs the uid, which the labeller reads once the object is stored`);
        continue;
      }
      const meta = out.metadata ?? {};
      const value =
        key === "namespace"
          ? (body.request.namespace ?? "")
          : key === "uid"
            ? (meta.uid ?? body.request.oldObject?.metadata?.uid ?? "")
            : (meta.ownerReferences?.find((r) => r.controller === true)?.uid ?? "");
      t.equal(have, slotByScan(value, SLOTS[label] ?? 0), `${label} is the slot of the ${key === "owner" ? "controller's uid (the parent's slot)" : key}`);
    }
    if (ops.length > 0) {
      const again = structuredClone(body) as unknown as Json;
      const req = again["request"] as Json;
      req["operation"] = "UPDATE";
      req["oldObject"] = out;
      req["object"] = { ...out, metadata: { uid: (out.metadata?.uid ?? body.request.oldObject?.metadata?.uid) || "3d9f0a53-6c4e-4c55-9a3e-6c2d8f3f1b22", ...out.metadata } };
      const second = reviewLabelAdmission(again, config);
      const changed = second.outcome.result === "stamped";
      // A CREATE that removed a copied label leaves the uid-keyed slot to the labeller; any other patched object is final.
      if (expect.labels !== undefined && Object.values(expect.labels).includes("absent")) t.ok(changed, "once it has a uid, the object gets its uid-keyed labels");
      else t.notOk(changed, "an UPDATE of the patched object changes nothing (idempotent)");
    }
  });
}

t.test("every expectation has a case", async (t) => {
  for (const name of Object.keys(EXPECT)) t.ok(inputs.includes(`${name}.review.json`), `${name}.review.json exists`);
});

t.test("malformed reviews get an error answer with the request's uid, and never a patch", async (t) => {
  const ok = JSON.parse(readFileSync(join(DIR, "create-namespace-keyed-configmap.review.json"), "utf8")) as Json;
  const req = ok["request"] as Json;
  const rows: Array<[string, unknown, RegExp]> = [
    ["not an object", [], /not a JSON object/],
    ["wrong apiVersion", { ...ok, apiVersion: "admission.k8s.io/v1beta1" }, /unsupported apiVersion "admission.k8s.io\/v1beta1"/],
    ["wrong kind", { ...ok, kind: "Review" }, /unsupported kind "Review"/],
    ["no request", { ...ok, request: undefined }, /has no request/],
    ["no uid", { ...ok, request: { ...req, uid: "" } }, /has no uid/],
    ["no resource", { ...ok, request: { ...req, resource: { version: "v1" } } }, /request.resource .* has no group and resource/],
    ["no object", { ...ok, request: { ...req, object: null } }, /CREATE request has no object/],
    ["metadata not an object", { ...ok, request: { ...req, object: { metadata: "x" } } }, /metadata is not an object/],
  ];
  for (const [what, body, message] of rows) {
    const a = reviewLabelAdmission(body, config);
    t.equal(a.outcome.result, "errored", what);
    t.equal(a.review.response.allowed, false, `${what}: not allowed (the apiserver never sends this)`);
    t.equal(a.review.response.patch, undefined, `${what}: no patch`);
    t.match(a.review.response.status?.message ?? "", message, `${what}: the message says what is wrong`);
    if (what !== "not an object" && what !== "no uid" && what !== "no request") t.equal(a.review.response.uid, req["uid"], `${what}: uid echoed`);
  }
});

t.test("before the ShardRings are read, writes are admitted unchanged (the labeller catches up)", async (t) => {
  const body = JSON.parse(readFileSync(join(DIR, "create-namespace-keyed-configmap.review.json"), "utf8")) as unknown;
  const a = reviewLabelAdmission(body, undefined);
  t.same(a.outcome, { result: "not-synced" });
  t.equal(a.review.response.allowed, true);
  t.equal(a.review.response.patch, undefined);
});

t.test("the injection endpoint's guards apply to /label-slots too", async (t) => {
  const wrongType = await webhook.send({ path: "/label-slots", headers: { "content-type": "text/plain" }, body: "{}" });
  t.match(JSON.parse(wrongType.body), { response: { allowed: false, status: { code: 415 } } });
  const notJson = await webhook.send({ path: "/label-slots", body: "{" });
  t.match(JSON.parse(notJson.body), { response: { allowed: false, status: { code: 400, message: /not valid JSON/ } } });
  const get = await webhook.send({ method: "GET", path: "/label-slots" });
  t.equal(get.status, 405);
});

t.test("a server without label slots does not serve /label-slots", async (t) => {
  const plain = await startTestWebhook(t);
  const r = await plain.send({ path: "/label-slots", body: "{}" });
  t.equal(r.status, 404);
  t.match(r.body, /serves \/mutate-pods, \/healthz/);
});

// Runs last: subtests run in order.
t.test("no stale golden files", async (t) => goldens.checkStale(t));
