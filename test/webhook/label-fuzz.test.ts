/**
 * The manager's stamping webhook (`/label-slots`) answers every
 * AdmissionReview of a sharded object, however malformed, with a well-formed
 * AdmissionReview or an HTTP 400, never crashes, never labels an object that
 * no labels-mode ring lists, and labels the others exactly as
 * docs/label-slots.md states.
 *
 * The webhook server runs as the manager starts it with label slots
 * (startWebhookServer, TLS from a CA only the test trusts, the rings of
 * testdata/label-slots/rings.json decoded as the manager decodes them). The
 * corpus is the golden reviews of test/webhook/testdata/label-slots/; each
 * case changes what decides a slot (the resource, the operation and
 * subresource, the object's uid, namespace, controller reference, its slot
 * labels, the stored object), then damages the review (envelope, structure,
 * text, framing: test/support/fuzz/admission.ts) and sends it raw over TLS.
 * Short and fixed in `npm test`; `npm run fuzz` runs it for half of
 * `SHARDCAR_FUZZ_SECONDS` (the other webhook fuzzer has the other half, on
 * the same job) with a fresh seed.
 */
import t from "tap";
import { fileURLToPath } from "node:url";
import jsonpatch from "fast-json-patch";
import { LABEL_SLOTS_PATH } from "../../src/webhook/server.ts";
import { fuzzAdmission, goldenCorpus, requestObject, type ReviewAnswer } from "../support/fuzz/admission.ts";
import type { Json } from "../support/fuzz/json-mutate.ts";
import type { Random } from "../support/fuzz/random.ts";
import { fuzzSettings } from "../support/fuzz/runner.ts";
import { slotByScan, startTestWebhook, testConfig, testLabelSlotConfig } from "./support.ts";

const FILE = "test/webhook/label-fuzz.test.ts";
const DIR = fileURLToPath(new URL("./testdata/label-slots/", import.meta.url));
/** Growth allowed from the warm sample to the end, after a forced GC (see docs/testing.md). */
const BOUNDS = { rssMiB: 160, heapMiB: 32, fds: 16 };

type JsonMap = { [key: string]: Json };
const isMap = (v: Json | undefined): v is JsonMap => typeof v === "object" && v !== null && !Array.isArray(v);

type Key = "uid" | "namespace" | "owner";
interface Labelling {
  readonly label: string;
  readonly key: Key;
  readonly slots: number;
}

/**
 * Who labels what, read by hand off rings.json (not decoded by the code
 * under test): ring shop/web (64 slots) and shop/audit (no slot count: the
 * default 256) in labels mode; shop/legacy is a shardselector ring, so
 * secrets get no label; a/dup and b/dup would both write
 * `shard.shardcar.io/dup` on leases, so neither does.
 */
const LABELLED: Readonly<Record<string, readonly Labelling[]>> = {
  "example.com/gadgets": [
    { label: "shard.shardcar.io/web", key: "uid", slots: 64 },
    { label: "shard.shardcar.io/audit", key: "uid", slots: 256 },
  ],
  "/configmaps": [{ label: "shard.shardcar.io/web", key: "namespace", slots: 64 }],
  "/namespaces": [{ label: "shard.shardcar.io/web", key: "namespace", slots: 64 }],
  "example.com/widgets": [{ label: "shard.shardcar.io/web", key: "owner", slots: 64 }],
};

const RESOURCES: readonly Json[] = [
  { group: "example.com", version: "v1", resource: "gadgets" },
  { group: "example.com", version: "v1", resource: "widgets" },
  { group: "", version: "v1", resource: "configmaps" },
  { group: "", version: "v1", resource: "namespaces" },
  { group: "", version: "v1", resource: "secrets" },
  { group: "coordination.k8s.io", version: "v1", resource: "leases" },
  { group: "", version: "v1", resource: "pods" },
  { group: "example.com", version: "v1", resource: "Gadgets" },
  { group: "Example.com", version: "v1", resource: "gadgets" },
  { group: "example.com ", version: "v1", resource: "gadgets" },
  { group: "", version: "v1", resource: "gadgets" },
  { group: "example.com", version: "v1", resource: "gadgets/status" },
  { group: "apps", version: "v1", resource: "configmaps" },
  { version: "v1", resource: "configmaps" },
  { group: "", version: "v1", resource: "" },
  { group: null, resource: "configmaps" },
  "configmaps",
  null,
];

