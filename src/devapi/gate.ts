/**
 * The KEP-5866 gate as a pure decision: given the configured mode and how many
 * collection requests came before, does this request see the feature, and
 * does a watch get filtered. No state of its own; the server keeps the count.
 */
import type { GateMode } from "./types.ts";

/** What one request sees. `bug` is on, with the 1.36.0 watch hole. */
export type EffectiveGate = "on" | "off" | "bug";

/**
 * `index` counts collection LIST/WATCH requests since the mode was set,
 * from 0. In `mixed` mode even indexes see `on` and odd ones `off`, like two
 * apiservers behind a round-robin load balancer, one of them with the gate off.
 */
export function effectiveGate(mode: GateMode, index: number): EffectiveGate {
  switch (mode) {
    case "on":
      return "on";
    case "off":
      return "off";
    case "mixed":
      return index % 2 === 0 ? "on" : "off";
    case "bug-1.36.0":
      return "bug";
  }
}

/** Whether shardSelector is parsed (and may fail with 500) for this request. */
export function gateEnabled(g: EffectiveGate): boolean {
  return g !== "off";
}

/**
 * Whether a watch's events are filtered by its shard selector. 1.36.0–1.36.3
 * with the watch cache disabled skipped the shard check in the etcd watcher's
 * filter when the predicate had no label and no field selector.
 */
export function watchFiltered(g: EffectiveGate, hasLabelOrFieldSelector: boolean): boolean {
  if (g === "off") return false;
  if (g === "bug") return hasLabelOrFieldSelector;
  return true;
}
