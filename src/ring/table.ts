/**
 * The ShardRing resource as data: its spec, the committed and pending slot
 * tables in its status, and the codec between those and the JSON on the
 * wire. Decoding validates everything a hand edit could break and returns a
 * reason instead of throwing, so the leader can refuse the edit in a status
 * condition and a member can keep its last good table.
 *
 * Pure: no clock, no I/O. Timestamps are parsed, never read.
 */
import type { Handoff } from "../settings/pod-settings.ts";
import { DEFAULT_SLOT_COUNT, MAX_SLOT_COUNT, slotsOf, type SlotOwners } from "../shard/table.ts";
import { isRecord } from "../is-record.ts";

/** The pod setting `handoff` (src/settings/), by name, as the ShardRing's `spec.handoff` spells it. */
export const HandoffMode = { Overlap: "overlap", Exclusive: "exclusive" } as const satisfies Record<string, Handoff>;
export type HandoffMode = Handoff;

/**
 * What a pending table asks of the members: `Widening` (overlap: gainers add
 * the new slots to the old ones) or `Narrowing` (exclusive: losers drop the
 * slots they lose, nobody adds any yet).
 */
export const PendingPhase = { Widening: "Widening", Narrowing: "Narrowing" } as const;
export type PendingPhase = (typeof PendingPhase)[keyof typeof PendingPhase];

/** Stable reasons for refusing a ShardRing; they appear as condition reasons and Event reasons. */
export const Refusal = {
  SpecInvalid: "SpecInvalid",
  SlotCountChanged: "SlotCountChanged",
  Malformed: "MalformedTable",
  SlotOutOfRange: "SlotOutOfRange",
  SlotOwnedTwice: "SlotOwnedTwice",
  SlotUnowned: "SlotUnowned",
  GenerationOrder: "GenerationOrder",
  /** A valid status the leader did not write: tables change only through a handoff. */
  NotWrittenByLeader: "StatusOwnedByLeader",
} as const;
export type Refusal = (typeof Refusal)[keyof typeof Refusal];

export type Decoded<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly reason: Refusal; readonly message: string };

export interface RingSpec {
  /** Number of equal slots the keyspace is cut into. Fixed once a table exists. */
  readonly slotCount: number;
  readonly mode: HandoffMode;
  /** How long gainers (overlap) or losers (exclusive) have to report ready before the generation is abandoned. */
  readonly handoffTimeoutMs: number;
  /**
   * The keyspace the gaining members of one graceful handoff may relist
   * between them, in whole keyspaces (1: one full list, what one unsharded
   * replica lists when it starts); the rest of a rebalance follows in later
   * handoffs. Slots of a member that stopped serving, and those of an empty
   * table, are exempt.
   */
  readonly relistBudget: number;
}

// Long enough for a controller with tens of thousands of objects to relist
// under a relist budget; short enough that a stuck member does not hold
// rebalancing up for more than a minute.
export const DEFAULT_HANDOFF_TIMEOUT_MS = 60_000;
// One keyspace: a rebalance never has the ring list more at once than one
// unsharded replica does when it starts, however many members share it. A
// gainer relists its whole share, so at 64 members one keyspace is about 64
// gainers' relists, at 4 members about 4.
export const DEFAULT_RELIST_BUDGET = 1;
/** The most a spec may ask for: beyond it the budget never binds. */
export const MAX_RELIST_BUDGET = 64;
export const DEFAULT_SPEC: RingSpec = Object.freeze({
  slotCount: DEFAULT_SLOT_COUNT,
  mode: HandoffMode.Overlap,
  handoffTimeoutMs: DEFAULT_HANDOFF_TIMEOUT_MS,
  relistBudget: DEFAULT_RELIST_BUDGET,
});

export interface Table {
  readonly generation: number;
  readonly owners: SlotOwners;
}

export interface PendingTable extends Table {
  readonly phase: PendingPhase;
  /** ms since the epoch. */
  readonly startedAt: number;
  /** ms since the epoch; after it, the leader abandons this generation. */
  readonly deadline: number;
}

