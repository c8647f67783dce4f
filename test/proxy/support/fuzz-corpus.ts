/**
 * The proxy fuzzer's corpus: the requests kubectl 1.36 and client-go 0.36
 * were recorded sending (`-v=8` logs in
 * `test/fixtures/kube-apiserver/kube-apiserver/observed-client-requests/`),
 * plus the lock requests client-go's leader election makes, which the
 * recordings do not hold and `--leader-election` renames.
 */
import { join } from "node:path";
import { fixtureNames, fixturePath, readFixtureText } from "../../support/fixtures.ts";

/** One HTTP/1.1 request, in pieces a mutation can reach. Nothing is validated. */
export interface RequestModel {
  method: string;
  /** The path as on the wire (percent-encoded). */
  path: string;
  /** Raw `k=v` parts, joined with `&` on the wire. */
  query: string[];
  version: string;
  headers: Array<[string, string]>;
  body: Buffer;
}

export const OBSERVED_DIR = fixturePath("kube-apiserver/observed-client-requests");

const REQUEST = /"Request" verb="([A-Z]+)" url="([^"]+)" headers=<\n((?:\t[^\n]*\n)*) >/g;

/** Every request in the recorded logs, in order, with its recorded headers. */
export function observedRequests(dir = OBSERVED_DIR): Array<{ file: string; request: RequestModel }> {
  const out: Array<{ file: string; request: RequestModel }> = [];
  for (const file of fixtureNames(dir).filter((f) => f.endsWith(".log"))) {
    const text = readFixtureText(join(dir, file));
    for (const m of text.matchAll(REQUEST)) {
      const url = new URL(m[2] as string);
      const headers = (m[3] as string)
        .split("\n")
        .filter((l) => l.startsWith("\t"))
        .map((l) => {
          const i = l.indexOf(":");
          return [l.slice(1, i), l.slice(i + 1).trim()] as [string, string];
        });
      // client-go's transport adds gzip (not logged); kubectl's too.
      headers.push(["Accept-Encoding", "gzip"]);
      out.push({ file, request: { method: m[1] as string, path: url.pathname, query: url.search === "" ? [] : url.search.slice(1).split("&"), version: "HTTP/1.1", headers, body: Buffer.alloc(0) } });
    }
  }
  return out;
}

/** client-go leaderelection's calls on a lock (`leases/<name>` or `configmaps/<name>`). */
export function lockRequests(lock: { readonly resource: "leases" | "configmaps"; readonly name: string }, namespace: string): RequestModel[] {
  const base = lock.resource === "leases" ? `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases` : `/api/v1/namespaces/${namespace}/configmaps`;
  const now = "2026-11-30T07:13:20.000000Z";
  const object =
    lock.resource === "leases"
      ? { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: lock.name, namespace }, spec: { holderIdentity: "replica-0", leaseDurationSeconds: 15, acquireTime: now, renewTime: now, leaseTransitions: 0 } }
      : { apiVersion: "v1", kind: "ConfigMap", metadata: { name: lock.name, namespace, annotations: { "control-plane.alpha.kubernetes.io/leader": JSON.stringify({ holderIdentity: "replica-0", leaseDurationSeconds: 15 }) } } };
  const json = Buffer.from(JSON.stringify(object));
  const headers = (body: boolean): Array<[string, string]> => [
    ["Accept", "application/json, */*"],
    ["User-Agent", "controller/v0.0.0 (linux/amd64) kubernetes/$Format"],
    ...(body ? ([["Content-Type", "application/json"], ["Content-Length", String(json.length)]] as Array<[string, string]>) : []),
  ];
  return [
    { method: "GET", path: `${base}/${lock.name}`, query: [], version: "HTTP/1.1", headers: headers(false), body: Buffer.alloc(0) },
    { method: "POST", path: base, query: [], version: "HTTP/1.1", headers: headers(true), body: json },
    { method: "PUT", path: `${base}/${lock.name}`, query: [], version: "HTTP/1.1", headers: headers(true), body: json },
  ];
}

/** The request's bytes. `first` headers go right after the request line (a repeated header keeps the first value). */
export function serialize(r: RequestModel, first: ReadonlyArray<[string, string]> = []): Buffer {
  const target = r.query.length === 0 ? r.path : `${r.path}?${r.query.join("&")}`;
  const head = [`${r.method} ${target} ${r.version}`, ...[...first, ...r.headers].map(([k, v]) => `${k}: ${v}`)].join("\r\n");
  return Buffer.concat([Buffer.from(`${head}\r\n\r\n`, "latin1"), r.body]);
}

export function cloneRequest(r: RequestModel): RequestModel {
  return { ...r, query: [...r.query], headers: r.headers.map(([k, v]) => [k, v]), body: Buffer.from(r.body) };
}
