/**
 * A sharded resource as the operator tools address it (path, kind, scope),
 * and the small JSON readers they share. Pure: no I/O.
 */
import type { ShardedResource } from "../shard/spec.ts";
import { isRecord } from "../is-record.ts";

/** `message` of a Kubernetes Status body, if it is one. */
export function statusMessage(body: unknown): string | undefined {
  return isRecord(body) && typeof body["message"] === "string" ? body["message"] : undefined;
}

/** A sharded resource, located through discovery. */
export interface ResolvedResource extends ShardedResource {
  readonly version: string;
  readonly kind: string;
  readonly namespaced: boolean;
  /** Served by a CustomResourceDefinition: unstructured lists, never `shardInfo`. */
  readonly custom: boolean;
}

export function groupVersion(r: { group: string; version: string }): string {
  return r.group === "" ? r.version : `${r.group}/${r.version}`;
}

/** `/api/v1/pods`, `/apis/g/v/namespaces/ns/things`, `/api/v1/namespaces/ns/pods/name`. */
export function resourcePath(r: ResolvedResource, namespace?: string, name?: string): string {
  const base = r.group === "" ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  const ns = r.namespaced && namespace !== undefined ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  return `${base}${ns}/${r.resource}${name === undefined ? "" : `/${encodeURIComponent(name)}`}`;
}

export function resourceName(r: ShardedResource): string {
  return r.group === "" ? r.resource : `${r.resource}.${r.group}`;
}

