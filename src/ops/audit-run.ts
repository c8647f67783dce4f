/**
 * `shardcar audit`'s shell: reads the owners (static ranges or a ring's
 * ShardRing and Leases), lists the resource once in full and once per owner,
 * and hands the results to {@link buildAudit}; for labels-mode rings, lists
 * each resource metadata-only and hands it to {@link buildLabelAudit}.
 */
import type { ApiClient } from "../kube/client.ts";
import { labelSlotConfig, type LabelSlotRing, type SlotResource } from "../ring/label-slots.ts";
import { RING_GROUP, RING_LABEL, RING_PLURAL, RING_VERSION } from "../ring/names.ts";
import { fnv1a64 } from "../shard/hash.ts";
import { contains } from "../shard/range.ts";
import { canonicalSelector } from "../shard/selector.ts";
import { buildAudit, type AuditObject, type AuditReport, type OwnerList } from "./audit.ts";
import { resolveResource, resourceName, resourcePath, statusMessage, type ResolvedResource } from "./kube.ts";
import { isRecord } from "../is-record.ts";
import { buildLabelAudit, type LabelAuditReport, type LabelledObject } from "./label-audit.ts";
import { ListError, listAll, objectKey, objectRef } from "./lists.ts";
import { ringOwners, type MemberLease, type OwnerSet, type RingRead } from "./owners.ts";

function timeOf(v: unknown): number | undefined {
  if (typeof v !== "string") return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : t;
}

/** Reads a ring's ShardRing and member Leases. Throws when the ShardRing cannot be read. */
export async function readRing(client: ApiClient, namespace: string, ring: string): Promise<RingRead> {
  const sr = await client.get(`/apis/${RING_GROUP}/${RING_VERSION}/namespaces/${namespace}/${RING_PLURAL}/${ring}`);
  if (sr.status !== 200) {
    throw new ListError(sr.status, `ShardRing ${namespace}/${ring}: HTTP ${sr.status}${sr.status === 404 ? " (no such ring; its name is the shardcar.io/ring annotation, default the owning workload)" : ""}${statusMessage(sr.body) === undefined ? "" : `: ${statusMessage(sr.body)}`}`);
  }
  const leases: MemberLease[] = [];
  await listAll(client, `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`, { labelSelector: `${RING_LABEL}=${ring}` }, (item) => {
    const meta = isRecord(item) && isRecord(item["metadata"]) ? item["metadata"] : {};
    const spec = isRecord(item) && isRecord(item["spec"]) ? item["spec"] : {};
    const annotations: Record<string, string> = {};
    if (isRecord(meta["annotations"])) for (const [k, v] of Object.entries(meta["annotations"])) if (typeof v === "string") annotations[k] = v;
    leases.push({
      name: typeof meta["name"] === "string" ? meta["name"] : "",
      annotations,
      holder: typeof spec["holderIdentity"] === "string" ? spec["holderIdentity"] : undefined,
      renewTime: timeOf(spec["renewTime"]) ?? timeOf(spec["acquireTime"]),
      leaseDurationSeconds: typeof spec["leaseDurationSeconds"] === "number" ? spec["leaseDurationSeconds"] : undefined,
    });
  });
  return { namespace, ring, status: isRecord(sr.body) ? sr.body["status"] : undefined, leases };
}

/** The ring's owners as they serve right now (see {@link ringOwners}). */
export async function loadRing(client: ApiClient, namespace: string, ring: string, now: number): Promise<OwnerSet> {
  return ringOwners(await readRing(client, namespace, ring), now);
}

export interface AuditOptions {
  readonly resource: ResolvedResource;
  readonly owners: OwnerSet;
  readonly pageSize?: number;
  readonly topNamespaces?: number;
}

function idOf(ref: { namespace: string; name: string }): string {
  return ref.namespace === "" ? ref.name : `${ref.namespace}/${ref.name}`;
}

/**
 * Lists `resource` in full (paged, `resourceVersion=0`: the watch cache, as
 * informers list) and then once per owner with its selector at exactly the
 * same resourceVersion, so the lists compare like with like. If the server
 * cannot serve that version any more, the owner lists are taken at the
 * latest one and the report says so.
 */
