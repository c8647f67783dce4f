/**
 * What the operator tools add to the one client (src/kube/client.ts, whose
 * non-throwing `raw` call they use): discovery of a resource's path and kind.
 *
 * Raw rather than client-node's typed clients because the tools send what
 * those cannot: `shardSelector`, `resourceVersionMatch` with paging, and
 * `as=PartialObjectMetadataList`.
 */
import { ShardcarError } from "../errors.ts";
import type { ApiClient } from "../kube/client.ts";
import type { ShardedResource } from "../shard/spec.ts";
import { resourceName, type ResolvedResource } from "./resource.ts";
import { isRecord } from "../is-record.ts";

export { groupVersion, resourceName, resourcePath, statusMessage, type ResolvedResource } from "./resource.ts";

/**
 * Finds a resource's preferred version, kind and scope through discovery, and
 * whether a CRD serves it. Throws {@link ShardcarError} when the server does
 * not serve it (the message says how to check).
 */
export async function resolveResource(client: ApiClient, r: ShardedResource): Promise<ResolvedResource> {
  let version = "v1";
  if (r.group !== "") {
    const g = await client.get(`/apis/${r.group}`);
    const pv = isRecord(g.body) && isRecord(g.body["preferredVersion"]) ? g.body["preferredVersion"]["version"] : undefined;
    if (g.status !== 200 || typeof pv !== "string") throw new ShardcarError("SHARDCAR_ERR_UPSTREAM", `API group ${r.group} is not served (GET /apis/${r.group}: HTTP ${g.status}); check with kubectl api-resources`);
    version = pv;
  }
  const path = r.group === "" ? "/api/v1" : `/apis/${r.group}/${version}`;
  const d = await client.get(path);
  const list = isRecord(d.body) && Array.isArray(d.body["resources"]) ? d.body["resources"] : [];
  const entry = list.find((e): e is Record<string, unknown> => isRecord(e) && e["name"] === r.resource);
  if (d.status !== 200 || entry === undefined) {
    throw new ShardcarError("SHARDCAR_ERR_UPSTREAM", `${resourceName(r)} is not served by ${path} (HTTP ${d.status}); check the name with kubectl api-resources`);
  }
  // A CRD's group always has a dot; built-in groups without one (apps,
  // batch, policy) never need the lookup. CRDs may live in *.k8s.io groups
  // (Gateway API), so the lookup decides; the name is only a fallback when
  // the CRD cannot be read.
  let custom = false;
  if (r.group.includes(".")) {
    const crd = await client.get(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${r.resource}.${r.group}`);
    custom = crd.status === 200 || (crd.status !== 404 && !r.group.endsWith(".k8s.io"));
  }
  return { ...r, version, kind: typeof entry["kind"] === "string" ? entry["kind"] : "", namespaced: entry["namespaced"] === true, custom };
}
