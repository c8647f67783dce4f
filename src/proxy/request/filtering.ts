/**
 * How this proxy asks the apiserver to filter, chosen per proxy
 * (`--filter`): by KEP-5866 `shardSelector`, or in labels mode by the slot
 * label (`shard.shardcar.io/<ring> in (…)`, src/shard/slots.ts), which every
 * apiserver honours. Pure, apart from reading the slot count the caller
 * hands in.
 */
import type { Range } from "../../shard/range.ts";
import { slotOfValue } from "../../shard/slots.ts";
import type { ResourceKey } from "../../shard/slots.ts";
import { rewriteQuery, type RewriteResult } from "./rewrite.ts";
import { SlotStarts } from "../scan/object-key.ts";

export type ProxyFiltering =
  | { readonly mode: "shardselector" }
  | {
      readonly mode: "labels";
      /** `shard.shardcar.io/<ring>`, or an explicit `--slot-label`. */
      readonly labelKey: string;
      /**
       * The slot count the ranges are made of: fixed for a static spec, the
       * ring's once its member has read it (undefined before, while it owns
       * nothing).
       */
      readonly slotCount: () => number | undefined;
    };

export const SHARDSELECTOR: ProxyFiltering = { mode: "shardselector" };

/**
 * The upstream query for one sharded request under `filtering`. In labels
 * mode before the slot count is known the proxy owns nothing, and asks for
 * nothing.
 */
export function rewriteFor(query: URLSearchParams, key: ResourceKey, owned: readonly Range[], filtering: ProxyFiltering): RewriteResult {
  if (filtering.mode === "shardselector") return rewriteQuery(query, key, owned);
  const slotCount = filtering.slotCount();
  if (slotCount === undefined) return rewriteQuery(query, key, []);
  return rewriteQuery(query, key, owned, { labelKey: filtering.labelKey, slotCount });
}

/**
 * Where the recent-keys record holds an object whose key value is
 * `keyValue` (`/debug/shardcar?key=`, `audit --canary`): its hash, or in
 * labels mode its slot's first hash, the point the filters judge and record
 * (object-key.ts). Undefined: hash the value itself.
 */
export function recordedPoint(filtering: ProxyFiltering, keyValue: string): { readonly hi: number; readonly lo: number } | undefined {
  if (filtering.mode === "shardselector") return undefined;
  const slotCount = filtering.slotCount();
  if (slotCount === undefined) return undefined;
  const starts = SlotStarts.of(slotCount);
  const slot = slotOfValue(keyValue, slotCount);
  return { hi: starts.hi[slot] as number, lo: starts.lo[slot] as number };
}
