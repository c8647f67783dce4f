/**
 * Paged LIST for the operator tools: follows `continue`, resends the shard
 * selector on every page (the continue token does not record it), and reads
 * the few fields the tools need from each item.
 */
import { ShardcarError } from "../errors.ts";
import { keyValue, type ResourceKey } from "../shard/slots.ts";
import type { ApiClient } from "../kube/client.ts";
import { statusMessage } from "./resource.ts";
import { isRecord } from "../is-record.ts";

export interface ListOptions {
  /** Ask for PartialObjectMetadataList: a fraction of the bytes, and all the tools read. */
  readonly metadataOnly?: boolean;
  readonly shardSelector?: string | undefined;
  readonly labelSelector?: string | undefined;
  /** First page only (later pages are pinned by the continue token). */
  readonly resourceVersion?: string | undefined;
  readonly resourceVersionMatch?: "Exact" | "NotOlderThan" | undefined;
  /** Default 500, client-go's page size. */
  readonly pageSize?: number;
}

export interface ListResult {
  /** The list's resourceVersion (of the first page: every page shares it). */
  readonly resourceVersion: string;
  /** `metadata.shardInfo.selector` if every page carried one (undefined if any page did not). */
  readonly shardInfo: string | undefined;
  readonly pages: number;
  readonly items: number;
  readonly bytes: number;
}

export const METADATA_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/** `metadata.shardInfo.selector` of a list body, if any. */
export function shardInfoOf(body: unknown): string | undefined {
  const meta = isRecord(body) && isRecord(body["metadata"]) ? body["metadata"] : undefined;
  const si = meta !== undefined && isRecord(meta["shardInfo"]) ? meta["shardInfo"]["selector"] : undefined;
  return typeof si === "string" ? si : undefined;
}

/**
 * The value hashed for `key` (slots.ts `keyValue`): the uid, the namespace
 * (`""` when cluster-scoped), or the controller owner's uid (else the
 * object's). Undefined without metadata or uid.
 */
export function objectKey(item: unknown, key: ResourceKey): string | undefined {
  const meta = isRecord(item) && isRecord(item["metadata"]) ? item["metadata"] : undefined;
  if (meta === undefined) return undefined;
  const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
  return keyValue({ uid: str(meta["uid"]), namespace: str(meta["namespace"]), ownerReferences: meta["ownerReferences"] }, key);
}

export interface ObjectRef {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

export function objectRef(item: unknown): ObjectRef | undefined {
  const meta = isRecord(item) && isRecord(item["metadata"]) ? item["metadata"] : undefined;
  if (meta === undefined || typeof meta["name"] !== "string" || typeof meta["uid"] !== "string") return undefined;
  return { namespace: typeof meta["namespace"] === "string" ? meta["namespace"] : "", name: meta["name"], uid: meta["uid"] };
}

/** Status of a failed list, kept for callers that want to fall back (e.g. 410 on an Exact resourceVersion). */
export class ListError extends ShardcarError {
  readonly status: number;
  constructor(status: number, message: string) {
    super("SHARDCAR_ERR_UPSTREAM", message);
    this.status = status;
  }
}

/** Lists every page of `path`, calling `onItem` per item in order. Throws {@link ListError} on a non-200 page. */
export async function listAll(client: ApiClient, path: string, opts: ListOptions, onItem: (item: unknown) => void): Promise<ListResult> {
  let cont: string | undefined;
  let first = true;
  let resourceVersion = "";
  let shardInfo: string | undefined;
  let allShardInfo = true;
  let pages = 0;
  let items = 0;
  let bytes = 0;
  do {
    const query: Record<string, string | undefined> = {
      limit: String(opts.pageSize ?? 500),
      shardSelector: opts.shardSelector,
      labelSelector: opts.labelSelector,
      continue: cont,
      // The continue token pins the version; sending one with it is an error.
      ...(first ? { resourceVersion: opts.resourceVersion, resourceVersionMatch: opts.resourceVersionMatch } : {}),
    };
    const res = await client.get(path, { query, ...(opts.metadataOnly === true ? { accept: METADATA_ACCEPT } : {}), timeoutMs: 120_000 });
    if (res.status !== 200 || !isRecord(res.body)) {
      throw new ListError(res.status, `LIST ${path}${opts.shardSelector === undefined ? "" : ` with ${opts.shardSelector}`}: HTTP ${res.status}${statusMessage(res.body) === undefined ? "" : `: ${statusMessage(res.body)}`}`);
    }
    pages++;
    bytes += res.bytes;
    const meta = isRecord(res.body["metadata"]) ? res.body["metadata"] : {};
    if (first && typeof meta["resourceVersion"] === "string") resourceVersion = meta["resourceVersion"];
    const si = shardInfoOf(res.body);
    if (si === undefined) allShardInfo = false;
    else shardInfo ??= si;
    const list = Array.isArray(res.body["items"]) ? res.body["items"] : [];
    for (const item of list) {
      items++;
      onItem(item);
    }
    cont = typeof meta["continue"] === "string" && meta["continue"] !== "" ? meta["continue"] : undefined;
    first = false;
  } while (cont !== undefined);
  return { resourceVersion, shardInfo: allShardInfo ? shardInfo : undefined, pages, items, bytes };
}
