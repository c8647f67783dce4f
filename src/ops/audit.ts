/**
 * The audit's arithmetic, pure: given the full list of a resource and one
 * list per owner, how many objects each owner serves, whether those add up
 * to the total, which objects no serving owner has (missing) or several
 * have (duplicated), and how uneven the load is.
 */
import { fnv1a64, formatBound } from "../shard/hash.ts";
import { complement, contains, intersect, ratio, size, union, type Range } from "../shard/range.ts";
import type { ResourceKey } from "../shard/slots.ts";
import type { Owner, OwnerSet } from "./owners.ts";

/** One object of the full list. */
export interface AuditObject {
  /** `namespace/name`, or `name` when cluster-scoped. */
  readonly id: string;
  readonly namespace: string;
  /** The value hashed: the uid, or the namespace. */
  readonly keyValue: string;
}

/** What one owner's sharded list returned. */
export interface OwnerList {
  readonly owner: string;
  /** Ids of the returned objects that lie in the owner's ranges. */
  readonly ids: readonly string[];
  /** Returned objects outside the owner's ranges (the server ignored the selector); not counted, as the proxy would drop them. */
  readonly outside: number;
  /** Whether the server filtered: `shardInfo` (typed), or no outside item (custom / metadata-only lists). */
  readonly serverFiltered: boolean;
}

export interface OwnerRow {
  readonly name: string;
  readonly serving: boolean;
  readonly note?: string | undefined;
  /** Share of the keyspace its ranges cover. */
  readonly share: number;
  /** Objects its list returned in its ranges. */
  readonly count: number;
  /** Objects of the full list whose hash is in its ranges. */
  readonly expected: number;
  readonly outside: number;
  readonly serverFiltered: boolean;
}

export interface MissingObject {
  readonly id: string;
  readonly hash: string;
  /** Owners whose ranges hold the hash but do not serve (expired), or none. */
  readonly claimedBy: readonly string[];
}

export interface AuditReport {
  readonly resource: string;
  readonly key: ResourceKey;
  readonly owners: string;
  readonly notes: readonly string[];
  readonly resourceVersion: string;
  readonly total: number;
  /** Sum of the serving owners' counts. */
  readonly sum: number;
  readonly rows: readonly OwnerRow[];
  readonly missing: { readonly count: number; readonly examples: readonly MissingObject[] };
  readonly duplicated: { readonly count: number; readonly examples: readonly { readonly id: string; readonly owners: readonly string[] }[] };
  /** In some owner's list but not in the full list: objects created or deleted between the lists. */
  readonly churn: number;
  /** Share of the keyspace no serving owner covers, and covered twice. */
  readonly uncoveredKeyspace: number;
  readonly doubledKeyspace: number;
  /** Max over mean of the serving owners' counts (1 is perfectly even); 0 with no objects. */
  readonly skew: number;
  readonly largestNamespaces: readonly { readonly namespace: string; readonly count: number; readonly owners: readonly string[] }[];
  /** Nothing missing and nothing duplicated. */
  readonly ok: boolean;
}

export interface AuditInput {
  readonly resource: string;
  readonly key: ResourceKey;
  readonly owners: OwnerSet;
  readonly resourceVersion: string;
  readonly full: readonly AuditObject[];
  readonly lists: readonly OwnerList[];
  /** How many of the largest namespaces to name (namespace keying). Default 5. */
  readonly topNamespaces?: number;
  /** Examples kept for missing and duplicated objects. Default 10. */
  readonly examples?: number;
}

function coverageOf(owners: readonly Owner[]): { uncovered: number; doubled: number } {
  let all: Range[] = [];
  let twice: Range[] = [];
  for (const o of owners) {
    twice = union(twice, intersect(all, o.ranges));
    all = union(all, o.ranges);
  }
  return { uncovered: ratio(complement(all)), doubled: size(twice) === 0n ? 0 : ratio(twice) };
}

