/**
 * What the ledger waits for, described for people (the proxy's handoff()
 * view, a test that timed out): per owed lineage, how long it has owed,
 * what of it is open or in flight, and when its quiet bound lets it go.
 * Pure; reads the ledger, changes nothing.
 */
import { releaseAt } from "./quiet.ts";
import { tally } from "./records.ts";
import type { Ledger, LedgerPolicy, LineageKey } from "./types.ts";

export interface OwedView {
  readonly lineage: LineageKey;
  readonly owedMs: number;
  /** Watches being served, of which being ended; requests sent and not answered. */
  readonly open: number;
  readonly ending: number;
  readonly inFlight: number;
  /** Since a request of it last started or ended; undefined once it was evicted. */
  readonly idleMs: number | undefined;
  readonly watched: boolean | undefined;
  readonly told: boolean | undefined;
  readonly listEpoch: number | undefined;
  /** In how long the quiet bound lets it go; undefined while it is busy. */
  readonly releaseInMs: number | undefined;
}

export function describeOwed(ledger: Ledger, now: number, policy: LedgerPolicy): OwedView[] {
  const busy = tally(ledger.requests.values());
  return [...ledger.owed].map(([key, o]) => {
    const l = ledger.lineages.get(key);
    const b = busy.get(key);
    const at = releaseAt(o, l, b, policy, ledger.epoch);
    return {
      lineage: key,
      owedMs: now - o.since,
      open: b?.open ?? 0,
      ending: b?.ending ?? 0,
      inFlight: b?.sent ?? 0,
      idleMs: l === undefined ? undefined : now - l.lastUsed,
      watched: l?.watched,
      told: l?.told,
      listEpoch: l?.listEpoch,
      releaseInMs: at === undefined ? undefined : at - now,
    };
  });
}
