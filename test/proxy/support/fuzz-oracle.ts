/**
 * What the proxy fuzzer asserts about one exchange, independently of the
 * proxy's own reading of the request:
 * - the bytes back are HTTP responses (or nothing: a clean close);
 * - no answer is the listener guard's 500 (a handler threw) or a 502;
 * - an answer to a request that devapi served as a LIST or WATCH of a
 *   sharded collection (devapi's own record of what it served, found by the
 *   answer's `Audit-Id`, which the proxy passes on) was filtered by the proxy (it carries `x-shardcar-generation`), and every
 *   object in it, decoded from JSON or protobuf, hashes into the ranges the
 *   proxy enforced for that generation (for a watch: any generation from its
 *   own to the newest, since a watch lives across range changes). A DELETED
 *   is judged against every generation up to the newest: the proxy names in
 *   synthetic DELETEDs what its index says a cache of the lineage may hold,
 *   a superset by design (src/proxy/handoff/object-index.ts), and a resumed watch's
 *   cache was filled under generations older than the watch's own. A
 *   DELETED empties a cache of an object; it never puts one in.
 */
import type { RequestRecord } from "../../../src/devapi/index.ts";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, normalize, type Range } from "../../../src/shard/range.ts";
import type { ShardKey } from "../../../src/shard/selector.ts";
import { parseResponses, type ExchangeResult, type ParsedResponse } from "../../support/fuzz/raw-http.ts";
import { decodeEvent, decodeList, splitFrames, type K8sProto } from "../../support/proto/k8s.ts";

export interface ProxyUnderTest {
  readonly name: string;
  /** Sharded resources (`pods`, `configmaps`) and the key each hashes. */
  readonly keys: ReadonlyMap<string, ShardKey>;
  /** Every generation's ranges so far. */
  readonly history: ReadonlyMap<number, readonly Range[]>;
}

interface Meta {
  readonly uid?: unknown;
  readonly namespace?: unknown;
}

function metaOf(o: unknown): Meta | undefined {
  if (o === null || typeof o !== "object") return undefined;
  const m = (o as { metadata?: unknown }).metadata;
  return m !== null && typeof m === "object" ? (m) : undefined;
}

/** A Table's row objects, or the object itself. */
function objectsIn(o: unknown): unknown[] {
  if (o !== null && typeof o === "object" && (o as { kind?: unknown }).kind === "Table") {
    const rows = (o as { rows?: unknown }).rows;
    return Array.isArray(rows) ? rows.map((r: unknown) => (r as { object?: unknown } | null)?.object).filter((x) => x !== undefined) : [];
  }
  return [o];
}

/** The objects a response delivers, each with what carried it, from whatever of it parses; undefined when nothing does. */
function delivered(r: ParsedResponse, verb: "list" | "watch", pb: K8sProto): Array<{ readonly object: unknown; readonly what: string; readonly deleted: boolean }> | undefined {
  const type = r.headers.get("content-type")?.[0] ?? "";
  const items = (os: unknown[]): Array<{ object: unknown; what: string; deleted: boolean }> => os.map((object) => ({ object, what: "a list item", deleted: false }));
  try {
    if (type.startsWith("application/vnd.kubernetes.protobuf")) {
      if (verb === "list") return r.complete ? items([...decodeList(pb, r.body).items]) : undefined;
      const frames = splitFrames(completeFrames(r.body));
      return frames.map((f, i) => ({ e: decodeEvent(pb, f), i })).filter(({ e }) => e.type !== "BOOKMARK" && e.type !== "ERROR").map(({ e, i }) => ({ object: e.object, what: `event ${i + 1} of ${frames.length}, ${e.type}`, deleted: e.type === "DELETED" }));
    }
    if (verb === "list") return r.complete ? items(objectsIn(JSON.parse(r.body.toString("utf8")) as unknown).flatMap((o) => itemsOf(o))) : undefined;
    const lines = r.body.toString("utf8").split("\n").slice(0, -1);
    return lines.flatMap((l, i) => {
      const e = JSON.parse(l) as { type?: unknown; object?: unknown };
      return e.type === "BOOKMARK" || e.type === "ERROR" ? [] : objectsIn(e.object).map((object) => ({ object, what: `event ${i + 1} of ${lines.length}, ${String(e.type)}`, deleted: e.type === "DELETED" }));
    });
  } catch {
    return undefined;
  }
}

