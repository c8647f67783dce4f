/**
 * Named constructors for admission responses, after controller-runtime's
 * `response.go`: a handler says what it means (`denied("…")`) and
 * {@link completeReview} adds the UID and the envelope once, in one place.
 */
import type { JsonPatchOperation } from "./jsonpatch.ts";

export const ADMISSION_API_VERSION = "admission.k8s.io/v1";

export interface AdmissionStatus {
  readonly code: number;
  readonly message: string;
  readonly reason?: string;
}

/** `AdmissionResponse` without its UID, which only the request can supply. */
export interface AdmissionVerdict {
  readonly allowed: boolean;
  readonly status?: AdmissionStatus;
  readonly patchType?: "JSONPatch";
  /** Base64 of the JSON Patch, as the API requires. */
  readonly patch?: string;
  readonly warnings?: readonly string[];
}

export interface AdmissionResponse extends AdmissionVerdict {
  readonly uid: string;
}

export interface AdmissionReviewResponse {
  readonly apiVersion: typeof ADMISSION_API_VERSION;
  readonly kind: "AdmissionReview";
  readonly response: AdmissionResponse;
}

/** Admits the object unchanged. */
export function allowed(message?: string): AdmissionVerdict {
  return message === undefined ? { allowed: true } : { allowed: true, status: { code: 200, message } };
}

/** Refuses the object; `message` is shown to whoever created it. */
export function denied(message: string): AdmissionVerdict {
  return { allowed: false, status: { code: 403, reason: "Forbidden", message } };
}

/**
 * Admits the object with `ops` applied. With no operations this is
 * {@link allowed}: an empty patch is omitted rather than sent, as pepr and
 * controller-runtime do.
 */
export function patched(ops: readonly JsonPatchOperation[]): AdmissionVerdict {
  if (ops.length === 0) return allowed();
  // https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#response
  // "patch" is a base64-encoded JSON Patch (RFC 6902); "JSONPatch" is the only patchType.
  return { allowed: true, patchType: "JSONPatch", patch: Buffer.from(JSON.stringify(ops)).toString("base64") };
}

/** The webhook could not judge the request (malformed input, or a bug): not allowed. */
export function errored(code: number, err: unknown): AdmissionVerdict {
  const message = err instanceof Error ? err.message : String(err);
  return { allowed: false, status: { code, message } };
}

/** Wraps a verdict in the AdmissionReview envelope, echoing the request's UID. */
export function completeReview(uid: string, verdict: AdmissionVerdict): AdmissionReviewResponse {
  return { apiVersion: ADMISSION_API_VERSION, kind: "AdmissionReview", response: { uid, ...verdict } };
}
