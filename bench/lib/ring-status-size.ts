/**
 * How big a ShardRing gets with N members, without running N members: the
 * tables come from the leader's own arithmetic (`assignSlots`,
 * src/shard/table.ts) and the status from `composeStatus`, the function the
 * leader writes it with (src/ring/coordinator.ts). The whole object is what
 * etcd stores and limits (1.5 MiB by default, `--max-request-bytes`), so
 * metadata and spec are counted too, with a margin for what the apiserver
 * adds (managedFields, annotations).
 *
 * Pure: no clock, no I/O.
 */
import { composeStatus } from "../../src/ring/coordinator.ts";
import { initialState } from "../../src/ring/handoff.ts";
import { DEFAULT_SPEC, PendingPhase, type RingTables } from "../../src/ring/table.ts";
import { assignSlots, type SlotOwners } from "../../src/shard/table.ts";

/** etcd's default request limit, which bounds one stored object. */
export const ETCD_OBJECT_LIMIT = 1.5 * 1024 * 1024;

/** What the apiserver adds to a stored object beyond what the leader writes (managedFields, uid, timestamps): generous. */
export const METADATA_MARGIN = 4096;

export type Layout = "balanced" | "interleaved";

/**
 * Member names: `long` is the longest a member name may be (a DNS
 * subdomain, 253 characters); `typical` is a Deployment's pod name
 * (`<deployment>-<hash>-<suffix>`, 35 characters).
 */
export function memberName(i: number, names: "typical" | "long"): string {
  const base = names === "long" ? "m".repeat(240) : "widget-controller-7d9f8c6b5d";
  return `${base}-${String(i).padStart(names === "long" ? 12 : 6, "0")}`.slice(0, names === "long" ? 253 : 35);
}

/**
 * The owners of `slotCount` slots among `members`: `balanced` is what the
 * leader computes (contiguous runs); `interleaved` gives slot s to member
 * s mod N, the worst case for the slot strings (every slot its own run),
 * which no sequence of the leader's sticky assignments exceeds.
 */
export function layout(members: readonly string[], slotCount: number, how: Layout): SlotOwners {
  if (how === "balanced") return assignSlots(members, undefined, slotCount);
  return Array.from({ length: slotCount }, (_, s) => members[s % members.length]);
}

/**
 * Bytes of a whole ShardRing (apiVersion, kind, metadata with the longest
 * names, spec, and the status the leader writes) with `n` members, in the
 * middle of a handoff (a committed table and a pending one, the largest a
 * status gets), plus {@link METADATA_MARGIN}.
 */
export function ringObjectBytes(n: number, slotCount: number, names: "typical" | "long", how: Layout): number {
  const members = Array.from({ length: n }, (_, i) => memberName(i, names));
  const committed = layout(members, slotCount, how);
  // A join in flight: the pending table has one member more.
  const pending = how === "balanced" ? assignSlots([...members, memberName(n, names)], committed, slotCount) : layout([...members, memberName(n, names)], slotCount, how);
  const g = 1_000_000_000;
  const tables: RingTables = { generation: g + 2, committed: { generation: g, owners: committed }, pending: { generation: g + 2, owners: pending, phase: PendingPhase.Widening, startedAt: 0, deadline: 60_000 } };
  const state = initialState({ slotCount, policy: { timeoutMs: 60_000, backoffMs: 1000, maxBackoffMs: 60_000, relistBudget: DEFAULT_SPEC.relistBudget }, tables });
  // The longest condition message the leader writes is a refusal's; 1 KiB covers it.
  const condition = { type: "Valid", status: "False" as const, reason: "StatusOwnedByLeader", message: "x".repeat(1024), lastTransitionTime: new Date(0).toISOString() };
  const status = composeStatus(state, {}, [], condition);
  const object = {
    apiVersion: "shardcar.io/v1alpha1",
    kind: "ShardRing",
    metadata: { name: "r".repeat(63), namespace: "n".repeat(63), uid: "00000000-0000-0000-0000-000000000000", resourceVersion: "999999999999", generation: 999999, creationTimestamp: new Date(0).toISOString() },
    spec: { slots: slotCount, handoff: "overlap", handoffTimeoutSeconds: 60, relistBudget: 2, filter: "shardselector" },
    status,
  };
  return Buffer.byteLength(JSON.stringify(object)) + METADATA_MARGIN;
}

/**
 * The largest member count up to `maxN` whose ring fits under `limit`, and
 * the size at `maxN`. A table lists only members that own a slot, so from
 * N = slotCount on the size stops growing; `fitsAll` says the status fits
 * for every N.
 */
export function largestFitting(slotCount: number, names: "typical" | "long", how: Layout, maxN: number, limit = ETCD_OBJECT_LIMIT): { largest: number; fitsAll: boolean; bytesAtMax: number } {
  let lo = 0;
  let hi = maxN;
  if (ringObjectBytes(maxN, slotCount, names, how) <= limit) {
    // Beyond slotCount nothing grows: every N fits.
    return { largest: maxN, fitsAll: maxN >= slotCount, bytesAtMax: ringObjectBytes(maxN, slotCount, names, how) };
  }
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (ringObjectBytes(mid, slotCount, names, how) <= limit) lo = mid;
    else hi = mid - 1;
  }
  return { largest: lo, fitsAll: false, bytesAtMax: ringObjectBytes(maxN, slotCount, names, how) };
}
