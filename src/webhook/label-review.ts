/**
 * The stamping webhook: AdmissionReview v1 in, a JSON Patch that sets the
 * slot label of every labels-mode ring out. Independent of HTTP, like
 * `review.ts`, so golden tests and the HTTPS server run the same code.
 *
 * What it writes, and only that (docs/label-slots.md):
 * - CREATE: the slot wherever it is computable now — `namespace` keys, and
 *   `owner` keys of objects with a controller reference (children created
 *   with `generateName` included: their owner's uid is known). A slot that
 *   depends on the object's own uid (`uid` keys, `owner`-keyed roots) cannot
 *   be known before the apiserver assigns it (a uid in the body is not it:
 *   the apiserver replaces it); such an object is labelled by the manager's
 *   labeller right after it is stored, and a label it brought
 *   along (copied from another object) is removed, so it is never in the
 *   wrong cache.
 * - UPDATE: the slot, always (the uid is known), so a full update that drops
 *   or changes the label cannot move the object.
 * - Nothing else: no other label, no other field, no other resource.
 *
 * Never denies a well-formed review: the webhook sits on the controllers'
 * write path with `failurePolicy: Ignore`, and an object it could not label
 * is one the labeller labels a moment later. Only what the apiserver never
 * sends (not an AdmissionReview) gets an error answer.
 *
 * Pure apart from CPU; never throws.
 */
import { ringsLabelling, wantedSlot, type LabelSlotConfig } from "../ring/label-slots.ts";
import type { KeyMetadata } from "../shard/slots.ts";
import { escapePointerToken, type JsonPatchOperation } from "./jsonpatch.ts";
import { isObject, obj, str, type JsonObject, type JsonValue } from "./json.ts";
import { ADMISSION_API_VERSION, allowed, completeReview, errored, patched, type AdmissionReviewResponse } from "./response.ts";

/** What happened, for logs and metrics (`shardcar_label_webhook_reviews_total{outcome}`). */
export type LabelOutcome =
  /** Labels written, corrected or (a copied label whose slot needs the uid) removed; `deferred` rings are left to the labeller. */
  | { readonly result: "stamped"; readonly operations: number; readonly deferred: number }
  /** Every ring's label was already right. */
  | { readonly result: "unchanged" }
  /** A CREATE whose slot needs the uid: left to the labeller. */
  | { readonly result: "deferred"; readonly rings: number }
  /** No labels-mode ring labels this resource (or a subresource, or DELETE). */
  | { readonly result: "skipped"; readonly reason: "not-labelled" | "operation" | "subresource" }
  /** The manager has not read the ShardRings yet: admitted unchanged, the labeller catches up. */
  | { readonly result: "not-synced" }
  | { readonly result: "errored"; readonly code: number; readonly message: string };

export interface LabelReviewResult {
  readonly review: AdmissionReviewResponse;
  readonly outcome: LabelOutcome;
  /** For log lines: `group/resource namespace/name`. */
  readonly subject?: string;
}

/**
 * Answers one parsed AdmissionReview body. `config` is the manager's current
 * view of the labels-mode rings; `undefined` until the first ShardRing list.
 */
