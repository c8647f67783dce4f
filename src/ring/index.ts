/**
 * Ring mode: which replica owns which part of the hash keyspace, decided
 * with Kubernetes Leases and a `ShardRing` custom resource, and handed over
 * without gaps (overlap mode) or without duplicates (exclusive mode).
 *
 * Decision files, pure (no clock, no timers, no I/O; pinned by
 * test/ring/purity.test.ts):
 * - `state.ts`: the ordered {@link MemberState} of a member Lease;
 * - `times.ts`: {@link leaseTimes}, durations until a Lease's next transition;
 * - `table.ts`: the ShardRing spec and status tables, their codec and validation;
 * - `handoff.ts`: the leader's state machine {@link step} and the member's {@link follow};
 * - `label-slots.ts`: labels mode: which rings label which resources, and the slot each object must carry;
 * - `labelling.ts`: the labeller's state machine (backfill: what to PATCH, when, and what a failure means).
 *
 * Shell files, the only ones that touch the API (through `kube.ts`):
 * - `coordinator.ts`: {@link runCoordinator}, for `shardcar manager`: it
 *   wires the manager's election (`election.ts`) to one controller per ring
 *   on the leader (`ring-controller.ts`); its options in `coordinator-options.ts`;
 * - `member.ts`: {@link RingMember}, the proxy's `OwnershipSource` in ring mode;
 * - `labeller.ts`: the manager's ShardRing watch for the stamping webhook, and
 *   the labeller, a task the coordinator runs while it leads.
 *
 * Static modes (`i/N`, `ordinal/N`, a selector) never come here; they use
 * `StaticOwnership` with `staticRanges` from `src/shard/spec.ts`.
 *
 * The protocol, its invariants and the failure table are in docs/rings.md.
 *
 * @packageDocumentation
 */
export { runCoordinator, type CoordinatorOptions, type LeaderTask, type RingStatusExtra } from "./coordinator.ts";
export { Labeller, watchLabelSlotConfig, type LabelSlotSource, type LabellerOptions } from "./labeller.ts";
export { decodeLabelSpec, FilterMode, labelSlotConfig, type LabelSlotConfig, type LabelSlotRing, type SlotResource } from "./label-slots.ts";
export { RingMember, checkMemberTimings, DEFAULT_MEMBER_TIMINGS, type RingMemberOptions, type MemberTimings } from "./member.ts";
export { systemClock, type Clock } from "./clock.ts";
export { MemberState, memberState, isAssignable, isReleased, isServing, needsFence } from "./state.ts";
export { leaseTimes, type LeaseTimes, type LeaseView } from "./times.ts";
export { coverage, follow, initialState, nextWakeMs, Phase, step, tablesOf, type Effect, type HandoffPolicy, type MemberObservation, type RingEvent, type RingState } from "./handoff.ts";
export { decodeSpec, decodeTables, encodeTables, HandoffMode, PendingPhase, Refusal, type RingSpec, type RingTables, type ShardRingStatusJson } from "./table.ts";
export * from "./names.ts";
