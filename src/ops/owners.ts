/**
 * Who owns which ranges, as the audit and `--for-object` see it: N equal
 * static ranges, or a ring read from its ShardRing and its member Leases.
 * Pure: the shell passes in what it read and the current time.
 *
 * For a ring, each member's ranges are the slots its Lease says its proxy
 * enforces right now (`shardcar.io/slots`), not what the committed table
 * says it should: the audit is about what is actually served. A member whose
 * Lease has expired or was taken over serves nothing, whatever it claims.
 */
import type { Range } from "../shard/range.ts";
import { split, contains } from "../shard/range.ts";
import { slotsToRanges } from "../shard/table.ts";
import { FENCED_PREFIX, LEAVING_ANNOTATION, MEMBER_ANNOTATION, SLOTS_ANNOTATION } from "../ring/names.ts";
import { parseSlots } from "../ring/table.ts";
import { isRecord } from "../is-record.ts";

export interface Owner {
  /** `0/3` for static ranges; the member (pod) name in a ring. */
  readonly name: string;
  readonly ranges: readonly Range[];
  /** False for a ring member whose Lease expired or was fenced: it serves nothing. */
  readonly serving: boolean;
  /** Why it is not serving, or what is odd about it. */
  readonly note?: string | undefined;
}

export interface OwnerSet {
  /** e.g. `3 equal ranges` or `ring shop/web (generation 4)`. */
  readonly description: string;
  readonly owners: readonly Owner[];
  /** Ring-level observations (a handoff in progress, members missing a Lease). */
  readonly notes: readonly string[];
  /** Ring namespace, for reaching members' pods. */
  readonly namespace?: string | undefined;
}

export function staticOwners(n: number): OwnerSet {
  return { description: `${n} equal range${n === 1 ? "" : "s"}`, owners: split(n).map((r, i) => ({ name: `${i}/${n}`, ranges: [r], serving: true })), notes: [] };
}

/** A member Lease, as the shell read it. */
export interface MemberLease {
  readonly name: string;
  readonly annotations: Readonly<Record<string, string>>;
  readonly holder?: string | undefined;
  /** ms since the epoch. */
  readonly renewTime?: number | undefined;
  readonly leaseDurationSeconds?: number | undefined;
}

export interface RingRead {
  readonly namespace: string;
  readonly ring: string;
  /** `status` of the ShardRing (undefined when it has none yet). */
  readonly status: unknown;
  readonly leases: readonly MemberLease[];
}

interface CommittedTable {
  readonly generation: number;
  readonly slotCount: number;
  readonly members: ReadonlyMap<string, string>;
  readonly pending: number | undefined;
}

function committedOf(status: unknown): CommittedTable | undefined {
  if (!isRecord(status) || !isRecord(status["committed"])) return undefined;
  const c = status["committed"];
  const slotCount = typeof status["slotCount"] === "number" ? status["slotCount"] : 256;
  const members = new Map<string, string>();
  for (const m of Array.isArray(c["members"]) ? c["members"] : []) {
    if (isRecord(m) && typeof m["name"] === "string" && typeof m["slots"] === "string") members.set(m["name"], m["slots"]);
  }
  const pending = isRecord(status["pending"]) && typeof status["pending"]["generation"] === "number" ? status["pending"]["generation"] : undefined;
  return { generation: typeof c["generation"] === "number" ? c["generation"] : 0, slotCount, members, pending };
}

/**
 * The ring's owners from its Leases. Lease expiry is judged from the Lease's
 * own renewTime against `now`: a skewed clock on the member's node shifts it
 * by the skew (the leader, which must be exact, times renewals on its own clock).
 */
export function ringOwners(read: RingRead, now: number): OwnerSet {
  const table = committedOf(read.status);
  const notes: string[] = [];
  if (table === undefined) notes.push(`ShardRing ${read.namespace}/${read.ring} has no committed table yet: the manager has not run this ring`);
  const slotCount = table?.slotCount ?? 256;
  if (table?.pending !== undefined) notes.push(`generation ${table.pending} is pending: a handoff is in progress, so overlaps are expected until it commits`);
  const owners: Owner[] = [];
  const seen = new Set<string>();
  for (const l of [...read.leases].sort((a, b) => a.name.localeCompare(b.name))) {
    const member = l.annotations[MEMBER_ANNOTATION] ?? l.name;
    seen.add(member);
    const parsed = parseSlots(l.annotations[SLOTS_ANNOTATION] ?? "", slotCount);
    const ranges = parsed.ok ? slotsToRanges(parsed.value, slotCount) : [];
    const expiresAt = (l.renewTime ?? 0) + (l.leaseDurationSeconds ?? 0) * 1000;
    let serving = true;
    let note: string | undefined;
    if (!parsed.ok) {
      serving = false;
      note = `unreadable ${SLOTS_ANNOTATION}: ${parsed.message}`;
    } else if (l.holder === undefined || l.holder === "") {
      serving = false;
      note = "Lease released";
    } else if (l.holder.startsWith(FENCED_PREFIX)) {
      serving = false;
      note = `fenced (Lease taken over by the manager); it claimed slots ${l.annotations[SLOTS_ANNOTATION] ?? ""}`;
    } else if (expiresAt <= now) {
      serving = false;
      note = `Lease expired ${((now - expiresAt) / 1000).toFixed(1)} s ago (frozen, crashed or cut off); it claimed slots ${l.annotations[SLOTS_ANNOTATION] ?? ""}`;
    } else if (table !== undefined) {
      const want = table.members.get(member) ?? "";
      const got = l.annotations[SLOTS_ANNOTATION] ?? "";
      if (want !== got) note = `enforces slots ${got === "" ? "(none)" : got}; the committed table (generation ${table.generation}) gives it ${want === "" ? "none" : want}`;
    }
    if (l.annotations[LEAVING_ANNOTATION] === "true") note = `${note === undefined ? "" : `${note}; `}leaving`;
    owners.push({ name: member, ranges, serving, note });
  }
  for (const name of table?.members.keys() ?? []) {
    if (!seen.has(name)) notes.push(`member ${name} is in the committed table but has no Lease: its slots are served by nobody until the manager reassigns them`);
  }
  return {
    description: `ring ${read.namespace}/${read.ring}${table === undefined ? "" : ` (committed generation ${table.generation}, ${slotCount} slots)`}`,
    owners,
    notes,
    namespace: read.namespace,
  };
}

/** The member the committed table gives `hash` to, and the table's generation; undefined without a table. */
export function committedOwnerOf(status: unknown, hash: bigint): { member: string | undefined; generation: number } | undefined {
  const table = committedOf(status);
  if (table === undefined) return undefined;
  for (const [member, slots] of table.members) {
    const parsed = parseSlots(slots, table.slotCount);
    if (parsed.ok && contains(slotsToRanges(parsed.value, table.slotCount), hash)) return { member, generation: table.generation };
  }
  return { member: undefined, generation: table.generation };
}

/** Owners whose ranges contain `hash` (several during an overlap handoff, none in a gap). */
export function ownersOf(set: OwnerSet, hash: bigint): Owner[] {
  return set.owners.filter((o) => contains(o.ranges, hash));
}
