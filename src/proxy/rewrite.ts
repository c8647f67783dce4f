/**
 * Rewriting a sharded request's query: the pod's own selector, intersected
 * with any selector the controller sent, or a label selector that matches
 * nothing when the pod owns nothing. Pure.
 */
import { SelectorSyntaxError } from "../errors.ts";
import { intersect, normalize, type Range } from "../shard/range.ts";
import { canonicalSelector, parseSelector, type ShardKey } from "../shard/selector.ts";

/**
 * No shard range can express "nothing", and an absent selector means
 * "everything". A label selector that requires a key both to exist and not
 * to exist can match no object, yet still yields a real resourceVersion and a
 * bookmark-only watch. ANDed (comma) with the controller's own selector.
 */
export const MATCH_NOTHING_LABEL_SELECTOR = "shardcar.io/none,!shardcar.io/none";

export type RewriteResult =
  | {
      readonly ok: true;
      /** Query to send upstream. */
      readonly query: URLSearchParams;
      /** Ranges the response must be limited to (pod ∩ client). Empty: nothing. */
      readonly ranges: readonly Range[];
      /** The exact selector sent, if any; the list fast path compares shardInfo with it. */
      readonly sentSelector: string | undefined;
    }
  | { readonly ok: false; readonly status: number; readonly message: string };

/**
 * Computes the upstream query. The controller's first `shardSelector` value
 * counts, as on the server; an empty value means absent.
 */
export function rewriteQuery(query: URLSearchParams, key: ShardKey, owned: readonly Range[]): RewriteResult {
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
      return {
        ok: false,
        status: 400,
        message: `shardcar: the controller's shardSelector hashes ${client.key}, but this proxy shards the resource by ${key}; one request cannot combine both`,
      };
    }
    ranges = intersect(ranges, client.ranges);
  }
  const sentSelector = canonicalSelector(key, ranges);
  if (sentSelector === undefined) {
    const own = query.get("labelSelector");
    out.set("labelSelector", own === null || own === "" ? MATCH_NOTHING_LABEL_SELECTOR : `${own},${MATCH_NOTHING_LABEL_SELECTOR}`);
  } else {
    out.set("shardSelector", sentSelector);
  }
  return { ok: true, query: out, ranges, sentSelector };
}
