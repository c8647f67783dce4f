/**
 * Range changes in two stages, so a controller never sees a parent without
 * the children it already has (issue 13: co-location).
 *
 * A proxy that shards parents (keyed by `uid` or `namespace`) and their
 * children (keyed by `owner`) serves them to separate informers, which
 * relist separately. If both moved at once, a replica that gains a slot
 * could list its new parents before their children and create each child
 * again; one that loses a slot could see a child leave before its parent and
 * do the same. So the proxy enforces two range sets, one per group, and
 * moves them in order:
 *
 * 1. **Stage A**: dependents (owner-keyed) take what they gain, owners
 *    give up what they lose: `D ∪ T` and `O ∩ T`.
 * 2. **Stage B**, once both groups have reported stage A applied (their
 *    caches relisted under it): both move to the target `T`, dependents
 *    dropping what they lost, owners taking what they gained.
 *
 * Invariant: every owner range a cache may hold is inside every dependent
 * range it may hold at the same time (O ⊆ D), so a cached parent's children
 * are cached too. Stage A may start again at any moment (a new target
 * preempts a stage in flight: O only shrinks and D only grows in it); stage B
 * only from stage A's ranges, applied. The source hears "applied" for a
 * generation once both groups enforce its ranges and have applied them.
 *
 * Pure: `step(state, event) → { state, effects }`; the shell is src/proxy/shard-handler.ts.
 */
import { equal, intersect, union } from "../../shard/range.ts";
import type { Ownership } from "../../shard/ownership.ts";

export type StageGroup = "owners" | "dependents";
export const STAGE_GROUPS: readonly StageGroup[] = ["owners", "dependents"];

export interface StagingState {
  /** What the source (the ring member) asks for. */
  readonly target: Ownership;
  /** What each group was last told to enforce. */
  readonly views: Readonly<Record<StageGroup, Ownership>>;
  /** Whether each group reported its view applied. */
  readonly applied: Readonly<Record<StageGroup, boolean>>;
  /** The newest target generation reported applied to the source (0: none). */
  readonly reported: number;
}

export type StagingEvent = { readonly type: "target"; readonly ownership: Ownership } | { readonly type: "applied"; readonly group: StageGroup; readonly generation: number };

export type StagingEffect = { readonly type: "publish"; readonly group: StageGroup; readonly ownership: Ownership } | { readonly type: "applied"; readonly generation: number };

/** Both groups start at the source's ranges: nothing is cached yet, so there is nothing to order. */
export function initialStaging(target: Ownership): StagingState {
  return { target, views: { owners: target, dependents: target }, applied: { owners: false, dependents: false }, reported: 0 };
}

export function step(state: StagingState, event: StagingEvent): { state: StagingState; effects: StagingEffect[] } {
  if (event.type === "target") return advance({ ...state, target: event.ownership });
  const view = state.views[event.group];
  // A report for a view since replaced (or never told) is stale.
  if (event.generation !== view.generation || state.applied[event.group]) return { state, effects: [] };
  return advance({ ...state, applied: { ...state.applied, [event.group]: true } });
}

function advance(s: StagingState): { state: StagingState; effects: StagingEffect[] } {
  const { target, views } = s;
  const stageA: Record<StageGroup, Ownership> = {
    dependents: { generation: target.generation, ranges: union(views.dependents.ranges, target.ranges) },
    owners: { generation: target.generation, ranges: intersect(views.owners.ranges, target.ranges) },
  };
  if (STAGE_GROUPS.some((g) => !equal(stageA[g].ranges, views[g].ranges))) return publish(s, stageA);
  if (!s.applied.owners || !s.applied.dependents) return { state: s, effects: [] };
  const stageB: Record<StageGroup, Ownership> = { dependents: target, owners: target };
  // Same ranges under a new generation are published too, so each group's
  // generation names the table its ranges come from (the proxies then apply
  // them at once, without a relist).
  if (STAGE_GROUPS.some((g) => !equal(target.ranges, views[g].ranges) || views[g].generation !== target.generation)) return publish(s, stageB);
  if (target.generation === 0 || target.generation <= s.reported) return { state: s, effects: [] };
  return { state: { ...s, reported: target.generation }, effects: [{ type: "applied", generation: target.generation }] };
}

/** Tells each group whose view changes; a group told nothing new keeps its applied flag. */
function publish(s: StagingState, next: Record<StageGroup, Ownership>): { state: StagingState; effects: StagingEffect[] } {
  const effects: StagingEffect[] = [];
  const views = { ...s.views };
  const applied = { ...s.applied };
  for (const g of STAGE_GROUPS) {
    const cur = s.views[g];
    if (cur.generation === next[g].generation && equal(cur.ranges, next[g].ranges)) continue;
    views[g] = next[g];
    applied[g] = false;
    effects.push({ type: "publish", group: g, ownership: next[g] });
  }
  return { state: { ...s, views, applied }, effects };
}
