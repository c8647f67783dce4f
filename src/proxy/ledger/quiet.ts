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
 * The time at which owed lineage `lineage` is released, or undefined while
 * it is busy (the event that ends its request decides again).
 */
export function releaseAt(owed: Owed, lineage: LineageRecord | undefined, busy: Busy | undefined, p: LedgerPolicy): number | undefined {
  // Evicted, or it never reached upstream (its held requests went away):
  // nothing is known of it, so the longer bound, from when it became owed.
  if (lineage === undefined) return owed.since + p.watcherQuietMs;
  // Relisting or watching now: not quiet.
  if (isBusy(busy)) return undefined;
  // Never watched: an informer before its first WATCH (which follows its
  // LIST at once) or a one-off lister, which may list again and again and
  // never be quiet for long: a fixed bound from when it became owed.
  if (!lineage.watched) return owed.since + p.betweenListAndWatchMs;
  // A reflector: it may wait up to a minute before it comes back (client-go
  // backs off up to 30 s, jittered to 60 s, after a 410; client-node waits
  // up to 30 s between its re-LIST and re-WATCH). Quiet that long, or owed
  // twice that long and quiet now (it keeps coming back and never relists).
  return Math.min(lineage.lastUsed + p.watcherQuietMs, owed.since + 2 * p.watcherQuietMs);
}
