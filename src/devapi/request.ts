/**
 * Request decoding, pure: the URL path into a route (discovery, or a
 * resource with namespace/name/subresource), and the query into list/watch
 * options, validated as k8s.io/apimachinery validates ListOptions.
 */
import { decodeRequestPath, malformedEscape } from "../kube/request-path.ts";
import { badRequest, invalid, pathNotFound } from "./status.ts";
import type { ResourceState } from "./store.ts";
import type { IncludeObject } from "./table.ts";

export type Route =
  | { readonly kind: "root" }
  | { readonly kind: "version" }
  | { readonly kind: "health" }
  | { readonly kind: "coreVersions" }
  | { readonly kind: "groups" }
  | { readonly kind: "group"; readonly group: string }
  | { readonly kind: "resources"; readonly group: string; readonly version: string }
  | {
      readonly kind: "resource";
      readonly state: ResourceState;
      readonly namespace?: string;
      readonly name?: string;
      readonly subresource?: "status";
      /** A legacy `/watch/` path. */
      readonly watchPath: boolean;
    };

export type Lookup = (group: string, version: string, resource: string) => ResourceState | undefined;
export type GroupKnown = (group: string, version?: string) => boolean;

/**
 * The request target as Go's net/http reads it (`url.ParseRequestURI`): one
 * that starts with `/` is a path, `//x@y/api/v1/pods` included, where
 * WHATWG's URL would read `x@y` as a host and `/api/v1/pods` as the path
 * (the apiserver answers that path 404); anything else is an absolute URL.
 */
export function requestUrl(target: string): URL {
  return new URL(target.startsWith("/") ? `http://devapi${target}` : target, "http://devapi");
}

/** Routes a path (without query). Unknown paths throw a 404 Status. */
export function route(pathname: string, lookup: Lookup, known: GroupKnown): Route {
  if (pathname === "/" || pathname === "") return { kind: "root" };
  if (pathname === "/version" || pathname === "/version/") return { kind: "version" };
  if (/^\/(healthz|readyz|livez)(\/.*)?$/.test(pathname)) return { kind: "health" };
  // As Go's net/http and the apiserver: a malformed escape is refused, and
  // the whole path is decoded before it is split (`%2F` separates segments).
  const decoded = decodeRequestPath(pathname);
  if (decoded === undefined) throw badRequest(`invalid URL escape ${JSON.stringify(malformedEscape(pathname))}`);
  const segs = decoded.split("/").slice(1);
  if (segs[segs.length - 1] === "") segs.pop();
  if (segs.some((s) => s === "")) throw pathNotFound();

  let group: string;
  let version: string;
  let rest: string[];
  if (segs[0] === "api") {
    if (segs.length === 1) return { kind: "coreVersions" };
    group = "";
    version = segs[1] as string;
    if (version !== "v1") throw pathNotFound();
    rest = segs.slice(2);
  } else if (segs[0] === "apis") {
    if (segs.length === 1) return { kind: "groups" };
    group = segs[1] as string;
    if (segs.length === 2) {
      if (!known(group)) throw pathNotFound();
      return { kind: "group", group };
    }
    version = segs[2] as string;
    if (!known(group, version)) throw pathNotFound();
    rest = segs.slice(3);
  } else {
    throw pathNotFound();
  }
  if (rest.length === 0) return { kind: "resources", group, version };

  let i = 0;
  const watchPath = rest[0] === "watch";
  if (watchPath) i++;
  let namespace: string | undefined;
  let resource: string;
  let name: string | undefined;
  let sub: string | undefined;
  const nsScoped = rest[i] === "namespaces" && rest.length - i >= 3 ? lookup(group, version, rest[i + 2] as string) : undefined;
  if (nsScoped?.def.namespaced) {
    namespace = rest[i + 1];
    resource = rest[i + 2] as string;
    name = rest[i + 3];
    sub = rest[i + 4];
    if (rest.length > i + 5) throw pathNotFound();
  } else {
    resource = rest[i] as string;
    name = rest[i + 1];
    sub = rest[i + 2];
    if (rest.length > i + 3) throw pathNotFound();
  }
  const state = lookup(group, version, resource);
  if (!state) throw pathNotFound();
  // A namespaced resource's objects live only under /namespaces/<ns>/.
  if (state.def.namespaced && namespace === undefined && name !== undefined) throw pathNotFound();
  if (sub !== undefined && !(sub === "status" && state.def.statusSubresource === true)) throw pathNotFound();
  if (watchPath && sub !== undefined) throw pathNotFound();
  const r: { kind: "resource"; state: ResourceState; watchPath: boolean; namespace?: string; name?: string; subresource?: "status" } = { kind: "resource", state, watchPath };
  if (namespace !== undefined) r.namespace = namespace;
  if (name !== undefined) r.name = name;
  if (sub === "status") r.subresource = "status";
  return r;
}

