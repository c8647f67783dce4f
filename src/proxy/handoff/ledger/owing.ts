/**
 * I4, who owes a relist at a range change, and I2, which resumes are
 * refused: each decided by one function, which says why. Pure.
 */
import { difference, type Range } from "../../../shard/range.ts";
import { quietBoundMs } from "./quiet.ts";
import type { Busy } from "./records.ts";
import { consume } from "./resume.ts";
import type { LedgerPolicy, LineageRecord } from "./types.ts";

/** An epoch older than any: the cache a resume continues may be of ranges already left. */
const STALE = -1;

/**
 * I4: why lineage `l` owes a relist (or its deferred narrowing) when the
 * ranges change to epoch `epoch`, or undefined. Its open watches add their
 * own obligation when they end rather than narrow (ledger.ts,
 * `changeRanges`); this is every other way a cache of it may hold the old
 * ranges.
 */
export function whyOwes(l: LineageRecord, b: Busy | undefined, now: number, p: LedgerPolicy, epoch: number): string | undefined {
  // A reflector, or an informer still reading a LIST of the ranges being
  // left, may stay away a minute (quiet.ts); a one-off lister not.
  const recent = now - l.lastUsed < quietBoundMs(l, epoch, p);
  // A WATCH in flight was sent under the old ranges: it will get 410
  // (`onWatchResponse`) and its cache relist, whatever the lineage's open
  // watches do (one may be the watch its client just abandoned for it).
  if ((b?.sentWatches ?? 0) > 0) return "a WATCH of it is in flight under the old ranges";
  // A cache this proxy told to relist (a refused resume, a 410) has not
  // relisted yet: it is relisting, or backing off before it does.
  if (l.told && recent) return "a cache of it was told to relist and has not yet";
  // A live watch open: a LIST in flight may be a one-off next to the
  // informer's watch, so that watch's fate decides (ended: it owes;
  // narrowed: its cache is current). Not a watch already ending: its 410
  // is on its way, and its cache will relist.
  if ((b?.open ?? 0) - (b?.ending ?? 0) > 0) return undefined;
  if ((b?.sent ?? 0) > 0) return "a LIST of it is in flight under the old ranges";
  // Nothing open: between its LIST and its WATCH (its resume will get 410),
  // or relisting after a refused resume or a cut LIST, whatever epoch its
  // cache is of. A one-off lister looks the same and never comes back, so
  // only within its quiet bound.
  if (recent) return "nothing of it is open, and it was used within its quiet bound";
  return undefined;
}

export interface Placement {
  /** The lineage with the resume's point used up (and the once-per-lineage refusal spent). */
  readonly lineage: LineageRecord;
  /** The point the resume continues, if placed. */
  readonly point: number | undefined;
  /** Why it must relist instead (answer 410), or undefined to send it. */
  readonly refuse: string | undefined;
  /** Sent to be narrowed once served: its cache is of this older epoch (`LineageRecord.narrowOnResume`). */
  readonly narrowFrom: number | undefined;
}

/**
 * I2: which cache a WATCH resuming from `rv` continues, and whether it may:
 * a cache built under an older epoch than `epoch` may not (it would keep
 * objects it no longer owns, or miss ones it gained), unless its lineage
 * deferred a narrowing to it and `ranges` lie inside that cache's (I3: it
 * is narrowed once served); in ring mode, no cache this proxy cannot place
 * may.
 */
export function placeResume(
  l: LineageRecord,
  rv: string,
  o: {
    readonly epoch: number;
    /** The ranges enforced now. */
    readonly ranges: readonly Range[];
    readonly ring: boolean;
    /** Every unplaceable resume is refused (the restart window). */
    readonly inWindow: boolean;
    /** A watch of the lineage is being ended (its 410 may not have reached its client yet). */
    readonly ending: boolean;
  },
): Placement {
  // With no point at `rv` it continues one of the lineage's streams (a
  // re-watch racing the end of the one before): the lineage's epoch, unless
  // a watch of it is being ended, whose cache may be this one, aborting
  // before its 410 arrived.
  const c = consume(l.book, rv, o.ending ? STALE : l.listEpoch);
  let lineage: LineageRecord = { ...l, book: c.book };
  // Ring mode: a resume this proxy cannot place (its cache was built
  // through another proxy process; the ranges may have moved meanwhile).
  // Every one inside the restart window, even where the lineage relisted
  // since (another cache of it may not have); after it, once per lineage,
  // so a client that never lists (a GET, then a WATCH) is not refused
  // forever.
  const unplaced = o.ring && (o.inWindow ? c.point === undefined : c.epoch === undefined && !l.unplacedRefused);
  if (unplaced) lineage = { ...lineage, unplacedRefused: true };
  const stale = c.epoch !== undefined && c.epoch < o.epoch;
  const d = l.narrowOnResume;
  // Only the cache the narrowing was deferred for, and only to ranges it holds.
  const narrowFrom = !unplaced && stale && d !== undefined && c.epoch === d.epoch && l.listEpoch === d.epoch && difference(o.ranges, d.ranges).length === 0 ? d.epoch : undefined;
  const refuse = unplaced ? "this proxy did not serve the cache it continues" : stale && narrowFrom === undefined ? "its cache is of older ranges" : undefined;
  return { lineage, point: c.point?.id, refuse, narrowFrom };
}