const RING_LABELS = ["shard.shardcar.io/web", "shard.shardcar.io/audit", "shard.shardcar.io/legacy", "shard.shardcar.io/dup", "shard.shardcar.io/other", "shard.shardcar.io/WEB", "shardcar.io/web"];
const LABEL_VALUES: readonly Json[] = ["0", "1", "63", "64", "255", "256", "007", "-1", "+1", " 1", "1.0", "1e1", "abc", "", 5, null, true, ["1"]];

function uid(rnd: Random): string {
  const hex = (n: number): string => Array.from({ length: n }, () => "0123456789abcdef"[rnd.int(16)]).join("");
  return `${hex(8)}-${hex(4)}-4${hex(3)}-8${hex(3)}-${hex(12)}`;
}

/** One change to what decides the object's slot, or to the review around it. */
function mutateSharded(rnd: Random, request: JsonMap): string {
  const object = isMap(request["object"]) ? request["object"] : (request["object"] = { apiVersion: "v1", kind: "Object" });
  const metadata = isMap(object["metadata"]) ? object["metadata"] : (object["metadata"] = {});
  const set = (where: JsonMap, key: string, v: Json | undefined): void => {
    if (v === undefined) delete where[key];
    else where[key] = v;
  };
  const show = (v: Json | undefined): string => (v === undefined ? "absent" : JSON.stringify(v));
  switch (rnd.int(9)) {
    case 0: {
      const v = rnd.pick(RESOURCES);
      request["resource"] = structuredClone(v);
      return `request.resource ${show(v)}`;
    }
    case 1: {
      const v = rnd.pick<Json | undefined>(["CREATE", "CREATE", "UPDATE", "UPDATE", "DELETE", "CONNECT", "create", undefined]);
      set(request, "operation", v);
      return `operation ${show(v)}`;
    }
    case 2: {
      const v = rnd.pick<Json | undefined>(["status", "scale", "", undefined, 7]);
      set(request, "subResource", v);
      return `subResource ${show(v)}`;
    }
    case 3: {
      // A CREATE whose body carries a uid (an object copied from another):
      // the apiserver replaces it with its own after admission.
      const v = rnd.pick<Json | undefined>([uid(rnd), uid(rnd), "", undefined, 7, null]);
      set(metadata, "uid", v);
      return `metadata.uid ${show(v)}`;
    }
    case 4: {
      const v = rnd.pick<Json | undefined>(["shop", "other", "", undefined, 5, "x".repeat(300)]);
      set(request, "namespace", v);
      return `request.namespace ${show(typeof v === "string" ? v.slice(0, 20) : v)}`;
    }
    case 5: {
      const refs = Array.isArray(metadata["ownerReferences"]) ? metadata["ownerReferences"] : [];
      const which = rnd.int(5);
      if (which === 0) {
        const v = rnd.pick<Json | undefined>([[], "x", null, undefined, {}]);
        set(metadata, "ownerReferences", v);
        return `ownerReferences ${show(v)}`;
      }
      const ref: JsonMap = { apiVersion: "example.com/v1", kind: "Gadget", name: "g", uid: rnd.pick<Json>([uid(rnd), uid(rnd), "", 7, null]) };
      const controller = rnd.pick<Json | undefined>([true, true, false, "true", 1, null, undefined]);
      if (controller !== undefined) ref["controller"] = controller;
      if (which === 1) refs.unshift(ref);
      else refs.push(ref);
      metadata["ownerReferences"] = refs;
      return `ownerReference ${JSON.stringify(ref)} ${which === 1 ? "first" : "last"}`;
    }
    case 6: {
      const labels = isMap(metadata["labels"]) ? metadata["labels"] : {};
      const which = rnd.int(6);
      if (which === 0) {
        const v = rnd.pick<Json | undefined>([undefined, null, [], "x", {}]);
        set(metadata, "labels", v);
        return `labels ${show(v)}`;
      }
      const key = rnd.pick(RING_LABELS);
      const v = which === 1 ? undefined : rnd.pick(LABEL_VALUES);
      set(labels, key, v);
      metadata["labels"] = labels;
      return `label ${key}: ${show(v)}`;
    }
    case 7: {
      const old = rnd.pick<Json | undefined>([null, undefined, {}, { metadata: "x" }, { metadata: { uid: uid(rnd) } }, { metadata: { uid: "" } }, structuredClone(object)]);
      set(request, "oldObject", old);
      return `oldObject ${show(old).slice(0, 80)}`;
    }
    default: {
      const v = rnd.pick<Json | undefined>([undefined, null, "x", [], { uid: uid(rnd) }]);
      set(object, "metadata", v);
      return `object.metadata ${show(v)}`;
    }
  }
}

