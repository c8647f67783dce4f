/**
 * The requests real clients were seen to send (`-v=8` logs in
 * `test/fixtures/kube-apiserver/kube-apiserver/observed-client-requests/`),
 * read back so the lane can send exactly the same path, query (parameter order,
 * `+` for spaces) and headers.
 */
import { readFixtureText } from "../../support/fixtures.ts";

export const OBSERVED_DIR = "kube-apiserver/observed-client-requests";

export interface ObservedRequest {
  readonly verb: string;
  /** Path and raw query exactly as logged, e.g. `/api/v1/pods?allowWatchBookmarks=true&…`. */
  readonly pathAndQuery: string;
  /** Header names lower-cased, as logged. */
  readonly headers: Readonly<Record<string, string>>;
}

/** Every `"Request"` record in one log, in order. */
export function observedRequests(file: string): ObservedRequest[] {
  const lines = readFixtureText(`${OBSERVED_DIR}/${file}`).split("\n");
  const out: ObservedRequest[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /"Request" verb="([A-Z]+)" url="([^"]+)" headers=</.exec(lines[i] ?? "");
    if (m === null) continue;
    const headers: Record<string, string> = {};
    for (i++; i < lines.length && (lines[i] ?? "").trim() !== ">"; i++) {
      const h = /^\s*([^:]+):\s*(.*)$/.exec(lines[i] ?? "");
      if (h !== null) headers[(h[1] ?? "").toLowerCase()] = h[2] ?? "";
    }
    const url = new URL(m[2] ?? "");
    out.push({ verb: m[1] ?? "", pathAndQuery: `${url.pathname}${url.search}`, headers });
  }
  return out;
}

/**
 * The raw query with one parameter replaced (or removed, for `undefined`),
 * keeping the order and encoding of every other parameter byte for byte.
 */
export function withParam(pathAndQuery: string, name: string, value: string | undefined): string {
  const [path, query = ""] = pathAndQuery.split("?", 2) as [string, string?];
  const parts = query === "" ? [] : query.split("&");
  const out: string[] = [];
  let done = false;
  for (const p of parts) {
    if (p.split("=", 1)[0] === name) {
      if (value !== undefined && !done) out.push(`${name}=${encodeURIComponent(value)}`);
      done = true;
    } else out.push(p);
  }
  if (!done && value !== undefined) out.push(`${name}=${encodeURIComponent(value)}`);
  return out.length === 0 ? path : `${path}?${out.join("&")}`;
}
