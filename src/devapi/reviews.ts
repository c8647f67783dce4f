/**
 * TokenReview and SubjectAccessReview, as far as a component that delegates
 * its authentication and authorization to the apiserver needs them (the
 * sidecar's and the manager's `/metrics` behind `--metrics-auth`, as
 * controller-runtime's `WithAuthenticationAndAuthorization` does): tokens
 * devapi was told about name a user, and SubjectAccessReview allows the
 * non-resource requests it was told to. Resource attributes are never
 * allowed here (RBAC on resources is beyond devapi).
 *
 * Pure: a review body in, the answered review out.
 */
import { isRecord } from "../is-record.ts";

export interface DevUser {
  readonly username: string;
  readonly uid?: string;
  readonly groups?: readonly string[];
}

export interface DevAuth {
  /** The bearer tokens TokenReview accepts, and whom each names. */
  readonly users: Readonly<Record<string, DevUser>>;
  /** Non-resource requests SubjectAccessReview allows: a user name or a group may `verb` `path`. */
  readonly grants: ReadonlyArray<{ readonly subject: string; readonly verb: string; readonly path: string }>;
}

export const TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews";
export const SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** The review `body` answered, or undefined when `path` is not a review. */
export function answerReview(path: string, body: unknown, auth: DevAuth | undefined): Record<string, unknown> | undefined {
  const review = isRecord(body) ? body : {};
  const spec = isRecord(review["spec"]) ? review["spec"] : {};
  if (path === TOKEN_REVIEWS) {
    const user = auth?.users[str(spec["token"]) ?? ""];
    const status = user === undefined ? { authenticated: false, error: "token not recognised" } : { authenticated: true, user: { username: user.username, uid: user.uid ?? "", groups: [...(user.groups ?? []), "system:authenticated"] } };
    return { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", metadata: {}, spec, status };
  }
  if (path === SUBJECT_ACCESS_REVIEWS) {
    const attrs = isRecord(spec["nonResourceAttributes"]) ? spec["nonResourceAttributes"] : undefined;
    const subjects = new Set([str(spec["user"]) ?? "", ...(Array.isArray(spec["groups"]) ? spec["groups"].map(String) : [])]);
    const allowed = attrs !== undefined && (auth?.grants ?? []).some((g) => subjects.has(g.subject) && g.verb === str(attrs["verb"]) && g.path === str(attrs["path"]));
    return { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", metadata: {}, spec, status: allowed ? { allowed: true, reason: "devapi grant" } : { allowed: false, reason: "no devapi grant" } };
  }
  return undefined;
}