export function buildAudit(input: AuditInput): AuditReport {
  const examples = input.examples ?? 10;
  const owners = input.owners.owners;
  const serving = owners.filter((o) => o.serving);
  const servingNames = new Set(serving.map((o) => o.name));
  const hashOf = new Map<string, bigint>();
  for (const o of input.full) hashOf.set(o.id, fnv1a64(o.keyValue));
  // Where each object was found, by serving owners only: an expired member's
  // list shows what it would hold, but nobody is delivering it.
  const foundIn = new Map<string, string[]>();
  let churn = 0;
  for (const l of input.lists) {
    if (!servingNames.has(l.owner)) continue;
    for (const id of l.ids) {
      if (!hashOf.has(id)) {
        churn++;
        continue;
      }
      const at = foundIn.get(id);
      if (at === undefined) foundIn.set(id, [l.owner]);
      else at.push(l.owner);
    }
  }
  const missing: MissingObject[] = [];
  let missingCount = 0;
  const dups: { id: string; owners: string[] }[] = [];
  let dupCount = 0;
  for (const o of input.full) {
    const at = foundIn.get(o.id);
    if (at === undefined) {
      missingCount++;
      if (missing.length < examples) {
        const h = hashOf.get(o.id) ?? 0n;
        missing.push({ id: o.id, hash: formatBound(h), claimedBy: owners.filter((w) => contains(w.ranges, h)).map((w) => w.name) });
      }
    } else if (at.length > 1) {
      dupCount++;
      if (dups.length < examples) dups.push({ id: o.id, owners: at });
    }
  }
  const rows: OwnerRow[] = owners.map((o) => {
    const l = input.lists.find((x) => x.owner === o.name);
    let expected = 0;
    for (const h of hashOf.values()) if (contains(o.ranges, h)) expected++;
    return { name: o.name, serving: o.serving, note: o.note, share: ratio(o.ranges), count: l?.ids.length ?? 0, expected, outside: l?.outside ?? 0, serverFiltered: l?.serverFiltered ?? false };
  });
  const servingRows = rows.filter((r) => r.serving);
  const sum = servingRows.reduce((n, r) => n + r.count, 0);
  const mean = servingRows.length === 0 ? 0 : sum / servingRows.length;
  const skew = mean === 0 ? 0 : Math.max(...servingRows.map((r) => r.count)) / mean;
  const cov = coverageOf(serving);
  let largestNamespaces: AuditReport["largestNamespaces"] = [];
  if (input.key === "namespace") {
    const byNs = new Map<string, number>();
    for (const o of input.full) byNs.set(o.namespace, (byNs.get(o.namespace) ?? 0) + 1);
    largestNamespaces = [...byNs.entries()]
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .slice(0, input.topNamespaces ?? 5)
      .map(([namespace, count]) => ({ namespace, count, owners: owners.filter((w) => contains(w.ranges, fnv1a64(namespace))).map((w) => w.name) }));
  }
  return {
    resource: input.resource,
    key: input.key,
    owners: input.owners.description,
    notes: input.owners.notes,
    resourceVersion: input.resourceVersion,
    total: input.full.length,
    sum,
    rows,
    missing: { count: missingCount, examples: missing },
    duplicated: { count: dupCount, examples: dups },
    churn,
    uncoveredKeyspace: cov.uncovered,
    doubledKeyspace: cov.doubled,
    skew,
    largestNamespaces,
    ok: missingCount === 0 && dupCount === 0,
  };
}

function pct(x: number): string {
  return `${(x * 100).toFixed(x > 0 && x < 0.001 ? 3 : 1)}%`;
}

function pad(rows: readonly (readonly string[])[]): string[] {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join("  ").trimEnd());
}

/** The audit in plain words, for a terminal. */
export function formatAudit(r: AuditReport): string {
  const out: string[] = [];
  out.push(`shardcar audit of ${r.resource} (keyed by ${r.key}) against ${r.owners}, at resourceVersion ${r.resourceVersion || "?"}`);
  for (const n of r.notes) out.push(`  note: ${n}`);
  out.push("");
  // The audit asks with shardSelector: this column says whether the server
  // applied it, not how the proxies ask (in labels mode they select by the
  // slot label, and the server filters that whatever its gate).
  const table: string[][] = [["owner", "keyspace", "objects", "expected", "shardSelector applied", "status"]];
  for (const row of r.rows) {
    table.push([
      row.name,
      pct(row.share),
      String(row.count),
      String(row.expected),
      row.serverFiltered ? "yes" : `no, ignored (${row.outside} dropped here)`,
      row.serving ? (row.note === undefined ? "serving" : `serving; ${row.note}`) : `NOT SERVING: ${row.note ?? ""}`,
    ]);
  }
  out.push(...pad(table));
  out.push("");
  out.push(`total ${r.total} objects (one full list); serving owners' lists add up to ${r.sum}${r.sum === r.total ? " — equal" : ` — ${r.sum < r.total ? "SHORT" : "OVER"} by ${Math.abs(r.total - r.sum)}`}`);
  if (r.missing.count === 0) out.push("missing: none — every object is served by a replica");
  else {
    out.push(`MISSING: ${r.missing.count} object${r.missing.count === 1 ? " is" : "s are"} served by no replica (a silent gap: no controller reconciles them)`);
    for (const m of r.missing.examples) out.push(`  ${m.id}  hash ${m.hash}${m.claimedBy.length === 0 ? "  (no owner's ranges contain it)" : `  (claimed by ${m.claimedBy.join(", ")}, not serving)`}`);
    if (r.missing.count > r.missing.examples.length) out.push(`  … and ${r.missing.count - r.missing.examples.length} more`);
  }
  if (r.duplicated.count === 0) out.push("duplicated: none — no object is served twice");
  else {
    out.push(`DUPLICATED: ${r.duplicated.count} object${r.duplicated.count === 1 ? " is" : "s are"} served by more than one replica (expected only during an overlap handoff)`);
    for (const d of r.duplicated.examples) out.push(`  ${d.id}  by ${d.owners.join(", ")}`);
  }
  if (r.churn > 0) out.push(`churn: ${r.churn} objects appeared in a range list but not in the full list (changed between the lists)`);
  out.push(`keyspace: ${pct(r.uncoveredKeyspace)} without a serving owner, ${pct(r.doubledKeyspace)} with two or more`);
  out.push(`skew: ${r.skew.toFixed(2)} (largest owner / mean over serving owners; 1.00 is perfectly even)`);
  if (r.largestNamespaces.length > 0) {
    out.push("largest namespaces (namespace keying puts each one wholly in one range):");
    for (const n of r.largestNamespaces) out.push(`  ${n.namespace || "(cluster-scoped)"}  ${n.count} objects  → ${n.owners.join(", ") || "nobody"}`);
  }
  out.push("");
  out.push(r.ok ? "OK: the sum equals the total; nothing missing, nothing duplicated." : `NOT OK: ${[r.missing.count > 0 ? `${r.missing.count} missing` : "", r.duplicated.count > 0 ? `${r.duplicated.count} duplicated` : ""].filter((s) => s !== "").join(", ")}.`);
  return out.join("\n") + "\n";
}
