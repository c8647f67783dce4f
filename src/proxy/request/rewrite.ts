/**
 * Rewriting a sharded request's query: what the apiserver is asked to
 * filter by, intersected with any shard selector the controller sent, or a
 * label selector that matches nothing when the pod owns nothing. Pure.
 *
 * Three ways to ask, by the resource's key and the proxy's mode:
 * - shardselector mode, `uid` or `namespace` key: the KEP-5866
 *   `shardSelector` for the pod's ranges;
 * - shardselector mode, `owner` key: nothing (no shard selector can hash an
 *   ownerReference), so the proxy filters every item itself, by design;
 * - labels mode, any key: `<slot label> in (<owned slots>)` ANDed with the
 *   controller's own label selector, which every apiserver honours.
 */
import { SelectorSyntaxError } from "../../errors.ts";
import { intersect, normalize, type Range } from "../../shard/range.ts";
import { canonicalSelector, parseSelector } from "../../shard/selector.ts";
import { slotLabelSelector, slotsOfRanges, type ResourceKey } from "../../shard/slots.ts";
import { slotsToRanges } from "../../shard/table.ts";
import type { ObjectKey } from "../scan/object-key.ts";

/**
 * No shard range can express "nothing", and an absent selector means
 * "everything". A label selector that requires a key both to exist and not
 * to exist can match no object, yet still yields a real resourceVersion and a
 * bookmark-only watch. ANDed (comma) with the controller's own selector.
 */
export const MATCH_NOTHING_LABEL_SELECTOR = "shardcar.io/none,!shardcar.io/none";

/** Labels mode: the slot label's key, and the slot count of the ranges' table. */
export interface SlotLabels {
  readonly labelKey: string;
  readonly slotCount: number;
}

export type RewriteResult =
  | {
      readonly ok: true;
      /** Query to send upstream. */
      readonly query: URLSearchParams;
      /** Ranges the response must be limited to (pod ∩ client; in labels mode, whole slots). Empty: nothing. */
      readonly ranges: readonly Range[];
      /** The exact shard selector sent, if any; the list fast path compares shardInfo with it. */
      readonly sentSelector: string | undefined;
      /** What the filters read to place an object (object-key.ts). */
      readonly objectKey: ObjectKey;
      /** Nothing was sent that lets the server filter (an owner key in shardselector mode): the proxy filters by design. */
      readonly proxyFilters: boolean;
    }
  | { readonly ok: false; readonly status: number; readonly message: string };

function andLabels(own: string | null, extra: string): string {
  return own === null || own === "" ? extra : `${own},${extra}`;
}

/**
 * Computes the upstream query. The controller's first `shardSelector` value
 * counts, as on the server; an empty value means absent. `labels` is set in
 * labels mode.
 */
export function rewriteQuery(query: URLSearchParams, key: ResourceKey, owned: readonly Range[], labels?: SlotLabels): RewriteResult {
  const out = new URLSearchParams(query);
  const clientValue = query.get("shardSelector");
  out.delete("shardSelector");
  let ranges = normalize(owned);
  if (clientValue !== null && clientValue !== "") {
    let client;
    try {
      client = parseSelector(clientValue);
    } catch (e) {
      // Answer like a gate-on server would, so the controller's behaviour
      // does not depend on which apiserver replica it reached.
      if (e instanceof SelectorSyntaxError) return { ok: false, status: 500, message: `invalid shard selector: ${e.message}` };
      throw e;
    }
    if (client.key !== key) {
      const how = key === "owner" ? "the uid of each object's controller ownerReference, which no shardSelector can express" : key;
      return {
        ok: false,
        status: 400,
        message: `shardcar: the controller's shardSelector hashes ${client.key}, but this proxy shards the resource by ${how}; one request cannot combine both`,
      };
    }
    ranges = intersect(ranges, client.ranges);
  }
  if (labels !== undefined) {
    // Whole slots only: the label holds a slot, not a hash.
    const slots = slotsOfRanges(ranges, labels.slotCount);
    const selector = slotLabelSelector(labels.labelKey, slots) ?? MATCH_NOTHING_LABEL_SELECTOR;
    out.set("labelSelector", andLabels(query.get("labelSelector"), selector));
    return { ok: true, query: out, ranges: slotsToRanges(slots, labels.slotCount), sentSelector: undefined, objectKey: { label: labels.labelKey, slotCount: labels.slotCount }, proxyFilters: false };
  }
  if (ranges.length === 0) {
    out.set("labelSelector", andLabels(query.get("labelSelector"), MATCH_NOTHING_LABEL_SELECTOR));
    return { ok: true, query: out, ranges, sentSelector: undefined, objectKey: key, proxyFilters: false };
  }
  if (key === "owner") return { ok: true, query: out, ranges, sentSelector: undefined, objectKey: key, proxyFilters: true };
  const sentSelector = canonicalSelector(key, ranges);
  if (sentSelector !== undefined) out.set("shardSelector", sentSelector);
  return { ok: true, query: out, ranges, sentSelector, objectKey: key, proxyFilters: false };
}
