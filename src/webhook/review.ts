/**
 * AdmissionReview v1 in, AdmissionReview v1 out: envelope validation, then
 * the decision and the patch. Independent of HTTP, so the golden tests and
 * the HTTPS server run exactly the same code. Never throws: every path,
 * including a bug that throws, answers with the request's UID when the
 * request carried one, because the apiserver rejects a response whose UID
 * does not match ("expected response.uid=…") and the user would then see
 * that instead of the real reason.
 */
import { decideInjection, type SkipReason } from "./decide.ts";
import type { InjectorConfig } from "./config.ts";
import { isObject, nestingDepth, obj, str, type JsonObject } from "./json.ts";
import { buildInjectionPatch } from "./patch.ts";
import { ADMISSION_API_VERSION, allowed, completeReview, denied, errored, patched, type AdmissionReviewResponse } from "./response.ts";

/** What happened, for logs and metrics. */
export type ReviewOutcome =
  | { readonly result: "injected"; readonly operations: number }
  | { readonly result: "skipped"; readonly reason: SkipReason | "not-create" }
  | { readonly result: "denied"; readonly message: string }
  | { readonly result: "errored"; readonly code: number; readonly message: string };

export interface ReviewResult {
  readonly review: AdmissionReviewResponse;
  readonly outcome: ReviewOutcome;
  /** For log lines: `namespace/name` or `namespace/generateName*`. */
  readonly pod?: string;
}

/**
 * The deepest Pod answered. A real Pod nests about 20 levels (managedFields'
 * fieldsV1 mirrors the spec); the copy and the diff the patch is built with
 * recurse, and exhaust the stack at about 2,000 levels. 256 is far from both.
 */
const MAX_POD_DEPTH = 256;

/** Answers one parsed AdmissionReview body. Pure apart from CPU; never throws. */
export function reviewPodAdmission(body: unknown, config: InjectorConfig): ReviewResult {
  const request = isObject(body) ? obj(body["request"]) : undefined;
  // Take the UID before anything else can fail, so every answer echoes it.
  const uid = str(request?.["uid"]) ?? "";
  const fail = (code: number, message: string): ReviewResult => ({
    review: completeReview(uid, errored(code, new Error(message))),
    outcome: { result: "errored", code, message },
  });
  try {
    if (!isObject(body)) return fail(400, "request body is not a JSON object; expected an admission.k8s.io/v1 AdmissionReview");
    if (body["apiVersion"] !== ADMISSION_API_VERSION) {
      return fail(400, `unsupported apiVersion ${JSON.stringify(body["apiVersion"] ?? null)}: this webhook accepts ${ADMISSION_API_VERSION} AdmissionReview only`);
    }
    if (body["kind"] !== "AdmissionReview") {
      return fail(400, `unsupported kind ${JSON.stringify(body["kind"] ?? null)}: expected AdmissionReview`);
    }
    if (request === undefined) return fail(400, "AdmissionReview has no request");
    if (uid === "") return fail(400, "AdmissionReview request has no uid");
    const kind = obj(request["kind"]);
    const gvk = `${str(kind?.["group"]) ?? ""}/${str(kind?.["version"]) ?? ""}/${str(kind?.["kind"]) ?? ""}`;
    if (gvk !== "/v1/Pod") {
      return fail(400, `expected a v1 Pod, got ${JSON.stringify(gvk)}: the webhook configuration must send only pods to shardcar`);
    }
    const subResource = str(request["subResource"]);
    if (request["operation"] !== "CREATE" || (subResource !== undefined && subResource !== "")) {
      return { review: completeReview(uid, allowed()), outcome: { result: "skipped", reason: "not-create" } };
    }
    const pod = obj(request["object"]);
    if (pod === undefined) return fail(400, "AdmissionReview request has no object (the Pod)");
    if (nestingDepth(pod, MAX_POD_DEPTH) > MAX_POD_DEPTH) {
      return fail(400, `AdmissionReview request.object is nested more than ${MAX_POD_DEPTH} levels deep: no Pod the apiserver decodes is (the webhook copies and compares the Pod, which a deeper one would not survive)`);
    }
    const namespace = str(request["namespace"]);
    const where = describePod(pod, namespace);

    const decision = decideInjection(pod, config, namespace === undefined ? {} : { namespace });
    if ("refuse" in decision) {
      return { review: completeReview(uid, denied(decision.refuse)), outcome: { result: "denied", message: decision.refuse }, pod: where };
    }
    if (!decision.inject) {
      return { review: completeReview(uid, allowed()), outcome: { result: "skipped", reason: decision.reason }, pod: where };
    }
    const ops = buildInjectionPatch(pod, decision.plan);
    return { review: completeReview(uid, patched(ops)), outcome: { result: "injected", operations: ops.length }, pod: where };
  } catch (e) {
    // A bug, not the user's fault: say so, and keep the UID.
    return fail(500, `internal error: ${e instanceof Error ? e.message : String(e)}`);
  }
}

function describePod(pod: JsonObject, namespace: string | undefined): string {
  const metadata = obj(pod["metadata"]);
  const name = str(metadata?.["name"]) || `${str(metadata?.["generateName"]) ?? ""}*`;
  return `${namespace ?? str(metadata?.["namespace"]) ?? ""}/${name}`;
}
