/**
 * Prometheus metrics of the ring, registered on a Registry the caller owns.
 * Registration is idempotent per registry, so a coordinator or member that
 * is restarted in the same process (a lost and regained leadership, a test)
 * reuses its series instead of throwing "already registered".
 */
import { Counter, Gauge, Histogram, type Registry } from "../prom.ts";

type Labels = "namespace" | "ring";

function gauge<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Gauge<L> {
  const m = registry.getSingleMetric(name);
  return m instanceof Gauge ? m : new Gauge<L>({ name, help, labelNames, registers: [registry] });
}
function counter<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Counter<L> {
  const m = registry.getSingleMetric(name);
  return m instanceof Counter ? m : new Counter<L>({ name, help, labelNames, registers: [registry] });
}
function histogram<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[], buckets: number[]): Histogram<L> {
  const m = registry.getSingleMetric(name);
  return m instanceof Histogram ? m : new Histogram<L>({ name, help, labelNames, buckets, registers: [registry] });
}

// Handoffs take one relist (seconds) and are cut off by the handoff timeout
// (a minute by default); crashes take a lease duration plus a relist.
const SECONDS_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300];

export interface CoordinatorMetrics {
  readonly leader: Gauge;
  readonly coverage: Gauge<Labels>;
  readonly overlap: Gauge<Labels>;
  readonly members: Gauge<Labels>;
  readonly generation: Gauge<Labels>;
  readonly deferred: Gauge<Labels>;
  readonly handoff: Histogram<Labels | "outcome">;
  readonly crashUncovered: Histogram<Labels>;
  readonly exclusiveGap: Histogram<Labels>;
  readonly fences: Counter<Labels>;
  readonly refused: Counter<Labels | "reason">;
  readonly statusConflicts: Counter<Labels>;
}

export function coordinatorMetrics(registry: Registry): CoordinatorMetrics {
  const ring = ["namespace", "ring"] as const;
  return {
    leader: gauge(registry, "shardcar_manager_leader", "1 while this manager replica leads the rings, else 0.", []),
    coverage: gauge(registry, "shardcar_ring_coverage_ratio", "Share of the keyspace with at least one ready owner (leader's model from the table and the members' reports).", ring),
    overlap: gauge(registry, "shardcar_ring_overlap_ratio", "Share of the keyspace delivered by more than one member (an overlap handoff in flight).", ring),
    members: gauge(registry, "shardcar_ring_members", "Members whose Lease is live (ready or leaving).", ring),
    generation: gauge(registry, "shardcar_ring_generation", "Committed table generation.", ring),
    deferred: gauge(registry, "shardcar_ring_relist_budget_deferred_members", "Members due to gain slots that the ring's relist budget left out of the pending handoff; they follow in a later one.", ring),
    handoff: histogram(registry, "shardcar_ring_handoff_duration_seconds", "From publishing a pending generation to committing or abandoning it.", [...ring, "outcome"], SECONDS_BUCKETS),
    crashUncovered: histogram(registry, "shardcar_ring_crash_uncovered_seconds", "Per crashed member: from its last renewal until all its slots had a ready owner again. _sum is the total uncovered time caused by crashes.", ring, SECONDS_BUCKETS),
    exclusiveGap: histogram(registry, "shardcar_ring_exclusive_gap_seconds", "Per gaining member of an exclusive handoff: from the first old owner's report that it dropped the slots until the new owner listed them, the time those slots were in no cache. _sum is the total uncovered time exclusive handoffs cost.", ring, SECONDS_BUCKETS),
    fences: counter(registry, "shardcar_ring_fences_total", "Member Leases the leader took over.", ring),
    refused: counter(registry, "shardcar_ring_refused_total", "ShardRing specs or statuses refused (hand edits), by reason.", [...ring, "reason"]),
    statusConflicts: counter(registry, "shardcar_ring_status_conflicts_total", "ShardRing status writes that hit a 409 and were retried.", ring),
  };
}

export interface MemberMetrics {
  readonly owned: Gauge<"ring">;
  readonly generation: Gauge<"ring">;
  readonly leaseConflicts: Counter<"ring">;
  readonly selfFences: Counter<"ring">;
}

export function memberMetrics(registry: Registry): MemberMetrics {
  return {
    owned: gauge(registry, "shardcar_ring_member_owned_ratio", "Share of the keyspace this member's proxy enforces right now.", ["ring"]),
    generation: gauge(registry, "shardcar_ring_member_generation", "Generation of the ranges this member enforces.", ["ring"]),
    leaseConflicts: counter(registry, "shardcar_ring_member_lease_conflicts_total", "Lease renewals that hit a 409 and were retried against a fresh read.", ["ring"]),
    selfFences: counter(registry, "shardcar_ring_member_self_fences_total", "Times this member narrowed to nothing because it could not prove it still held its Lease.", ["ring"]),
  };
}
