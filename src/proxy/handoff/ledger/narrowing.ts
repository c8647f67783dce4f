/**
 * Which open watches may narrow in place at a range change, and which must
 * end with 410 instead (docs/rings.md, "Narrowing without a relist"). Pure.
 */
import { difference, type Range } from "../../../shard/range.ts";
import type { ReadMap } from "./pmap.ts";
import { isBusy, type Busy } from "./records.ts";
import type { LineageKey, LineageRecord, NarrowFacts, OpenWatch } from "./types.ts";

export interface NarrowingPlan {
  /** Per lineage, every one of its open watches: narrow them all. */
  readonly narrow: ReadonlyMap<LineageKey, readonly OpenWatch[]>;
  /** Watches that end with 410; their lineages relist. */
  readonly end: readonly OpenWatch[];
  /** Why each lineage in `end` relists instead, for the debug log. */
  readonly why: ReadonlyMap<LineageKey, string>;
}

export interface NarrowingContext {
  readonly syntheticDeletes: boolean;
  /** The new ranges, and the epoch they replace. */
  readonly ranges: readonly Range[];
  readonly prevEpoch: number;
  readonly facts: NarrowFacts;
  readonly lineages: ReadMap<LineageKey, LineageRecord>;
  /** Open watches of a lineage, doomed ones included (derived from the request records). */
  readonly openWatches: (lineage: LineageKey) => number;
}

/**
 * Why `watches` (all the not-doomed open watches of one lineage) cannot
 * narrow to `ctx.ranges` in place, or undefined when they all can. Each
 * condition keeps the index-backed DELETEDs exact for every cache involved:
 * - the lineage's index is trusted (a complete snapshot went through this
 *   proxy, the kind is known): otherwise a cache may hold objects the index
 *   never saw, which no DELETED would remove;
 * - its cache is of the previous epoch: a cache built under older ranges
 *   than the ones being left is missing objects, not only holding extra;
 * - every open watch of the lineage narrows with it: one that is ending
 *   already will relist, and the lineage's epoch must not move past it;
 * - no watch is a watch-list still replaying its initial events: its cache
 *   is being rebuilt (the ledger sees the end itself, not only the filter);
 * - each watch is of the previous epoch and the new ranges lie inside its
 *   ranges: DELETEDs only remove; a range that grows needs a LIST;
 * - each watch sits between events past its initial events (fact): no event
 *   judged under the old ranges can follow the DELETEDs.
 */
export function whyNotNarrow(lineage: LineageKey, watches: readonly OpenWatch[], ctx: NarrowingContext): string | undefined {
  const l = ctx.lineages.get(lineage);
  if (!ctx.facts.trusted.has(lineage)) return "its index cannot be trusted (no complete snapshot through this proxy, or the objects' kind is unknown)";
  if (l === undefined || l.listEpoch !== ctx.prevEpoch) return "its cache is not of the previous ranges";
  if (ctx.openWatches(lineage) !== watches.length) return "another of its watches is ending";
  if (watches.some((w) => w.replaying)) return "a watch-list is still replaying its initial events";
  if (watches.some((w) => w.epoch !== ctx.prevEpoch || difference(ctx.ranges, w.ranges).length > 0)) return "the ranges grow";
  if (watches.some((w) => !ctx.facts.narrowable.has(w.rid))) return "a watch is not between events past its initial events";
  return undefined;
}

/** Splits the not-doomed open watches at a range change into lineages that narrow and watches that end. */
export function planNarrowing(open: readonly OpenWatch[], ctx: NarrowingContext): NarrowingPlan {
  if (!ctx.syntheticDeletes) return { narrow: new Map(), end: open, why: new Map() };
  const byLineage = new Map<LineageKey, OpenWatch[]>();
  for (const w of open) byLineage.set(w.lineage, [...(byLineage.get(w.lineage) ?? []), w]);
  const narrow = new Map<LineageKey, readonly OpenWatch[]>();
  const end: OpenWatch[] = [];
  const why = new Map<LineageKey, string>();
  for (const [lineage, watches] of byLineage) {
    const reason = whyNotNarrow(lineage, watches, ctx);
    if (reason === undefined) narrow.set(lineage, watches);
    else {
      why.set(lineage, reason);
      end.push(...watches);
    }
  }
  return { narrow, end, why };
}

/**
 * At a range change to `ctx.ranges` (from `prevRanges`), what lineage `l`,
 * with no watch open, keeps of a narrowing deferred to the WATCH that will
 * resume its cache (`LineageRecord.narrowOnResume`), or undefined: it
 * relists instead. The cache between its LIST and its WATCH is narrowed as
 * an open watch would have been (P7: a scale-out costs one LIST), under the
 * same conditions as `whyNotNarrow`:
 * - nothing of it is open or in flight (else those decide), and no cache of
 *   it was told to relist;
 * - its index is trusted, and was not dropped since;
 * - its newest cache is of the previous epoch (a new deferral) or of the
 *   one a deferral still pending was made for, and the new ranges lie
 *   inside that cache's ranges: DELETEDs only remove.
 */
export function deferredNarrowing(l: LineageRecord, busy: Busy | undefined, prevRanges: readonly Range[], ctx: NarrowingContext): LineageRecord["narrowOnResume"] {
  if (!ctx.syntheticDeletes || isBusy(busy) || l.told || l.indexDropped || !ctx.facts.trusted.has(l.key)) return undefined;
  const d = l.narrowOnResume ?? (l.listEpoch === ctx.prevEpoch ? { epoch: ctx.prevEpoch, ranges: prevRanges } : undefined);
  if (d === undefined || l.listEpoch !== d.epoch || difference(ctx.ranges, d.ranges).length > 0) return undefined;
  return d;
}