const escapeToken = (key: string): string => key.replaceAll("~", "~0").replaceAll("/", "~1");

/**
 * The value a ring's slot is computed from, as docs/label-slots.md states
 * it; `undefined` where it is a uid the object does not have yet. At CREATE
 * the object has none: the apiserver assigns it after admission and
 * replaces whatever the body carried. On UPDATE a body without one gets the
 * stored object's.
 */
function keyValue(request: JsonMap, object: JsonMap, key: Key): string | undefined {
  const metadata = isMap(object["metadata"]) ? object["metadata"] : {};
  const own = (m: Json | undefined): string | undefined => (isMap(m) && typeof m["uid"] === "string" && m["uid"] !== "" ? m["uid"] : undefined);
  const oldObject = request["oldObject"];
  const uid = request["operation"] === "UPDATE" ? (own(metadata) ?? (isMap(oldObject) ? own(oldObject["metadata"]) : undefined)) : undefined;
  if (key === "namespace") return typeof request["namespace"] === "string" ? request["namespace"] : "";
  if (key === "uid") return uid;
  const refs = Array.isArray(metadata["ownerReferences"]) ? metadata["ownerReferences"] : [];
  const controller = refs.find((r) => isMap(r) && r["controller"] === true && typeof r["uid"] === "string");
  return isMap(controller) ? (controller["uid"] as string) : uid;
}

/** The rings that label this review's object: none unless a CREATE or UPDATE of a listed resource itself. */
function labelling(request: JsonMap | undefined): readonly Labelling[] {
  if (request === undefined || (request["operation"] !== "CREATE" && request["operation"] !== "UPDATE")) return [];
  const sub = request["subResource"];
  if (typeof sub === "string" && sub !== "") return [];
  const r = request["resource"];
  if (!isMap(r) || typeof r["group"] !== "string" || typeof r["resource"] !== "string") return [];
  return LABELLED[`${r["group"]}/${r["resource"]}`] ?? [];
}

/** Whether `op` only sets or removes slot labels of `rings`, given the object it applies to. */
function touchesSlotLabelsOnly(op: { op: string; path: string; value?: unknown }, object: JsonMap, rings: readonly Labelling[]): boolean {
  const labels = new Set(rings.map((r) => r.label));
  const onlySlotLabels = (v: unknown): boolean => typeof v === "object" && v !== null && !Array.isArray(v) && Object.entries(v).every(([k, x]) => labels.has(k) && typeof x === "string");
  const metadata = object["metadata"];
  if (op.path === "/metadata") return op.op === "add" && metadata === undefined && isMap(op.value as Json) && Object.keys(op.value as object).join() === "labels" && onlySlotLabels((op.value as JsonMap)["labels"]);
  // A labels field that is no map (never from an apiserver) may be replaced by one.
  if (op.path === "/metadata/labels") return op.op === "add" && isMap(metadata) && !isMap(metadata["labels"]) && onlySlotLabels(op.value);
  const ring = rings.find((r) => op.path === `/metadata/labels/${escapeToken(r.label)}`);
  return ring !== undefined && (op.op === "remove" || ((op.op === "add" || op.op === "replace") && typeof op.value === "string"));
}