export interface RingTables {
  /**
   * The newest generation ever published, committed, pending or abandoned.
   * Persisted so that a new leader never reuses an abandoned generation: a
   * member's report for the old one would count for the new one.
   */
  readonly generation: number;
  readonly committed: Table;
  readonly pending: PendingTable | undefined;
}

/**
 * The generation of a handoff's intermediate step (held ∪ new while
 * widening, held ∩ new while narrowing): reserved one below the pending
 * table's. Every handoff spends two generations, so every range set a member
 * enforces has a generation of its own and the generation only ever grows.
 */
export function stepGeneration(pending: PendingTable): number {
  return pending.generation - 1;
}

// ---------------------------------------------------------------------------
// Wire shapes (the CRD's status schema)

export interface TableMemberJson {
  name: string;
  /** `"0-63,70,72-80"`: ascending, merged runs of slot indices. */
  slots: string;
}
export interface TableJson {
  generation: number;
  members: TableMemberJson[];
}
export interface PendingJson extends TableJson {
  phase: PendingPhase;
  startedAt: string;
  deadline: string;
}
export interface RingCondition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  lastTransitionTime: string;
}
export interface ShardRingStatusJson {
  /** The newest generation published, committed or pending. */
  generation: number;
  slotCount: number;
  committed: TableJson;
  pending?: PendingJson;
  /** Members owning slots in the committed table. */
  members: number;
  coverage: { readyRatio: number; overlapRatio: number };
  conditions: RingCondition[];
}

/** Ascending merged runs: `[0,1,2,5]` → `"0-2,5"`. */
export function formatSlots(slots: readonly number[]): string {
  const sorted = [...new Set(slots)].sort((a, b) => a - b);
  const parts: string[] = [];
  let i = 0;
  while (i < sorted.length) {
    const start = sorted[i] as number;
    let end = start;
    while (sorted[i + 1] === end + 1) end = sorted[++i] as number;
    parts.push(start === end ? String(start) : `${start}-${end}`);
    i++;
  }
  return parts.join(",");
}

const SLOT_RUN = /^(\d{1,5})(?:-(\d{1,5}))?$/;

/** Parses {@link formatSlots}' output; refuses anything else (fails closed on hand edits). */
export function parseSlots(text: string, slotCount: number): Decoded<number[]> {
  if (text === "") return { ok: true, value: [] };
  const out: number[] = [];
  for (const part of text.split(",")) {
    const m = SLOT_RUN.exec(part.trim());
    if (!m) return { ok: false, reason: Refusal.Malformed, message: `slots ${JSON.stringify(text)}: ${JSON.stringify(part)} is not N or N-M` };
    const a = Number(m[1]);
    const b = m[2] === undefined ? a : Number(m[2]);
    if (b < a) return { ok: false, reason: Refusal.Malformed, message: `slots ${JSON.stringify(text)}: run ${part} is descending` };
    if (b >= slotCount) return { ok: false, reason: Refusal.SlotOutOfRange, message: `slot ${b} is outside [0, ${slotCount})` };
    for (let s = a; s <= b; s++) out.push(s);
  }
  return { ok: true, value: out };
}