export async function runAudit(client: ApiClient, opts: AuditOptions): Promise<AuditReport> {
  const r = opts.resource;
  const path = resourcePath(r);
  const full: AuditObject[] = [];
  const fullList = await listAll(client, path, { metadataOnly: true, resourceVersion: "0", pageSize: opts.pageSize }, (item) => {
    const ref = objectRef(item);
    const keyValue = objectKey(item, r.key);
    if (ref === undefined || keyValue === undefined) return;
    full.push({ id: idOf(ref), namespace: ref.namespace, keyValue });
  });
  const notes: string[] = [...opts.owners.notes];
  const lists: OwnerList[] = [];
  let exact = fullList.resourceVersion !== "";
  for (const owner of opts.owners.owners) {
    // An owner key has no shard selector: the owner's list is the full one, filtered here as its proxy would.
    const selector = r.key === "owner" ? (owner.ranges.length === 0 ? undefined : "") : canonicalSelector(r.key, owner.ranges);
    if (selector === undefined) {
      // Owns nothing: no selector can say so, and nothing is served.
      lists.push({ owner: owner.name, ids: [], outside: 0, serverFiltered: true });
      continue;
    }
    const ids: string[] = [];
    let outside = 0;
    const onItem = (item: unknown): void => {
      const ref = objectRef(item);
      const keyValue = objectKey(item, r.key);
      if (ref === undefined || keyValue === undefined) return;
      // Count only what the owner's proxy would deliver: an ignoring server
      // returns everything, and the proxy drops what is out of range.
      if (contains(owner.ranges, fnv1a64(keyValue))) ids.push(idOf(ref));
      else outside++;
    };
    const list = (rv: boolean): Promise<unknown> =>
      listAll(client, path, { metadataOnly: true, shardSelector: selector === "" ? undefined : selector, pageSize: opts.pageSize, ...(rv ? { resourceVersion: fullList.resourceVersion, resourceVersionMatch: "Exact" as const } : {}) }, onItem);
    try {
      await list(exact);
    } catch (e) {
      // 410: compacted away; 504: not served in time; 400: Exact not supported.
      if (!(exact && e instanceof ListError && (e.status === 410 || e.status === 504 || e.status === 400))) throw e;
      exact = false;
      ids.length = 0;
      outside = 0;
      notes.push(`the server could not list at resourceVersion ${fullList.resourceVersion} (${e.message}); range lists are at the latest version, so objects created or deleted meanwhile show up as churn`);
      await list(false);
    }
    lists.push({ owner: owner.name, ids, outside, serverFiltered: outside === 0 });
  }
  return buildAudit({ resource: resourceName(r), key: r.key, owners: { ...opts.owners, notes }, resourceVersion: fullList.resourceVersion, full, lists, topNamespaces: opts.topNamespaces });
}

/** A ShardRing's label-slot settings: the ring when it is in labels mode, else why not. */
export async function readLabelRing(client: ApiClient, namespace: string, ring: string): Promise<{ status: number; ring: LabelSlotRing | undefined; problem: string | undefined; condition: { status: string; reason: string; message: string } | undefined }> {
  const sr = await client.get(`/apis/${RING_GROUP}/${RING_VERSION}/namespaces/${namespace}/${RING_PLURAL}/${ring}`);
  if (sr.status !== 200 || !isRecord(sr.body)) return { status: sr.status, ring: undefined, problem: statusMessage(sr.body), condition: undefined };
  const obj = sr.body;
  const config = labelSlotConfig([{ metadata: { namespace, name: ring }, spec: obj["spec"], status: obj["status"] }]);
  const st = isRecord(obj["status"]) ? obj["status"] : {};
  const conditions = Array.isArray(st["conditions"]) ? st["conditions"] : [];
  const c = conditions.find((x): x is Record<string, unknown> => isRecord(x) && x["type"] === "Labelled");
  const text = (v: unknown): string => (typeof v === "string" ? v : "");
  const condition = c === undefined ? undefined : { status: text(c["status"]), reason: text(c["reason"]), message: text(c["message"]) };
  const problem = config.problems[0]?.message ?? (config.rings.length === 0 ? `ShardRing ${namespace}/${ring} is not in labels mode (spec.filter is ${JSON.stringify(isRecord(obj["spec"]) ? (obj["spec"]["filter"] ?? "shardselector") : "shardselector")})` : undefined);
  return { status: 200, ring: config.rings[0], problem, condition };
}

/** Lists `resource` metadata-only and judges every object's slot label for `ring`. */
export async function runLabelAudit(client: ApiClient, ring: LabelSlotRing, resource: SlotResource, opts: { pageSize?: number; examples?: number } = {}): Promise<LabelAuditReport> {
  const resolved = await resolveResource(client, { resource: resource.resource, group: resource.group, key: "uid" });
  const objects: LabelledObject[] = [];
  await listAll(client, resourcePath(resolved), { metadataOnly: true, pageSize: opts.pageSize }, (item) => {
    const meta = isRecord(item) && isRecord(item["metadata"]) ? item["metadata"] : undefined;
    if (meta === undefined || typeof meta["name"] !== "string") return;
    const namespace = typeof meta["namespace"] === "string" ? meta["namespace"] : "";
    const labels: Record<string, string> = {};
    if (isRecord(meta["labels"])) for (const [k, v] of Object.entries(meta["labels"])) if (typeof v === "string") labels[k] = v;
    objects.push({ id: namespace === "" ? meta["name"] : `${namespace}/${meta["name"]}`, meta: { uid: typeof meta["uid"] === "string" ? meta["uid"] : undefined, namespace, ownerReferences: meta["ownerReferences"] }, labels });
  });
  return buildLabelAudit(ring, resource, objects, opts.examples);
}
