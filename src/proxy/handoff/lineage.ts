/**
 * Lineage keys: which requests belong to one controller cache. The ledger
 * keeps its relist bookkeeping and resume points per lineage, the object
 * index its objects.
 */

/** The lineage key of a sharded request: its path, its selectors and its `as=` transform. */
export function lineageKey(path: string, query: URLSearchParams, accept: string | undefined): string {
  // client-go's metadata client asks for as=PartialObjectMetadataList on
  // LIST and as=PartialObjectMetadata on WATCH: one cache, one lineage.
  const as = (/;\s*as=([^;,\s]+)/i.exec(accept ?? "")?.[1] ?? "").replace(/List$/, "");
  return JSON.stringify([path, query.get("labelSelector") ?? "", query.get("fieldSelector") ?? "", as]);
}

/** A watch that continues from a specific resourceVersion (typically a LIST's), without initial state. */
export function isResumingWatch(q: URLSearchParams): boolean {
  const rv = q.get("resourceVersion");
  return !isTrue(q.get("sendInitialEvents")) && rv !== null && rv !== "" && rv !== "0";
}

export function isTrue(v: string | null): boolean {
  return v === "true" || v === "1";
}