const MEMBER_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** Spec with defaults for absent fields; refuses present fields with bad values. */
export function decodeSpec(spec: unknown): Decoded<RingSpec> {
  if (spec === undefined || spec === null) return { ok: true, value: DEFAULT_SPEC };
  if (!isRecord(spec)) return { ok: false, reason: Refusal.SpecInvalid, message: "spec must be an object" };
  const slots = spec["slots"] ?? DEFAULT_SPEC.slotCount;
  if (typeof slots !== "number" || !Number.isInteger(slots) || slots < 1 || slots > MAX_SLOT_COUNT) {
    return { ok: false, reason: Refusal.SpecInvalid, message: `spec.slots must be an integer between 1 and ${MAX_SLOT_COUNT}, got ${JSON.stringify(slots)}` };
  }
  const mode = spec["handoff"] ?? DEFAULT_SPEC.mode;
  if (mode !== HandoffMode.Overlap && mode !== HandoffMode.Exclusive) {
    return { ok: false, reason: Refusal.SpecInvalid, message: `spec.handoff must be "overlap" or "exclusive", got ${JSON.stringify(mode)}` };
  }
  const timeout = spec["handoffTimeoutSeconds"] ?? DEFAULT_SPEC.handoffTimeoutMs / 1000;
  if (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout <= 0 || timeout > 86_400) {
    return { ok: false, reason: Refusal.SpecInvalid, message: `spec.handoffTimeoutSeconds must be a number in (0, 86400], got ${JSON.stringify(timeout)}` };
  }
  const budget = spec["relistBudget"] ?? DEFAULT_SPEC.relistBudget;
  if (typeof budget !== "number" || !Number.isFinite(budget) || budget <= 0 || budget > MAX_RELIST_BUDGET) {
    return { ok: false, reason: Refusal.SpecInvalid, message: `spec.relistBudget must be a number in (0, ${MAX_RELIST_BUDGET}] (keyspaces the gaining members may relist at once per handoff; 1 is one full list), got ${JSON.stringify(budget)}` };
  }
  return { ok: true, value: { slotCount: slots, mode, handoffTimeoutMs: timeout * 1000, relistBudget: budget } };
}

function decodeTable(raw: unknown, slotCount: number, where: string): Decoded<Table> {
  if (!isRecord(raw)) return { ok: false, reason: Refusal.Malformed, message: `${where} must be an object` };
  const generation = raw["generation"];
  if (typeof generation !== "number" || !Number.isSafeInteger(generation) || generation < 0) {
    return { ok: false, reason: Refusal.Malformed, message: `${where}.generation must be a non-negative integer, got ${JSON.stringify(generation)}` };
  }
  const members = raw["members"] ?? [];
  if (!Array.isArray(members)) return { ok: false, reason: Refusal.Malformed, message: `${where}.members must be a list` };
  const owners: (string | undefined)[] = Array.from({ length: slotCount }, () => undefined);
  const seen = new Set<string>();
  for (const m of members as unknown[]) {
    if (!isRecord(m) || typeof m["name"] !== "string" || typeof m["slots"] !== "string") {
      return { ok: false, reason: Refusal.Malformed, message: `${where}.members: every entry needs a string name and string slots` };
    }
    const name = m["name"];
    if (!MEMBER_NAME.test(name)) return { ok: false, reason: Refusal.Malformed, message: `${where}: member name ${JSON.stringify(name)} is not a DNS subdomain` };
    if (seen.has(name)) return { ok: false, reason: Refusal.Malformed, message: `${where}: member ${name} is listed twice` };
    seen.add(name);
    const slots = parseSlots(m["slots"], slotCount);
    if (!slots.ok) return { ok: false, reason: slots.reason, message: `${where} member ${name}: ${slots.message}` };
    for (const s of slots.value) {
      const prev = owners[s];
      if (prev !== undefined && prev !== name) return { ok: false, reason: Refusal.SlotOwnedTwice, message: `${where}: slot ${s} is owned by both ${prev} and ${name}` };
      owners[s] = name;
    }
  }
  // A table with members must cover everything: a slot without an owner is
  // an object no controller reconciles. Only an empty ring owns nothing.
  if (seen.size > 0) {
    const hole = owners.indexOf(undefined);
    if (hole >= 0) return { ok: false, reason: Refusal.SlotUnowned, message: `${where}: slot ${hole} has no owner (of ${owners.filter((o) => o === undefined).length} unowned)` };
  }
  return { ok: true, value: { generation, owners } };
}

function decodeTime(raw: unknown, where: string): Decoded<number> {
  const t = typeof raw === "string" ? Date.parse(raw) : Number.NaN;
  if (Number.isNaN(t)) return { ok: false, reason: Refusal.Malformed, message: `${where} must be an RFC 3339 time, got ${JSON.stringify(raw)}` };
  return { ok: true, value: t };
}

/**
 * The committed and pending tables of a ShardRing status. `undefined` when
 * the status has no committed table yet (a new ring). Refuses a status whose
 * slot count differs from the spec's, any table with a doubly owned or
 * unowned slot, and a pending generation not above the committed one.
 */
