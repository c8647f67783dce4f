/**
 * The per-replica table each scene prints and the report repeats: which
 * columns a scene's rows show and how. Apart from report.ts, which lays out
 * any table and knows nothing of replicas, and from the runner, which only
 * decides when a table is printed.
 */
import { fmtBytes, fmtPct, textTable } from "./report.ts";
import type { ReplicaRow } from "./stage.ts";

/** A scene's rows as the text table the terminal shows and the report repeats. */
export function printTable(rows: readonly ReplicaRow[]): string {
  return textTable(
    ["replica", "ring slots (of 256)", "keyspace", "cached", "expected", "to controller", "from apiserver", "unsharded twin", "filtered by"],
    rows.map((r) => [r.replica, r.ranges, fmtPct(r.share), String(r.cached), String(r.expected), fmtBytes(r.bytesToController), fmtBytes(r.bytesFromServer), fmtBytes(r.twinBytes), r.filteredBy]),
  );
}
