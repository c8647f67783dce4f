/**
 * Content negotiation for sharded requests. The proxy must be able to read
 * what comes back, so only media types it can filter are asked for upstream:
 * JSON (plain, Table, PartialObjectMetadataList) and Kubernetes protobuf.
 * Never widened: a protobuf-only client is never answered with JSON.
 */

export type Encoding = "json" | "protobuf";

const FILTERABLE = /^(application\/json|application\/vnd\.kubernetes\.protobuf|\*\/\*|application\/\*)$/i;

/**
 * Returns the Accept value to send upstream, or `undefined` when the client
 * accepts nothing the proxy can filter (the caller answers 406).
 */
export function filterableAccept(accept: string | undefined): string | undefined {
  if (accept === undefined || accept.trim() === "") return "application/json";
  const kept = accept
    .split(",")
    .map((s) => s.trim())
    .filter((entry) => FILTERABLE.test(entry.split(";")[0]?.trim() ?? ""));
  return kept.length === 0 ? undefined : kept.join(",");
}

/** Which filter reads a response of this Content-Type; undefined = unreadable. */
export function encodingOf(contentType: string | undefined): Encoding | undefined {
  const base = (contentType ?? "").split(";")[0]?.trim().toLowerCase();
  if (base === "application/json") return "json";
  if (base === "application/vnd.kubernetes.protobuf") return "protobuf";
  return undefined;
}
