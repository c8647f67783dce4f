/**
 * When a member Lease will next change state. The leader uses these
 * durations directly as timer delays, so it wakes exactly when a member
 * expires or becomes fair game for fencing.
 *
 * Pure: the current time is a parameter; no clock, no timers, no I/O.
 */

/** The parts of a member Lease that its state depends on. */
export interface LeaseView {
  /** `spec.holderIdentity`; `undefined` or `""` once released. */
  readonly holder: string | undefined;
  /**
   * When the holder last renewed, in ms. The leader passes the time on *its*
   * clock at which it observed the renewal, not `spec.renewTime`, so clock
   * skew between nodes cannot make a live member look dead (as client-go's
   * leader election does).
   */
  readonly renewedAt: number | undefined;
  /** `spec.leaseDurationSeconds` in ms. */
  readonly durationMs: number | undefined;
  /** The member asked to be drained. */
  readonly leaving: boolean;
}

export interface LeaseTimes {
  /** ms until the Lease expires; ≤ 0 when it already has. */
  readonly toExpired: number;
  /** ms until the leader may fence the holder; ≤ 0 when it already may. */
  readonly toDead: number;
}

/**
 * Durations until the Lease expires and until its holder counts as dead.
 * `undefined` when the Lease lacks a renew time or a positive duration: such
 * a Lease proves nothing and the caller must fail closed.
 *
 * The takeover delay is never shorter than the Lease's duration: the member
 * fences itself at its renew deadline (< duration), so the leader must not
 * reassign before the member has had time to stop.
 */
export function leaseTimes(lease: LeaseView, now: number, takeoverDelayMs = 0): LeaseTimes | undefined {
  const { renewedAt, durationMs } = lease;
  if (renewedAt === undefined || !Number.isFinite(renewedAt)) return undefined;
  if (durationMs === undefined || !Number.isFinite(durationMs) || durationMs <= 0) return undefined;
  const takeover = Math.max(durationMs, Number.isFinite(takeoverDelayMs) ? takeoverDelayMs : 0);
  return { toExpired: renewedAt + durationMs - now, toDead: renewedAt + takeover - now };
}
