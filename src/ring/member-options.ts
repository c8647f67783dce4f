/**
 * A ring member's options, and its Lease timings with the order they must
 * keep. Apart from member.ts, which re-exports them, so the class stays one
 * job: holding the Lease and following the ring.
 */
import { ConfigError } from "../errors.ts";
import type { RingApiAccess } from "./kube.ts";
import type { RingShellOptions } from "./shell-options.ts";
import type { HandoffMode } from "./table.ts";

export interface MemberTimings {
  /** Written to the Lease; the leader treats the member as expired this long after its last renewal. */
  readonly leaseDurationSeconds: number;
  /** Without a successful renewal for this long, the member fences itself (enforces nothing). Must be below the lease duration. */
  readonly renewDeadlineMs: number;
  /** Time between renewals. Must be below the renew deadline, so a failed renewal can be retried before it. */
  readonly retryPeriodMs: number;
}

// client-go's leader-election defaults (15 s / 10 s / 2 s): tolerant of a
// slow API server, and a crash costs at most ~15 s plus one relist.
export const DEFAULT_MEMBER_TIMINGS: MemberTimings = Object.freeze({ leaseDurationSeconds: 15, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });

/** Throws {@link ConfigError} unless retry period < renew deadline < lease duration. */
export function checkMemberTimings(t: MemberTimings): void {
  if (!Number.isInteger(t.leaseDurationSeconds) || t.leaseDurationSeconds < 1) {
    throw new ConfigError("--lease-duration", `lease duration must be a whole number of seconds ≥ 1 (Lease.spec.leaseDurationSeconds is an integer), got ${t.leaseDurationSeconds}`);
  }
  if (!(t.renewDeadlineMs > 0 && t.renewDeadlineMs < t.leaseDurationSeconds * 1000)) {
    throw new ConfigError("--renew-deadline", `renew deadline (${t.renewDeadlineMs} ms) must be positive and below the lease duration (${t.leaseDurationSeconds} s): a member must fence itself before the leader may take its Lease over`);
  }
  if (!(t.retryPeriodMs > 0 && t.retryPeriodMs < t.renewDeadlineMs)) {
    throw new ConfigError("--retry-period", `retry period (${t.retryPeriodMs} ms) must be positive and below the renew deadline (${t.renewDeadlineMs} ms)`);
  }
}

/**
 * `client`: the sidecar's own (its identity, never the controller's), what
 * `shardcar proxy` passes, so a sidecar never loads client-node for its ring.
 */
export interface RingMemberOptions extends RingApiAccess, RingShellOptions {
  /** The pod's namespace: the Lease and the ShardRing live there. */
  readonly namespace: string;
  /** The ring's name (`shardcar.io/ring`, default the owning workload). */
  readonly ring: string;
  /** The member's name: the pod name. Stable across container restarts. */
  readonly member: string;
  /** The pod's `shardcar.io/handoff`, written on the Lease as a hint for a ring the leader has yet to create. */
  readonly mode?: HandoffMode | undefined;
  readonly timings?: Partial<MemberTimings> | undefined;
  /** How long {@link RingMember.leave} waits for the table to drop this member before it leaves anyway. Default 2 min. */
  readonly leaveTimeoutMs?: number | undefined;
}
