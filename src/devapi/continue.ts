/**
 * Continue tokens in the shape the apiserver uses (base64url of
 * `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`): opaque to clients,
 * and, as on the real server, they do not record the shard, label or field
 * selector, so a page requested without a selector comes back unfiltered.
 */
import { badRequest } from "./status.ts";

export interface ContinueToken {
  /** The resourceVersion the first page was served at; -1 means "latest" (an inconsistent continuation). */
  readonly rv: number;
  /** Resume strictly after this key. */
  readonly after: string;
}

export function encodeContinue(rv: number, lastKey: string): string {
  return Buffer.from(JSON.stringify({ v: "meta.k8s.io/v1", rv, start: `/${lastKey}\u0000` })).toString("base64url");
}

export function decodeContinue(token: string): ContinueToken {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    throw badRequest("continue key is not valid: illegal base64 data");
  }
  if (typeof parsed !== "object" || parsed === null) throw badRequest("continue key is not valid: malformed token");
  const { v, rv, start } = parsed as { v?: unknown; rv?: unknown; start?: unknown };
  if (v !== "meta.k8s.io/v1") throw badRequest(`continue key is not valid: server does not recognize this encoded key version`);
  if (typeof rv !== "number" || !Number.isInteger(rv) || (rv < 1 && rv !== -1)) throw badRequest("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  if (typeof start !== "string" || !start.startsWith("/") || !start.endsWith("\u0000")) throw badRequest("continue key is not valid: encoded key is not valid");
  return { rv, after: start.slice(1, -1) };
}
