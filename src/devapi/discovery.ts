/**
 * Legacy (unaggregated) discovery documents built from the registered
 * resources: enough for kubectl to map `pods`, `po`, `leases`, `shardrings`
 * to URLs. Aggregated discovery is not served; clients that ask for it
 * (kubectl does, first) fall back to these when they get plain JSON.
 */
import type { ResolvedDef } from "./store.ts";

const VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

export function coreVersions(serverAddress: string): unknown {
  return { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress }] };
}

function groupDoc(group: string, versions: readonly string[]): unknown {
  const vs = versions.map((v) => ({ groupVersion: `${group}/${v}`, version: v }));
  return { name: group, versions: vs, preferredVersion: vs[0] };
}

/** The non-core groups with their versions, in registration order. */
export function groupsOf(defs: readonly ResolvedDef[]): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const d of defs) {
    if (d.group === "") continue;
    const vs = groups.get(d.group) ?? [];
    if (!vs.includes(d.version)) vs.push(d.version);
    groups.set(d.group, vs);
  }
  return groups;
}

export function groupList(defs: readonly ResolvedDef[]): unknown {
  return { kind: "APIGroupList", apiVersion: "v1", groups: [...groupsOf(defs)].map(([g, vs]) => groupDoc(g, vs)) };
}

export function apiGroup(defs: readonly ResolvedDef[], group: string): unknown {
  return { kind: "APIGroup", apiVersion: "v1", ...(groupDoc(group, groupsOf(defs).get(group) ?? []) as object) };
}

export function resourceList(defs: readonly ResolvedDef[], group: string, version: string): unknown {
  const resources: unknown[] = [];
  for (const d of defs) {
    if (d.group !== group || d.version !== version) continue;
    const r: Record<string, unknown> = { name: d.resource, singularName: d.singular, namespaced: d.namespaced, kind: d.kind, verbs: VERBS };
    if (d.shortNames && d.shortNames.length > 0) r.shortNames = d.shortNames;
    if (d.categories && d.categories.length > 0) r.categories = d.categories;
    resources.push(r);
    if (d.statusSubresource) resources.push({ name: `${d.resource}/status`, singularName: "", namespaced: d.namespaced, kind: d.kind, verbs: ["get", "patch", "update"] });
  }
  const gv = group === "" ? version : `${group}/${version}`;
  return { kind: "APIResourceList", apiVersion: "v1", groupVersion: gv, resources };
}

export function rootPaths(defs: readonly ResolvedDef[]): unknown {
  const paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"];
  for (const [g, vs] of groupsOf(defs)) {
    paths.push(`/apis/${g}`);
    for (const v of vs) paths.push(`/apis/${g}/${v}`);
  }
  return { paths: paths.sort() };
}

export const VERSION_INFO = {
  major: "1",
  minor: "36",
  emulationMajor: "1",
  emulationMinor: "36",
  minCompatibilityMajor: "1",
  minCompatibilityMinor: "35",
  gitVersion: "v1.36.0-shardcar-devapi",
  gitCommit: "0000000000000000000000000000000000000000",
  gitTreeState: "clean",
  buildDate: "1970-01-01T00:00:00Z",
  goVersion: "devapi",
  compiler: "node",
  platform: "devapi/node",
};