function itemsOf(o: unknown): unknown[] {
  const items = (o as { items?: unknown } | null)?.items;
  return Array.isArray(items) ? items : metaOf(o) !== undefined && (o as { kind?: unknown }).kind !== "Status" ? [o] : [];
}

/** The whole frames at the start of a protobuf watch stream cut anywhere. */
function completeFrames(b: Buffer): Buffer {
  let o = 0;
  while (b.length - o >= 4 && b.length - o - 4 >= b.readUInt32BE(o)) o += 4 + b.readUInt32BE(o);
  return b.subarray(0, o);
}

/** What the judgement needs of a plan: the method of each request on the wire (a HEAD's answer has no body). */
export interface Judged {
  readonly methods: readonly string[];
}

export function judgeExchange(plan: Judged, result: ExchangeResult, records: readonly RequestRecord[], target: ProxyUnderTest, pb: K8sProto): string[] {
  const problems: string[] = [];
  const parsed = parseResponses(result.received, plan.methods, result.serverClosed);
  if (parsed.malformed !== undefined) problems.push(`${target.name}: the answer is not HTTP: ${parsed.malformed}`);
  // By the answer's id, not its place: a message may get no answer (node
  // skips empty lines before a request line) or two (bytes that end it early).
  const byAuditId = new Map<string, RequestRecord>();
  for (const rec of records) byAuditId.set(rec.auditId, rec);
  const newest = Math.max(...target.history.keys());
  parsed.responses.forEach((r, k) => {
    const text = r.body.subarray(0, 4096).toString("utf8");
    if (text.includes("internal error serving")) problems.push(`${target.name}: the listener guard answered (a handler threw): ${text.slice(0, 300)}`);
    // The one 502 that is no fault of the proxy's: the apiserver closed a
    // kept-alive connection as the request went out on it (devapi, as node,
    // closes idle ones after 5 s).
    if (r.status === 502 && !/apiserver \S+ unreachable: (socket hang up|read ECONNRESET|write ECONNRESET|write EPIPE)/.test(text)) problems.push(`${target.name}: 502 from the proxy: ${text.slice(0, 300)}`);
    if (r.status !== 200) return;
    const auditId = r.headers.get("audit-id")?.[0];
    // An answer without one is the proxy's own: it carries no objects.
    const rec = auditId === undefined ? undefined : byAuditId.get(auditId);
    const served = rec?.served;
    const key = served === undefined ? undefined : target.keys.get(served.resource);
    if (served === undefined || key === undefined) return;
    const gen = r.headers.get("x-shardcar-generation")?.[0];
    if (gen === undefined) {
      problems.push(`${target.name}: devapi served the request of answer ${k} (${rec?.url.slice(0, 200)}) as a ${served.verb} of ${served.resource}, but the proxy passed it through unfiltered`);
      return;
    }
    const g = Number(gen);
    const ranges = served.verb === "list" ? target.history.get(g) : normalize([...target.history].filter(([h]) => h >= g && h <= newest).flatMap(([, rs]) => rs));
    if (ranges === undefined) {
      problems.push(`${target.name}: response ${k} names generation ${gen}, which the ownership never had`);
      return;
    }
    const everOwned = normalize([...target.history].filter(([h]) => h <= newest).flatMap(([, rs]) => rs));
    for (const { object, what, deleted } of delivered(r, served.verb, pb) ?? []) {
      const m = metaOf(object);
      const value = key === "uid" ? m?.uid : m?.namespace;
      if (typeof value !== "string") continue;
      const h = fnv1a64(value);
      if (!contains(deleted ? everOwned : ranges, h)) {
        // Which generations did own it: what a reader of the report needs first.
        const owners = [...target.history].filter(([, rs]) => contains(rs, h)).map(([x]) => x);
        const near = owners.filter((x) => x < g).slice(-3);
        problems.push(`${target.name}: response ${k} (a ${served.verb} of ${served.resource} under generation ${g}, newest ${newest}) delivered an object whose ${key} ${JSON.stringify(value)} is outside the proxy's ranges (${what}; owned last at generation ${near.length === 0 ? "none before" : near.join(", ")}; devapi served ${JSON.stringify(rec?.url.slice(0, 300))})`);
        return;
      }
    }
  });
  return problems;
}
