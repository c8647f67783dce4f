/**
 * Mutating admission, the small part of the real MutatingAdmissionWebhook
 * plugin devapi needs: for the resources and operations a webhook lists,
 * the object about to be stored is sent as an AdmissionReview v1 (uid, kind,
 * resource, name, namespace, operation, object, oldObject, dryRun, as the
 * plugin fills them in) and the JSON Patch of the answer is applied. A
 * denial fails the request with the webhook's code and the plugin's
 * wording; a webhook that cannot be called, or answers nonsense, fails it
 * (`failurePolicy: Fail`) or is skipped (`Ignore`).
 *
 * Not emulated: selectors, matchConditions, reinvocation, subresources,
 * dry-run (devapi has none), validating webhooks. Webhooks run in the order
 * given, each seeing the previous one's result.
 *
 * Pure: the HTTPS call is the caller's ({@link AdmissionCaller}).
 */
import { isRecord } from "../is-record.ts";
import { applyJsonPatch } from "./patch.ts";
import { DevApiStatusError, internal, type StatusBody } from "./status.ts";
import type { KubeObject } from "./types.ts";

export type AdmissionOperation = "CREATE" | "UPDATE";

/** One mutating webhook, as much of a `MutatingWebhookConfiguration` entry as devapi honours. */
export interface MutatingWebhook {
  /** For messages, as the plugin names it: `slots.shardcar.io`. */
  readonly name: string;
  /** `https://…`. */
  readonly url: string;
  /** PEM the webhook's serving certificate must chain to. */
  readonly caBundle?: string | undefined;
  /** The TLS name to verify, when it is not the URL's host (a `service:` reference's `<svc>.<ns>.svc`). */
  readonly serverName?: string | undefined;
  readonly rules: readonly { readonly group: string; readonly resource: string; readonly operations: readonly AdmissionOperation[] }[];
  /** Default `Fail`, as the API defaults it. */
  readonly failurePolicy?: "Fail" | "Ignore" | undefined;
  /** Default 10 s, as the API defaults it. */
  readonly timeoutMs?: number | undefined;
}

/** POSTs a review to the webhook and resolves with its parsed answer; rejects when there is none. */
export type AdmissionCaller = (hook: MutatingWebhook, review: unknown) => Promise<unknown>;

export interface AdmissionRequest {
  readonly uid: string;
  readonly group: string;
  readonly version: string;
  readonly resource: string;
  readonly kind: string;
  readonly operation: AdmissionOperation;
  /** `""` for a create with `generateName`, as the plugin sends it. */
  readonly name: string;
  /** `""` when cluster-scoped. */
  readonly namespace: string;
  readonly object: KubeObject;
  readonly oldObject: KubeObject | null;
}

export function matches(hook: MutatingWebhook, group: string, resource: string, operation: AdmissionOperation): boolean {
  return hook.rules.some((r) => (r.group === group || r.group === "*") && (r.resource === resource || r.resource === "*") && r.operations.includes(operation));
}

/** The AdmissionReview v1 the plugin sends. */
export function admissionReview(r: AdmissionRequest): Record<string, unknown> {
  const gvk = { group: r.group, version: r.version, kind: r.kind };
  const gvr = { group: r.group, version: r.version, resource: r.resource };
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: r.uid,
      kind: gvk,
      resource: gvr,
      requestKind: gvk,
      requestResource: gvr,
      name: r.name,
      ...(r.namespace === "" ? {} : { namespace: r.namespace }),
      operation: r.operation,
      object: r.object,
      oldObject: r.oldObject,
      dryRun: false,
    },
  };
}

function failure(code: number, message: string, reason?: string): DevApiStatusError {
  const body: StatusBody = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, code };
  if (reason !== undefined) body.reason = reason;
  return new DevApiStatusError(body);
}

export type Answer =
  | { readonly object: KubeObject }
  /** The request fails with this error: the webhook said no. */
  | { readonly denied: DevApiStatusError }
  /** The answer cannot be used; the failure policy decides. */
  | { readonly unusable: string };

/** What one webhook's answer means for the object. */
export function applyAnswer(request: AdmissionRequest, answer: unknown, name: string): Answer {
  const response = isRecord(answer) && isRecord(answer["response"]) ? answer["response"] : undefined;
  if (!isRecord(answer) || answer["apiVersion"] !== "admission.k8s.io/v1" || answer["kind"] !== "AdmissionReview" || response === undefined) {
    return { unusable: "the answer is not an admission.k8s.io/v1 AdmissionReview with a response" };
  }
  if (response["uid"] !== request.uid) return { unusable: `expected response.uid=${JSON.stringify(request.uid)}, got ${JSON.stringify(response["uid"] ?? "")}` };
  if (response["allowed"] !== true) {
    const st = isRecord(response["status"]) ? response["status"] : {};
    const code = typeof st["code"] === "number" && st["code"] >= 400 ? st["code"] : 403;
    const msg = typeof st["message"] === "string" ? st["message"] : "";
    return { denied: failure(code, `admission webhook "${name}" denied the request${msg === "" ? " without explanation" : `: ${msg}`}`, typeof st["reason"] === "string" ? st["reason"] : undefined) };
  }
  const patch = response["patch"];
  if (patch === undefined) return { object: request.object };
  if (response["patchType"] !== "JSONPatch" || typeof patch !== "string") return { unusable: `unsupported patchType ${JSON.stringify(response["patchType"] ?? null)}` };
  let ops: unknown;
  try {
    ops = JSON.parse(Buffer.from(patch, "base64").toString("utf8"));
  } catch {
    return { unusable: "the patch is not base64 JSON" };
  }
  let out: unknown;
  try {
    out = applyJsonPatch(request.object, ops);
  } catch (e) {
    return { unusable: `the patch cannot be applied: ${e instanceof Error ? e.message : String(e)}` };
  }
  return isRecord(out) ? { object: out } : { unusable: "the patch does not leave an object" };
}

/** Runs every matching webhook in order; resolves with the object to store. */
export async function admit(hooks: readonly MutatingWebhook[], request: AdmissionRequest, call: AdmissionCaller): Promise<KubeObject> {
  let object = request.object;
  for (const hook of hooks) {
    if (!matches(hook, request.group, request.resource, request.operation)) continue;
    const req = { ...request, object };
    let why: string;
    try {
      const a = applyAnswer(req, await call(hook, admissionReview(req)), hook.name);
      if ("denied" in a) throw a.denied;
      if ("object" in a) {
        object = a.object;
        continue;
      }
      why = a.unusable;
    } catch (e) {
      if (e instanceof DevApiStatusError) throw e;
      why = `failed to call webhook: ${e instanceof Error ? e.message : String(e)}`;
    }
    if (hook.failurePolicy === "Ignore") continue;
    throw internal(`Internal error occurred: failed calling webhook "${hook.name}": ${why}`);
  }
  return object;
}
