/**
 * The request target the proxy routes on, made the same as the one it
 * forwards. http-proxy-3 sends upstream the WHATWG parse of the target
 * (`new URL(target, base)`: dot segments resolved, `\` read as `/`, an
 * absolute-form or `//host` target cut down to its path); classifying the
 * target as received instead would let `/api/v1/namespaces/x/../../pods` pass
 * as "not sharded" and reach the apiserver as a list of every pod. So the
 * listener replaces the target by exactly what would be forwarded, and refuses
 * (400) what the apiserver would refuse or could read differently:
 * a malformed percent-escape (Go's net/http answers 400), and a `.` or `..`
 * segment that only appears once the path is decoded (`x%2F..%2F..`).
 * Pure; never throws.
 */
import { malformedEscape, pathSegments } from "../../kube/request-path.ts";

export type RequestTarget =
  | { readonly ok: true; readonly url: string }
  | { readonly ok: false; readonly reason: "unparsable" | "bad-escape" | "dot-segment"; readonly message: string };

// Any base will do: only path and query are kept, as http-proxy-3 keeps them.
const BASE = "http://shardcar.invalid";
const QUOTED_MAX = 200;

/** A value for an error message: quoted, and cut short if long (a target may be 16 KiB). */
function quoted(value: string): string {
  return JSON.stringify(value.length > QUOTED_MAX ? `${value.slice(0, QUOTED_MAX)}…` : value);
}

export function readRequestTarget(raw: string): RequestTarget {
  let url: URL;
  try {
    url = new URL(raw, BASE);
  } catch {
    return { ok: false, reason: "unparsable", message: `shardcar: request target ${quoted(raw)} is not a URL path` };
  }
  const path = url.pathname;
  const escape = malformedEscape(path);
  if (escape !== undefined) {
    return { ok: false, reason: "bad-escape", message: `shardcar: invalid URL escape ${JSON.stringify(escape)} in request path ${quoted(path)}` };
  }
  if ((pathSegments(path) ?? []).some((s) => s === "." || s === "..")) {
    return { ok: false, reason: "dot-segment", message: `shardcar: request path ${quoted(path)} has a "." or ".." segment once decoded; send the path it stands for` };
  }
  return { ok: true, url: `${path}${url.search}` };
}