export function reviewLabelAdmission(body: unknown, config: LabelSlotConfig | undefined): LabelReviewResult {
  const request = isObject(body) ? obj(body["request"]) : undefined;
  const uid = str(request?.["uid"]) ?? "";
  const fail = (code: number, message: string): LabelReviewResult => ({
    review: completeReview(uid, errored(code, new Error(message))),
    outcome: { result: "errored", code, message },
  });
  const admit = (outcome: LabelOutcome, subject?: string, warning?: string): LabelReviewResult => ({
    review: completeReview(uid, warning === undefined ? allowed() : { ...allowed(), warnings: [warning] }),
    outcome,
    ...(subject === undefined ? {} : { subject }),
  });
  if (!isObject(body)) return fail(400, "request body is not a JSON object; expected an admission.k8s.io/v1 AdmissionReview");
  if (body["apiVersion"] !== ADMISSION_API_VERSION) {
    return fail(400, `unsupported apiVersion ${JSON.stringify(body["apiVersion"] ?? null)}: this webhook accepts ${ADMISSION_API_VERSION} AdmissionReview only`);
  }
  if (body["kind"] !== "AdmissionReview") return fail(400, `unsupported kind ${JSON.stringify(body["kind"] ?? null)}: expected AdmissionReview`);
  if (request === undefined) return fail(400, "AdmissionReview has no request");
  if (uid === "") return fail(400, "AdmissionReview request has no uid");
  const resource = obj(request["resource"]);
  const group = str(resource?.["group"]);
  const plural = str(resource?.["resource"]);
  if (group === undefined || plural === undefined || plural === "") {
    return fail(400, `AdmissionReview request.resource ${JSON.stringify(request["resource"] ?? null)} has no group and resource`);
  }
  const namespace = str(request["namespace"]) ?? "";
  const subject = `${group === "" ? plural : `${plural}.${group}`} ${namespace === "" ? "" : `${namespace}/`}${str(request["name"]) ?? ""}`;
  try {
    const operation = request["operation"];
    if (operation !== "CREATE" && operation !== "UPDATE") return admit({ result: "skipped", reason: "operation" }, subject);
    const sub = str(request["subResource"]);
    if (sub !== undefined && sub !== "") return admit({ result: "skipped", reason: "subresource" }, subject);
    if (config === undefined) return admit({ result: "not-synced" }, subject);
    const rings = ringsLabelling(config, group, plural);
    if (rings.length === 0) return admit({ result: "skipped", reason: "not-labelled" }, subject);
    const object = obj(request["object"]);
    if (object === undefined) return fail(400, `AdmissionReview ${String(operation)} request has no object`);
    const metadata = obj(object["metadata"]);
    if (object["metadata"] !== undefined && metadata === undefined) {
      return fail(400, "AdmissionReview request.object.metadata is not an object");
    }
    const old = obj(obj(request["oldObject"])?.["metadata"]);
    const meta = keyMetadata(metadata, old, namespace, operation === "UPDATE");
    const labels = obj(metadata?.["labels"]);
    const want: Record<string, string | undefined> = {};
    let deferred = 0;
    for (const { ring, key } of rings) {
      const slot = wantedSlot(ring, key, meta);
      if (slot === undefined) deferred++;
      want[ring.label] = slot;
    }
    const ops = labelOperations(metadata, labels, want);
    if (ops.length > 0) return { review: completeReview(uid, patched(ops)), outcome: { result: "stamped", operations: ops.length, deferred }, subject };
    if (deferred > 0) return admit({ result: "deferred", rings: deferred }, subject);
    return admit({ result: "unchanged" }, subject);
  } catch (e) {
    // A bug must not block a controller's write: admit it unchanged and say
    // so; the labeller labels the object once it is stored.
    const message = `internal error: ${e instanceof Error ? e.message : String(e)}`;
    return admit({ result: "errored", code: 500, message }, subject, `shardcar label-slots webhook: ${message}; the object is labelled by the manager's labeller instead`);
  }
}

/**
 * What the slot is computed from. The request's namespace is authoritative
 * (a created object's own may be empty). At CREATE the object has no uid:
 * the apiserver assigns it after admission and overwrites any uid the body
 * carries (an object copied from another, `kubectl get -o yaml` fed back to
 * `create`), so a slot computed from that one would put the object in the
 * wrong cache. On UPDATE a body without a uid (allowed: the server keeps the
 * stored one) is the stored object's uid.
 */
function keyMetadata(metadata: JsonObject | undefined, old: JsonObject | undefined, namespace: string, update: boolean): KeyMetadata {
  let uid = update ? str(metadata?.["uid"]) : undefined;
  if (update && (uid === undefined || uid === "")) uid = str(old?.["uid"]);
  return { uid, namespace, ownerReferences: metadata?.["ownerReferences"] };
}

/**
 * The operations that make `labels` carry `want` (a value: set it;
 * undefined: remove it), touching no other key. Paths are escaped: every
 * slot label key contains a `/`.
 */
function labelOperations(metadata: JsonObject | undefined, labels: JsonObject | undefined, want: Readonly<Record<string, string | undefined>>): JsonPatchOperation[] {
  const set = Object.entries(want).filter((e): e is [string, string] => e[1] !== undefined);
  if (labels === undefined) {
    if (set.length === 0) return [];
    const value: Record<string, JsonValue> = Object.fromEntries(set);
    // No labels map (or, never from a real apiserver, no metadata): add it whole.
    return metadata === undefined ? [{ op: "add", path: "/metadata", value: { labels: value } }] : [{ op: "add", path: "/metadata/labels", value }];
  }
  const ops: JsonPatchOperation[] = [];
  for (const [key, value] of Object.entries(want)) {
    const path = `/metadata/labels/${escapePointerToken(key)}`;
    const have = labels[key];
    if (value === undefined) {
      if (Object.hasOwn(labels, key)) ops.push({ op: "remove", path });
    } else if (!Object.hasOwn(labels, key)) ops.push({ op: "add", path, value });
    else if (have !== value) ops.push({ op: "replace", path, value });
  }
  return ops;
}
