/**
 * Authentication and authorization delegated to the apiserver, for the
 * admin listeners' `/metrics` (`--metrics-auth`), as controller-runtime's
 * `filters.WithAuthenticationAndAuthorization` does it: the request's bearer
 * token goes to a TokenReview, the user it names to a SubjectAccessReview
 * for the non-resource path and the lowercased method (`get /metrics`), and
 * the answers are cached as client-go's delegating authenticator and
 * authorizer cache them: tokens for a minute, an allow for five, a deny for
 * thirty seconds. No answer from the apiserver is a 500 and is not cached.
 *
 * The scraper needs RBAC `get` on the nonResourceURL `/metrics`; the
 * component needs `create` on `tokenreviews` and `subjectaccessreviews`
 * (docs/operations.md).
 */
import { createHash } from "node:crypto";
import type { ApiClient } from "./client.ts";

export type AuthDecision = { readonly allowed: true } | { readonly allowed: false; readonly status: 401 | 403 | 500; readonly message: string };

/** What an admin listener asks before it serves a guarded path. */
export interface RequestAuthorizer {
  authorize(authorization: string | undefined, verb: string, path: string): Promise<AuthDecision>;
}

interface User {
  readonly username: string;
  readonly uid: string;
  readonly groups: readonly string[];
  readonly extra: Readonly<Record<string, readonly string[]>>;
}

const TOKEN_TTL_MS = 60_000;
const ALLOW_TTL_MS = 5 * 60_000;
const DENY_TTL_MS = 30_000;
const CALL_TIMEOUT_MS = 10_000;
// Bounds memory against a scraper that sends a new token every time.
const MAX_ENTRIES = 1024;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

class TtlCache<V> {
  readonly #m = new Map<string, { value: V; until: number }>();
  get(key: string, now: number): V | undefined {
    const e = this.#m.get(key);
    if (e === undefined) return undefined;
    if (e.until > now) return e.value;
    this.#m.delete(key);
    return undefined;
  }
  set(key: string, value: V, until: number): void {
    if (this.#m.size >= MAX_ENTRIES) this.#m.delete(this.#m.keys().next().value ?? "");
    this.#m.set(key, { value, until });
  }
}

export class DelegatedAuth implements RequestAuthorizer {
  readonly #api: ApiClient;
  readonly #now: () => number;
  // Keyed by a hash: a token is never kept as a map key in memory dumps.
  readonly #tokens = new TtlCache<User | undefined>();
  readonly #access = new TtlCache<AuthDecision>();

  constructor(api: ApiClient, now: () => number = () => performance.now()) {
    this.#api = api;
    this.#now = now;
  }

  async authorize(authorization: string | undefined, verb: string, path: string): Promise<AuthDecision> {
    const token = /^Bearer (\S+)$/i.exec(authorization ?? "")?.[1];
    if (token === undefined) return { allowed: false, status: 401, message: "Unauthorized" };
    let user: User | undefined;
    try {
      user = await this.#authenticate(token);
    } catch {
      return { allowed: false, status: 500, message: "Authentication failed" };
    }
    if (user === undefined) return { allowed: false, status: 401, message: "Unauthorized" };
    try {
      return await this.#authorizeUser(user, verb.toLowerCase(), path);
    } catch {
      return { allowed: false, status: 500, message: `Authorization for user ${user.username} failed` };
    }
  }

  async #authenticate(token: string): Promise<User | undefined> {
    const key = createHash("sha256").update(token).digest("hex");
    const now = this.#now();
    const hit = this.#tokens.get(key, now);
    if (hit !== undefined) return hit;
    const review = await this.#api.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {
      body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token } },
      timeoutMs: CALL_TIMEOUT_MS,
    });
    const status = isRecord(review) && isRecord(review["status"]) ? review["status"] : {};
    const u = isRecord(status["user"]) ? status["user"] : {};
    const user: User | undefined =
      status["authenticated"] === true && typeof u["username"] === "string"
        ? {
            username: u["username"],
            uid: typeof u["uid"] === "string" ? u["uid"] : "",
            groups: Array.isArray(u["groups"]) ? u["groups"].map(String) : [],
            extra: isRecord(u["extra"]) ? (u["extra"] as Record<string, string[]>) : {},
          }
        : undefined;
    // A refusal is cached too, so a bad token cannot make every scrape a review.
    this.#tokens.set(key, user, now + TOKEN_TTL_MS);
    return user;
  }

  async #authorizeUser(user: User, verb: string, path: string): Promise<AuthDecision> {
    const key = JSON.stringify([user.username, user.uid, user.groups, verb, path]);
    const now = this.#now();
    const hit = this.#access.get(key, now);
    if (hit !== undefined) return hit;
    const review = await this.#api.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
      body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec: { user: user.username, uid: user.uid, groups: user.groups, extra: user.extra, nonResourceAttributes: { path, verb } } },
      timeoutMs: CALL_TIMEOUT_MS,
    });
    const allowed = isRecord(review) && isRecord(review["status"]) && review["status"]["allowed"] === true;
    const decision: AuthDecision = allowed ? { allowed: true } : { allowed: false, status: 403, message: `Authorization denied for user ${user.username}` };
    this.#access.set(key, decision, now + (allowed ? ALLOW_TTL_MS : DENY_TTL_MS));
    return decision;
  }
}