/** LIST/WATCH query parameters, decoded. */
export interface ListQuery {
  readonly watch: boolean;
  readonly labelSelector: string;
  readonly fieldSelector: string;
  /** First value; `""` (absent or empty) means no selector. */
  readonly shardSelector: string;
  readonly limit: number;
  readonly continueToken: string;
  /** Undefined when absent; `""` when present and empty. */
  readonly resourceVersion: string | undefined;
  readonly resourceVersionMatch: string;
  readonly sendInitialEvents: boolean | undefined;
  readonly allowWatchBookmarks: boolean;
  readonly timeoutSeconds: number | undefined;
  readonly includeObject: IncludeObject;
}

/**
 * A ListOptions boolean as apimachinery converts it from the query
 * (`Convert_Slice_string_To_bool`): absent is unset; the first value `0` or
 * `false` (any case) is false; anything else, even `yes` or empty, is true.
 */
function bool(q: URLSearchParams, name: string): boolean | undefined {
  const v = q.get(name);
  if (v === null) return undefined;
  return v !== "0" && v.toLowerCase() !== "false";
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** An int64 ListOptions field as `strconv.ParseInt(v, 10, 64)` reads it (precision beyond 2^53 is not kept). */
function int(q: URLSearchParams, name: string): number | undefined {
  const v = q.get(name);
  if (v === null || v === "") return undefined;
  if (!/^[-+]?\d+$/.test(v)) throw badRequest(`strconv.ParseInt: parsing ${JSON.stringify(v)}: invalid syntax`);
  const n = BigInt(v);
  if (n < INT64_MIN || n > INT64_MAX) throw badRequest(`strconv.ParseInt: parsing ${JSON.stringify(v)}: value out of range`);
  return Number(n);
}

/**
 * Decodes and validates list/watch options. Throws 400 for undecodable
 * values and 422 (`ListOptions.meta.k8s.io "" is invalid`) for combinations
 * the server forbids.
 */
export function parseListQuery(q: URLSearchParams, watchPath: boolean): ListQuery {
  const includeRaw = q.get("includeObject") ?? "";
  if (includeRaw !== "" && includeRaw !== "None" && includeRaw !== "Metadata" && includeRaw !== "Object") {
    throw badRequest(`includeObject: Unsupported value: ${JSON.stringify(includeRaw)}`);
  }
  const query: ListQuery = {
    watch: watchPath || (bool(q, "watch") ?? false),
    labelSelector: q.get("labelSelector") ?? "",
    fieldSelector: q.get("fieldSelector") ?? "",
    shardSelector: q.get("shardSelector") ?? "",
    limit: Math.max(0, int(q, "limit") ?? 0),
    continueToken: q.get("continue") ?? "",
    resourceVersion: q.get("resourceVersion") ?? undefined,
    resourceVersionMatch: q.get("resourceVersionMatch") ?? "",
    sendInitialEvents: bool(q, "sendInitialEvents"),
    allowWatchBookmarks: bool(q, "allowWatchBookmarks") ?? false,
    timeoutSeconds: int(q, "timeoutSeconds"),
    includeObject: includeRaw === "" ? "Metadata" : includeRaw,
  };
  const errs = validateListQuery(query);
  if (errs.length > 0) throw invalid("meta.k8s.io", "ListOptions", "", errs);
  return query;
}

/** k8s.io/apimachinery/pkg/apis/meta/internalversion/validation.ValidateListOptions (WatchList enabled). */
function validateListQuery(o: ListQuery): Array<{ field: string; message: string }> {
  const errs: Array<{ field: string; message: string }> = [];
  const match = o.resourceVersionMatch;
  if (o.watch) {
    if (o.sendInitialEvents !== undefined && match !== "NotOlderThan") {
      errs.push({ field: "resourceVersionMatch", message: "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan" });
    }
    if (match !== "") {
      if (o.sendInitialEvents === undefined) errs.push({ field: "resourceVersionMatch", message: "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided" });
      if (match !== "NotOlderThan") errs.push({ field: "resourceVersionMatch", message: `Unsupported value: ${JSON.stringify(match)}: supported values: "NotOlderThan"` });
      if (o.continueToken !== "") errs.push({ field: "resourceVersionMatch", message: "Forbidden: resourceVersionMatch is forbidden when continue is provided" });
    }
    return errs;
  }
  if (match !== "") {
    if ((o.resourceVersion ?? "") === "") errs.push({ field: "resourceVersionMatch", message: "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided" });
    if (o.continueToken !== "") errs.push({ field: "resourceVersionMatch", message: "Forbidden: resourceVersionMatch is forbidden when continue is provided" });
    if (match !== "Exact" && match !== "NotOlderThan") errs.push({ field: "resourceVersionMatch", message: `Unsupported value: ${JSON.stringify(match)}: supported values: "Exact", "NotOlderThan", ""` });
    if (match === "Exact" && o.resourceVersion === "0") errs.push({ field: "resourceVersionMatch", message: `Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"` });
  }
  if (o.sendInitialEvents !== undefined) errs.push({ field: "sendInitialEvents", message: "Forbidden: sendInitialEvents is forbidden for list" });
  return errs;
}

/** Parses a resourceVersion query value; throws 400 when it is not a number. */
export function parseResourceVersion(rv: string): number {
  if (!/^\d+$/.test(rv)) throw badRequest(`invalid resource version: ${JSON.stringify(rv)}`);
  return Number(rv);
}
