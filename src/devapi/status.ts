/**
 * `metav1.Status` failures, built the way k8s.io/apimachinery/pkg/api/errors
 * builds them, so clients (client-go, client-node, kubectl) react to devapi
 * as they would to a real server: same code, reason and message shape.
 */
import { ShardcarError } from "../errors.ts";

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: Array<{ reason?: string; message: string; field?: string }>;
  retryAfterSeconds?: number;
}

export interface StatusBody {
  kind: "Status";
  apiVersion: "v1";
  metadata: { continue?: string };
  status: "Failure";
  message: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

/**
 * A request the emulated server refuses. Thrown by the store and the request
 * parsers; the HTTP layer writes {@link DevApiStatusError.status} as the body.
 *
 * It uses the `SHARDCAR_ERR_UPSTREAM` code: to the code under test, devapi is
 * the upstream apiserver, and this is that server's answer.
 */
export class DevApiStatusError extends ShardcarError {
  readonly status: StatusBody;
  constructor(status: StatusBody) {
    super("SHARDCAR_ERR_UPSTREAM", status.message);
    this.status = status;
  }
}

function status(code: number, message: string, reason?: string, details?: StatusDetails): DevApiStatusError {
  const body: StatusBody = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, code };
  if (reason !== undefined) body.reason = reason;
  if (details !== undefined) body.details = details;
  return new DevApiStatusError(body);
}

/** `group` is `""` for core; `resource` is the plural. */
export interface Qualified {
  group: string;
  resource: string;
}

function qualified(q: Qualified): string {
  return q.group === "" ? q.resource : `${q.resource}.${q.group}`;
}

function details(q: Qualified, name: string): StatusDetails {
  const d: StatusDetails = { name, kind: q.resource };
  if (q.group !== "") d.group = q.group;
  return d;
}

export function notFound(q: Qualified, name: string): DevApiStatusError {
  return status(404, `${qualified(q)} "${name}" not found`, "NotFound", details(q, name));
}

/** 404 for a path (or resource reference) that names no resource at all. */
export function pathNotFound(what?: string): DevApiStatusError {
  return status(404, `the server could not find the requested resource${what === undefined ? "" : ` (${what})`}`, "NotFound", {});
}

export function alreadyExists(q: Qualified, name: string): DevApiStatusError {
  return status(409, `${qualified(q)} "${name}" already exists`, "AlreadyExists", details(q, name));
}

/** Optimistic concurrency failure: the caller's `resourceVersion` is stale. */
export function conflict(q: Qualified, name: string, why = "the object has been modified; please apply your changes to the latest version and try again"): DevApiStatusError {
  return status(409, `Operation cannot be fulfilled on ${qualified(q)} "${name}": ${why}`, "Conflict", details(q, name));
}

/** 422; `kind` is the object's Kind, as in `Pod "x" is invalid: ...`. */
export function invalid(group: string, kind: string, name: string, causes: Array<{ field: string; message: string }>): DevApiStatusError {
  const gk = group === "" ? kind : `${kind}.${group}`;
  const text = causes.map((c) => `${c.field}: ${c.message}`).join(", ");
  const d: StatusDetails = { name, kind, causes: causes.map((c) => ({ reason: "FieldValueInvalid", message: c.message, field: c.field })) };
  if (group !== "") d.group = group;
  return status(422, `${gk} "${name}" is invalid: ${causes.length > 1 ? `[${text}]` : text}`, "Invalid", d);
}

export function badRequest(message: string): DevApiStatusError {
  return status(400, message, "BadRequest");
}

/** 410 Expired, as the watch cache answers a resourceVersion it no longer holds. */
export function expired(message: string, continueToken?: string): DevApiStatusError {
  const e = status(410, message, "Expired");
  if (continueToken !== undefined) e.status.metadata.continue = continueToken;
  return e;
}

/** 500 with no reason: how a 1.36 server answers an invalid shard selector. */
export function internal(message: string): DevApiStatusError {
  return status(500, message);
}

export function methodNotAllowed(): DevApiStatusError {
  return status(405, "the server does not allow this method on the requested resource", "MethodNotAllowed", {});
}

export function notAcceptable(): DevApiStatusError {
  return status(406, "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf", "NotAcceptable");
}

export function unsupportedMediaType(contentType: string): DevApiStatusError {
  return status(415, `the body of the request was in an unknown format - accepted media types include: application/json, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got ${JSON.stringify(contentType)})`, "UnsupportedMediaType");
}

export function tooLarge(limit: number): DevApiStatusError {
  return status(413, `the request body exceeds the limit of ${limit} bytes`, "RequestEntityTooLarge");
}

export function unauthorized(): DevApiStatusError {
  return status(401, "Unauthorized", "Unauthorized");
}

/** The 504 a server returns for a resourceVersion newer than any it has seen. */
export function tooLargeResourceVersion(requested: number, current: number): DevApiStatusError {
  return status(504, `Too large resource version: ${requested}, current: ${current}`, "Timeout", {
    causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
    retryAfterSeconds: 1,
  });
}