/** The endpoint's own rules, written from docs/label-slots.md, on an answer that passed the general judgement. */
function rules(body: Buffer, answer: ReviewAnswer): string[] {
  const problems = answer.warnings.filter((w) => /internal error/.test(w)).map((w) => `admitted after an internal error: ${w}`);
  let doc: Json;
  try {
    doc = JSON.parse(body.toString("utf8")) as Json;
  } catch {
    return problems;
  }
  const request = isMap(doc) && isMap(doc["request"]) ? doc["request"] : undefined;
  const object = isMap(request?.["object"]) ? request["object"] : undefined;
  const rings = labelling(request);
  const patch = (answer.patch ?? []) as ReadonlyArray<{ op: string; path: string; value?: unknown }>;
  if (patch.length > 0 && rings.length === 0) {
    problems.push(`a patch for an object no labels-mode ring labels (resource ${JSON.stringify(request?.["resource"])}, operation ${JSON.stringify(request?.["operation"])}, subResource ${JSON.stringify(request?.["subResource"])})`);
    return problems;
  }
  if (request === undefined || object === undefined || !answer.allowed || rings.length === 0) return problems;
  for (const op of patch) if (!touchesSlotLabelsOnly(op, object, rings)) problems.push(`the patch touches more than the slot labels of ${rings.map((r) => r.label).join(", ")}: ${JSON.stringify(op).slice(0, 200)}`);
  if (problems.length > 0) return problems;
  // A fresh parse, not a copy: JSON.stringify would overflow on an object nested 2,000 deep.
  const out = jsonpatch.applyPatch(requestObject(body) ?? {}, patch as jsonpatch.Operation[], false, true).newDocument;
  const labels = isMap(out["metadata"]) && isMap(out["metadata"]["labels"]) ? out["metadata"]["labels"] : {};
  for (const r of rings) {
    const value = keyValue(request, object, r.key);
    const want = value === undefined ? undefined : slotByScan(value, r.slots);
    const have = Object.hasOwn(labels, r.label) ? labels[r.label] : undefined;
    if (have !== want) {
      const why = value === undefined ? "absent: its slot needs the uid the apiserver has not assigned yet" : `${want}, the slot of the ${r.key} ${JSON.stringify(value.slice(0, 60))}`;
      problems.push(`after the answer ${r.label} is ${JSON.stringify(have)}, want ${why}`);
    }
  }
  return problems;
}

t.test("every AdmissionReview of a sharded object gets a well-formed answer or a 400, and only slot labels as docs/label-slots.md states them", async (t) => {
  const settings = fuzzSettings({ cases: 600, seed: 20261203, concurrency: 6, share: 0.5 });
  const config = testLabelSlotConfig();
  const webhook = await startTestWebhook(t, testConfig(), { labelSlots: { config: () => config } });
  const reviews = goldenCorpus(DIR, ".review.json");
  t.ok(reviews.length >= 15, `the golden reviews are the corpus (${reviews.length})`);

  await fuzzAdmission(t, {
    name: "label-slots",
    file: FILE,
    settings,
    webhook,
    path: LABEL_SLOTS_PATH,
    corpus: reviews,
    review(rnd: Random, review: JsonMap, uid: string) {
      const notes: string[] = [];
      const request = isMap(review["request"]) ? review["request"] : {};
      request["uid"] = uid;
      for (let k = rnd.weighted<number>([
        [2, 0],
        [4, 1],
        [3, 2],
        [1, 4],
      ]); k > 0; k--)
        notes.push(mutateSharded(rnd, request));
      return { review, notes };
    },
    rules,
    bounds: BOUNDS,
  });
});
