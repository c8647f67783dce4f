/**
 * What one collection request selects: its label, field and shard
 * selectors, per the KEP-5866 gate the request drew, ANDed with its
 * namespace. A pure decision, apart from server.ts, which serves the
 * request, and from list-encoding.ts, which echoes the shard selector.
 */
import { SelectorSyntaxError } from "../errors.ts";
import { HashMatcher } from "../shard/range.ts";
import { formatSelector, parseSelector } from "../shard/selector.ts";
import { gateEnabled, type EffectiveGate } from "./gate.ts";
import type { ListQuery } from "./request.ts";
import { matchFields, matchLabels, parseFieldSelector, parseLabelSelector, type FieldSelector, type LabelSelector } from "./selectors.ts";
import { internal } from "./status.ts";
import type { ResolvedDef, ResourceState, StoredObject } from "./store.ts";

/** A request's label, field and shard selection, ANDed with its namespace. */
export class Selection {
  labels: LabelSelector;
  fields: FieldSelector;
  shard: { key: "uid" | "namespace"; matcher: HashMatcher; canonical: string } | undefined;
  readonly namespace: string | undefined;
  readonly def: ResolvedDef;

  constructor(init: { labels: LabelSelector; fields: FieldSelector; shard: Selection["shard"]; namespace: string | undefined; def: ResolvedDef }) {
    this.labels = init.labels;
    this.fields = init.fields;
    this.shard = init.shard;
    this.namespace = init.namespace;
    this.def = init.def;
  }

  matches(o: StoredObject): boolean {
    if (this.namespace !== undefined && o.namespace !== this.namespace) return false;
    if (this.shard !== undefined) {
      const [hi, lo] = this.shard.key === "uid" ? o.uidHash : o.nsHash;
      if (!this.shard.matcher.matchesParts(hi, lo)) return false;
    }
    if (this.labels.length > 0 && !matchLabels(this.labels, o.labels)) return false;
    if (this.fields.length > 0 && !matchFields(this.fields, (f) => this.fieldValue(o, f))) return false;
    return true;
  }

  private fieldValue(o: StoredObject, field: string): string {
    if (field === "metadata.name") return o.name;
    if (field === "metadata.namespace") return o.namespace;
    const f = this.def.fieldSelectors?.[field];
    return f ? f(o.object) : "";
  }
}

/**
 * Label, field and shard selection for one collection request, per the gate this request drew.
 * Throws the 400 of a bad label or field selector, or the 500 a real server gives an invalid shard selector.
 */
export function selectionOf(state: ResourceState, q: ListQuery, namespace: string | undefined, gate: EffectiveGate): Selection {
  const def = state.def;
  // Selector syntax errors are 400s from parameter decoding, before the shard selector is looked at.
  const labels = parseLabelSelector(q.labelSelector);
  const fields = parseFieldSelector(q.fieldSelector, (f) => f === "metadata.name" || f === "metadata.namespace" || Object.hasOwn(def.fieldSelectors ?? {}, f));
  let shard: Selection["shard"];
  // An empty `shardSelector=` is the same as none; with the gate off even garbage is ignored.
  if (gateEnabled(gate) && q.shardSelector !== "") {
    try {
      const sel = parseSelector(q.shardSelector);
      // The echo keeps the ranges as written (order, duplicates), normalised in spelling only.
      shard = { key: sel.key, matcher: new HashMatcher(sel.ranges), canonical: formatSelector(sel) };
    } catch (e) {
      if (e instanceof SelectorSyntaxError) throw internal(`invalid shard selector: ${e.message}`);
      throw e;
    }
  }
  return new Selection({ labels, fields, shard, namespace, def });
}
