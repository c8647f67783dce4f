/**
 * What the leader's tables changed, for the handoff tests: who gains (and so
 * relists), and every table one `step` call published.
 */
import type { Effect, RingState } from "../../src/ring/handoff.ts";
import type { SlotOwners } from "../../src/shard/table.ts";

/** Members that own a slot in `to` they do not own in `from`: they relist. */
export function gainersOf(from: SlotOwners, to: SlotOwners): string[] {
  return [...new Set(to.filter((o, s): o is string => o !== undefined && from[s] !== o))].sort();
}

/**
 * Every table published by one `step` call, with the committed table it
 * was planned against: within one step the leader may commit or abandon,
 * then plan (publish), then commit at once if nobody needs to report.
 */
export function publishedBy(before: RingState, after: RingState, effects: readonly Effect[]): Array<{ from: SlotOwners; to: SlotOwners }> {
  const out: Array<{ from: SlotOwners; to: SlotOwners }> = [];
  let from: SlotOwners = before.committed.owners;
  for (const e of effects) {
    if (e.type === "commit" && before.pending?.generation === e.generation) from = before.pending.owners;
    if (e.type === "publish") {
      const to = after.pending?.generation === e.generation ? after.pending.owners : after.committed.generation === e.generation ? after.committed.owners : undefined;
      if (to !== undefined) out.push({ from, to });
    }
  }
  return out;
}
