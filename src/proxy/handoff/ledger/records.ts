/**
 * Counts read off the ledger's per-request records. Nothing in the ledger
 * is incremented and decremented: a request is open or in flight exactly
 * while its record says so, so no callback that runs twice (or not at all)
 * can leave a count wrong for good.
 */
import type { LineageKey, OpenWatch, RequestRecord } from "./types.ts";

export interface Busy {
  /** Watches being served. */
  readonly open: number;
  /** Of those, watches a 410 was ordered for (ending). */
  readonly ending: number;
  /** Requests sent upstream and not yet answered (a LIST: not yet served whole). */
  readonly sent: number;
  /** Of those, WATCHes. */
  readonly sentWatches: number;
}

export const IDLE: Busy = { open: 0, ending: 0, sent: 0, sentWatches: 0 };

export function isOpenWatch(r: RequestRecord): r is OpenWatch {
  return r.phase === "open";
}

/** Per lineage, its open watches and requests in flight; lineages with neither are absent. */
export function tally(requests: Iterable<RequestRecord>): Map<LineageKey, Busy> {
  const out = new Map<LineageKey, Busy>();
  for (const r of requests) {
    if (r.phase === "held") continue;
    const b = out.get(r.lineage) ?? IDLE;
    out.set(r.lineage, r.phase === "open" ? { ...b, open: b.open + 1, ending: b.ending + (r.doomed ? 1 : 0) } : { ...b, sent: b.sent + 1, sentWatches: b.sentWatches + (r.kind === "watch" ? 1 : 0) });
  }
  return out;
}

export function isBusy(b: Busy | undefined): boolean {
  return b !== undefined && (b.open > 0 || b.sent > 0);
}
