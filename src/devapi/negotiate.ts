/**
 * Response media-type negotiation from the Accept header: plain JSON, a
 * `Table`, or `PartialObjectMetadata(List)`. devapi speaks JSON only, so a
 * protobuf (or YAML) clause is skipped, and a request that accepts nothing
 * else gets 406, as a real server answers a protobuf Table.
 */
export type OutputFormat =
  | { readonly kind: "json" }
  | { readonly kind: "table"; readonly version: "v1" | "v1beta1" }
  | { readonly kind: "pom"; readonly version: "v1" | "v1beta1" };

interface Clause {
  type: string;
  params: Map<string, string>;
  q: number;
  order: number;
}

function parseAccept(header: string): Clause[] {
  const out: Clause[] = [];
  header.split(",").forEach((raw, order) => {
    const [type = "", ...rest] = raw.split(";").map((s) => s.trim());
    if (type === "") return;
    const params = new Map<string, string>();
    for (const p of rest) {
      const eq = p.indexOf("=");
      if (eq > 0) params.set(p.slice(0, eq).trim().toLowerCase(), p.slice(eq + 1).trim().replace(/^"|"$/g, ""));
    }
    const q = Number(params.get("q") ?? "1");
    out.push({ type: type.toLowerCase(), params, q: Number.isFinite(q) ? q : 1, order });
  });
  // Highest q first; ties keep the client's order.
  return out.sort((a, b) => b.q - a.q || a.order - b.order);
}

/**
 * The format to answer with, or undefined when no clause is acceptable
 * (the caller answers 406). An absent or empty header means JSON.
 */
export function negotiate(accept: string | undefined): OutputFormat | undefined {
  if (accept === undefined || accept.trim() === "") return { kind: "json" };
  for (const c of parseAccept(accept)) {
    if (c.q <= 0) continue;
    if (c.type !== "application/json" && c.type !== "application/*" && c.type !== "*/*") continue;
    const as = c.params.get("as");
    if (as === undefined) return { kind: "json" };
    const g = c.params.get("g");
    const v = c.params.get("v");
    if (g !== "meta.k8s.io" || (v !== "v1" && v !== "v1beta1")) continue;
    if (as === "Table") return { kind: "table", version: v };
    if (as === "PartialObjectMetadata" || as === "PartialObjectMetadataList") return { kind: "pom", version: v };
  }
  return undefined;
}

const TRUE = new Set(["1", "t", "T", "true", "TRUE", "True"]);

/** Go's `isPrettyPrint`: `?pretty=` wins, else curl, Wget and browsers get indented JSON. */
export function wantsPretty(query: URLSearchParams, userAgent: string | undefined): boolean {
  const p = query.get("pretty");
  if (p !== null && p !== "") return TRUE.has(p);
  const ua = userAgent ?? "";
  return ua.startsWith("curl") || ua.startsWith("Wget") || ua.startsWith("Mozilla/5.0");
}
