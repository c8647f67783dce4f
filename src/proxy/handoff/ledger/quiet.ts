/**
 * When an owed lineage whose client went quiet is let go (docs/rings.md,
 * "What the proxy must do"). A controller that is relisting is never quiet
 * for long: its LIST is in flight, then its watch opens. A one-off LIST, a
 * `kubectl get -w` that exits on its 410, or a stopped informer never comes
 * back, and must not hold the ring up for good. Pure.
 */
import { isBusy, type Busy } from "./records.ts";
import type { LedgerPolicy, LineageRecord, Owed } from "./types.ts";

/**
 * Whether lineage `l`, quiet now, may still be a cache that comes back
 * late under epoch `epoch`: a reflector, or a lineage whose newest cache is
 * of older ranges (an informer may still be reading that LIST: client-node
 * parses a 5,000-pod list for seconds on a loaded machine, then resumes
 * from it). Otherwise a one-off lister, or an informer whose cache is
 * already of these ranges and whose WATCH follows at once.
 */
export function mayComeBackLate(l: LineageRecord, epoch: number): boolean {
  return l.watched || (l.listEpoch !== undefined && l.listEpoch < epoch);
}

/** How long lineage `l` may be quiet under epoch `epoch` and still count as coming back. */
export function quietBoundMs(l: LineageRecord, epoch: number, p: LedgerPolicy): number {
  return mayComeBackLate(l, epoch) ? p.watcherQuietMs : p.betweenListAndWatchMs;
}

/**
 * The time at which owed lineage `lineage` is released under epoch `epoch`,
 * or undefined while it is busy (the event that ends its request decides
 * again).
 */
export function releaseAt(owed: Owed, lineage: LineageRecord | undefined, busy: Busy | undefined, p: LedgerPolicy, epoch: number): number | undefined {
  // Evicted, or it never reached upstream (its held requests went away):
  // nothing is known of it, so the longer bound, from when it became owed.
  if (lineage === undefined) return owed.since + p.watcherQuietMs;
  // Relisting or watching now: not quiet.
  if (isBusy(busy)) return undefined;
  // A one-off lister, which may list again and again and never be quiet
  // for long, or an informer whose cache is current and whose WATCH
  // follows: a fixed bound from when it became owed.
  if (!mayComeBackLate(lineage, epoch)) return owed.since + p.betweenListAndWatchMs;
  // A reflector, or an informer that may still be reading an old LIST: it
  // may take up to a minute to come back (client-go backs off up to 30 s,
  // jittered to 60 s, after a 410; client-node waits up to 30 s between its
  // re-LIST and re-WATCH). Quiet that long, or owed twice that long and
  // quiet now (it keeps coming back and never relists).
  return Math.min(lineage.lastUsed + p.watcherQuietMs, owed.since + 2 * p.watcherQuietMs);
}