export function decodeTables(status: unknown, slotCount: number): Decoded<RingTables | undefined> {
  if (status === undefined || status === null) return { ok: true, value: undefined };
  if (!isRecord(status)) return { ok: false, reason: Refusal.Malformed, message: "status must be an object" };
  if (status["committed"] === undefined) {
    if (status["pending"] !== undefined) return { ok: false, reason: Refusal.Malformed, message: "status.pending without status.committed" };
    return { ok: true, value: undefined };
  }
  const sc = status["slotCount"];
  if (sc !== undefined && sc !== slotCount) {
    return { ok: false, reason: Refusal.SlotCountChanged, message: `status.slotCount is ${JSON.stringify(sc)} but spec.slots is ${slotCount}; the slot count cannot change once a table exists` };
  }
  const committed = decodeTable(status["committed"], slotCount, "status.committed");
  if (!committed.ok) return committed;
  const rawGen = status["generation"] ?? 0;
  if (typeof rawGen !== "number" || !Number.isSafeInteger(rawGen) || rawGen < 0) {
    return { ok: false, reason: Refusal.Malformed, message: `status.generation must be a non-negative integer, got ${JSON.stringify(rawGen)}` };
  }
  const rawPending = status["pending"];
  if (rawPending === undefined || rawPending === null) {
    return { ok: true, value: { generation: Math.max(rawGen, committed.value.generation), committed: committed.value, pending: undefined } };
  }
  const table = decodeTable(rawPending, slotCount, "status.pending");
  if (!table.ok) return table;
  if (!isRecord(rawPending)) return { ok: false, reason: Refusal.Malformed, message: "status.pending must be an object" };
  const phase = rawPending["phase"];
  if (phase !== PendingPhase.Widening && phase !== PendingPhase.Narrowing) {
    return { ok: false, reason: Refusal.Malformed, message: `status.pending.phase must be Widening or Narrowing, got ${JSON.stringify(phase)}` };
  }
  // The generation below the pending one is reserved for its intermediate step.
  const floor = committed.value.generation + 2;
  if (table.value.generation < floor) {
    return { ok: false, reason: Refusal.GenerationOrder, message: `status.pending.generation ${table.value.generation} must be at least ${floor} (committed is ${committed.value.generation}; the generation in between is its step)` };
  }
  const startedAt = decodeTime(rawPending["startedAt"], "status.pending.startedAt");
  if (!startedAt.ok) return startedAt;
  const deadline = decodeTime(rawPending["deadline"], "status.pending.deadline");
  if (!deadline.ok) return deadline;
  const pending: PendingTable = { ...table.value, phase, startedAt: startedAt.value, deadline: deadline.value };
  return { ok: true, value: { generation: Math.max(rawGen, pending.generation), committed: committed.value, pending } };
}

function encodeTable(t: Table): TableJson {
  const names = [...new Set(t.owners.filter((o): o is string => o !== undefined))].sort();
  return { generation: t.generation, members: names.map((name) => ({ name, slots: formatSlots(slotsOf(t.owners, name)) })) };
}

/** The `committed`, `pending` and `generation` fields of the status. */
export function encodeTables(t: RingTables): Pick<ShardRingStatusJson, "committed" | "pending" | "generation" | "members"> {
  const committed = encodeTable(t.committed);
  const out: Pick<ShardRingStatusJson, "committed" | "pending" | "generation" | "members"> = {
    generation: Math.max(t.generation, t.committed.generation, t.pending?.generation ?? 0),
    committed,
    members: committed.members.length,
  };
  if (t.pending !== undefined) {
    out.pending = {
      ...encodeTable(t.pending),
      phase: t.pending.phase,
      startedAt: new Date(t.pending.startedAt).toISOString(),
      deadline: new Date(t.pending.deadline).toISOString(),
    };
  }
  return out;
}

/** Same committed and pending tables (generations, owners, phase, deadline). */
export function sameTables(a: RingTables | undefined, b: RingTables | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return JSON.stringify(encodeTables(a)) === JSON.stringify(encodeTables(b));
}
