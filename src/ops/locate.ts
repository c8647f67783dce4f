/**
 * `--for-object`: which range, and which ring member, owns a live object.
 * Reads the object (for its uid or namespace) and, for a ring, the
 * ShardRing and Leases; the answer is computed by the pure owner functions.
 */
import type { ApiClient } from "../kube/client.ts";
import { ConfigError } from "../errors.ts";
import { fnv1a64, formatBound } from "../shard/hash.ts";
import { contains, split } from "../shard/range.ts";
import type { ResourceKey } from "../shard/slots.ts";
import { readRing } from "./audit-run.ts";
import { resourceName, resourcePath, statusMessage, type ResolvedResource } from "./kube.ts";
import { objectKey, objectRef } from "./lists.ts";
import { committedOwnerOf, ownersOf, ringOwners } from "./owners.ts";

export interface ObjectLocation {
  readonly resource: string;
  readonly object: string;
  readonly uid: string;
  readonly key: ResourceKey;
  readonly keyValue: string;
  readonly hash: string;
  /** With N ranges: the index of the one holding it. */
  readonly shard?: { readonly index: number; readonly of: number } | undefined;
  readonly ring?:
    | {
        readonly name: string;
        /** The member the committed table assigns it to. */
        readonly committedOwner: string | undefined;
        readonly generation: number | undefined;
        /** Members whose proxies deliver it right now (by their Leases), serving or not. */
        readonly servedBy: readonly { readonly member: string; readonly serving: boolean; readonly note?: string | undefined }[];
      }
    | undefined;
}

/** Parses `ns/name` (or `name` for a cluster-scoped resource). */
export function parseObjectRef(value: string, namespaced: boolean, flag = "--for-object"): { namespace: string | undefined; name: string } {
  const parts = value.split("/");
  if (namespaced ? parts.length !== 2 || parts[0] === "" || parts[1] === "" : parts.length !== 1 || parts[0] === "") {
    throw new ConfigError(flag, `invalid ${flag} ${JSON.stringify(value)}: expected ${namespaced ? "namespace/name" : "name (the resource is cluster-scoped)"}`);
  }
  return namespaced ? { namespace: parts[0], name: parts[1] ?? "" } : { namespace: undefined, name: parts[0] ?? "" };
}

export async function locateObject(
  client: ApiClient,
  r: ResolvedResource,
  ref: string,
  opts: { readonly shards?: number | undefined; readonly ring?: { readonly namespace: string; readonly name: string } | undefined; readonly now: number },
): Promise<ObjectLocation> {
  const { namespace, name } = parseObjectRef(ref, r.namespaced);
  const res = await client.get(resourcePath(r, namespace, name));
  const o = objectRef(res.body);
  const keyValue = objectKey(res.body, r.key);
  if (res.status !== 200 || o === undefined || keyValue === undefined) {
    throw new ConfigError("--for-object", `${resourceName(r)} ${ref}: HTTP ${res.status}${statusMessage(res.body) === undefined ? "" : `: ${statusMessage(res.body)}`}`);
  }
  const h = fnv1a64(keyValue);
  const out: ObjectLocation = {
    resource: resourceName(r),
    object: ref,
    uid: o.uid,
    key: r.key,
    keyValue,
    hash: formatBound(h),
    ...(opts.shards === undefined ? {} : { shard: { index: split(opts.shards).findIndex((x) => contains([x], h)), of: opts.shards } }),
  };
  if (opts.ring === undefined) return out;
  const read = await readRing(client, opts.ring.namespace, opts.ring.name);
  const owners = ringOwners(read, opts.now);
  const committed = committedOwnerOf(read.status, h);
  return {
    ...out,
    ring: {
      name: `${opts.ring.namespace}/${opts.ring.name}`,
      committedOwner: committed?.member,
      generation: committed?.generation,
      servedBy: ownersOf(owners, h).map((w) => ({ member: w.name, serving: w.serving, note: w.note })),
    },
  };
}

export function formatLocation(l: ObjectLocation): string {
  const lines = [`${l.resource} ${l.object}  uid ${l.uid}`, `  key ${l.key} = ${JSON.stringify(l.keyValue)}  hash ${l.hash}`];
  if (l.shard !== undefined) lines.push(`  range ${l.shard.index}/${l.shard.of}`);
  if (l.ring !== undefined) {
    const serving = l.ring.servedBy.filter((s) => s.serving).map((s) => s.member);
    lines.push(`  ring ${l.ring.name}: committed owner ${l.ring.committedOwner ?? "(none)"}${l.ring.generation === undefined ? "" : ` (generation ${l.ring.generation})`}`);
    lines.push(`  delivered now by: ${serving.length === 0 ? "NOBODY (a gap)" : serving.join(", ")}`);
    for (const s of l.ring.servedBy.filter((x) => !x.serving)) lines.push(`  claimed by ${s.member}, not serving: ${s.note ?? ""}`);
  }
  return lines.join("\n") + "\n";
}
