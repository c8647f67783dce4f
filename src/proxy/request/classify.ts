/**
 * Request classification: which requests get the sharding treatment.
 *
 * Only collection LIST and WATCH of a configured resource are sharded.
 * Everything else (single-object GET, writes, subresources, discovery,
 * unconfigured resources, exec/attach/port-forward upgrades) passes through
 * untouched. A pure function of method, URL and configuration.
 */
import { joinSegments, pathSegments } from "../../kube/request-path.ts";
import type { ShardedResource } from "../../shard/spec.ts";

export type PassthroughReason =
  | "method"
  | "not-resource-path"
  /** A malformed percent-escape: the apiserver refuses the request (400) before routing it. */
  | "undecodable-path"
  | "not-sharded"
  | "single-object"
  | "subresource";

export interface ResourceRequest {
  readonly resource: ShardedResource;
  /** `""` for the core group. */
  readonly group: string;
  readonly version: string;
  /** Set for namespaced URLs; decoded. */
  readonly namespace?: string;
  /** The path as the controller sent it (for legacy watches, without the `watch` segment). */
  readonly path: string;
  readonly query: URLSearchParams;
}

export type Classification =
  | { readonly kind: "passthrough"; readonly reason: PassthroughReason; /** For reason `subresource`: its name (`log`, `exec`, `proxy`). */ readonly subresource?: string }
  | ({ readonly kind: "list" } & ResourceRequest)
  | ({ readonly kind: "watch"; readonly legacyPath: boolean } & ResourceRequest);

/** Index of sharded resources by `group/resource`. */
export type ResourceIndex = ReadonlyMap<string, ShardedResource>;

export function indexResources(resources: readonly ShardedResource[]): ResourceIndex {
  return new Map(resources.map((r) => [`${r.group}/${r.resource}`, r]));
}

const PASS = (reason: PassthroughReason): Classification => ({ kind: "passthrough", reason });

/**
 * Whether the apiserver serves the request as a watch: it converts the first
 * `watch` value as it converts every ListOptions boolean
 * (apimachinery's `Convert_Slice_string_To_bool`): present and neither `0`
 * nor (in any case) `false` is true, even `yes` or the empty string. Read
 * any other way, a watch would be served by the list filter.
 */
export function isWatchParam(query: URLSearchParams): boolean {
  const v = query.get("watch");
  return v !== null && v !== "0" && v.toLowerCase() !== "false";
}

/**
 * Classifies one request. `url` is the request target as received
 * (path plus raw query). The path is read as the apiserver reads it (see
 * `kube/request-path.ts`); never throws.
 */
export function classify(method: string, url: string, index: ResourceIndex): Classification {
  if (method !== "GET") return PASS("method");
  const q = url.indexOf("?");
  const rawPath = q === -1 ? url : url.slice(0, q);
  const query = new URLSearchParams(q === -1 ? "" : url.slice(q + 1));
  const parts = pathSegments(rawPath);
  if (parts === undefined) return PASS("undecodable-path");

  let group: string;
  let version: string;
  let rest: string[];
  if (parts[0] === "api" && parts.length >= 2) {
    group = "";
    version = parts[1] as string;
    rest = parts.slice(2);
  } else if (parts[0] === "apis" && parts.length >= 3) {
    group = parts[1] as string;
    version = parts[2] as string;
    rest = parts.slice(3);
  } else {
    return PASS("not-resource-path");
  }

  let legacyWatch = false;
  if (rest[0] === "watch") {
    legacyWatch = true;
    rest = rest.slice(1);
  }
  const prefix = parts.slice(0, parts.length - rest.length - (legacyWatch ? 1 : 0));

  let namespace: string | undefined;
  // `namespaces/<ns>/<resource>...` is namespaced; `namespaces` or
  // `namespaces/<name>` alone is the namespaces resource itself.
  if (rest[0] === "namespaces" && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const resourceName = rest[0];
  if (resourceName === undefined) return PASS("not-resource-path");
  // A subresource first, sharded or not: exec, attach and portforward
  // upgrade, and a pod's `proxy` passes its body on (`readsNoBody`).
  if (rest.length > 2) return { kind: "passthrough", reason: "subresource", subresource: rest[2] as string };
  const resource = index.get(`${group}/${resourceName}`);
  if (resource === undefined) return PASS("not-sharded");
  if (rest.length === 2) return PASS("single-object");

  // The legacy path loses exactly its `watch` segment (a namespace may be named "watch").
  const path = legacyWatch ? joinSegments([...prefix, ...parts.slice(prefix.length + 1)]) : rawPath;
  const base = { resource, group, version, path, query };
  const withNs = namespace === undefined ? base : { ...base, namespace };
  if (legacyWatch || isWatchParam(query)) return { kind: "watch", legacyPath: legacyWatch, ...withNs };
  return { kind: "list", ...withNs };
}

/**
 * Whether the apiserver serves the request without reading its body: a GET
 * of a resource, sharded or not, or of one of its subresources (`log`,
 * `status`, `scale`; a GET `exec` that did not upgrade is refused unread).
 * A body on one is never forwarded (server.ts): the apiserver would leave it
 * unread, which stops the proxy's copy of it, and with it the proxy's
 * reading of the client's connection, so a watch or a followed log whose
 * client left would stay open on both ends. A `proxy` subresource passes its
 * body on to the pod, service or node, and a non-resource path may read one.
 */
export function readsNoBody(c: Classification): boolean {
  if (c.kind !== "passthrough") return true;
  if (c.reason === "subresource") return c.subresource !== "proxy";
  return c.reason === "not-sharded" || c.reason === "single-object";
}
