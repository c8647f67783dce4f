/**
 * Label-slot mode as the manager sees it: which rings filter by a slot
 * label (`spec.filter: labels`), which resources they label and by which
 * key, and what label each object must carry. The stamping webhook, the
 * labeller, `shardcar audit` and `shardcar preflight` all decide through this
 * file, and it decides through `src/shard/slots.ts`, which the proxy's own
 * check uses too: an object is labelled exactly as the proxies check it.
 *
 * The label-slot fields are decoded apart from the handoff spec
 * (`decodeSpec` in `table.ts`) on purpose: members read only the slot count,
 * so a typo in `spec.resources` stops labelling (and says so in the
 * `Labelled` condition) but never stops a ring's handoffs.
 *
 * Pure: no clock, no I/O.
 */
import { ConfigError } from "../errors.ts";
import type { FilterMode as SettingFilterMode } from "../settings/pod-settings.ts";
import { formatSlot, keyValue, parseSlot, slotLabelKey, slotOfValue, type KeyMetadata, type ResourceKey } from "../shard/slots.ts";
import { parseResources } from "../shard/spec.ts";
import { DEFAULT_SLOT_COUNT, MAX_SLOT_COUNT } from "../shard/table.ts";
import { isRecord } from "../is-record.ts";

/** How a ring's proxies ask the server to filter: the pod setting `filter` (src/settings/), by name. */
export const FilterMode = { ShardSelector: "shardselector", Labels: "labels" } as const satisfies Record<string, SettingFilterMode>;
export type FilterMode = SettingFilterMode;

/** A resource a labels-mode ring labels, and the key its slot is computed from. */
export interface SlotResource {
  /** Plural, e.g. `widgets`. */
  readonly resource: string;
  /** `""` for the core group. */
  readonly group: string;
  readonly key: ResourceKey;
}

export interface LabelSpec {
  readonly filter: FilterMode;
  /** Empty in shardselector mode when `spec.resources` is absent. */
  readonly resources: readonly SlotResource[];
}

export type LabelSpecResult = { readonly ok: true; readonly value: LabelSpec } | { readonly ok: false; readonly message: string };

// A ShardRing spec field; far above any real list of resources, low enough
// that a pasted novel is refused before it is parsed.
const MAX_RESOURCES_LENGTH = 4096;

/**
 * `spec.filter` and `spec.resources` of a ShardRing. Absent fields are the
 * defaults (shardselector, no resources); every refusal quotes the bad value
 * and says what is allowed.
 */
export function decodeLabelSpec(spec: unknown): LabelSpecResult {
  const s = isRecord(spec) ? spec : {};
  const filter = s["filter"] ?? FilterMode.ShardSelector;
  if (filter !== FilterMode.ShardSelector && filter !== FilterMode.Labels) {
    return { ok: false, message: `invalid spec.filter ${JSON.stringify(filter)}: allowed values are "shardselector" (the KEP-5866 shardSelector, the default) and "labels" (a slot label on every object)` };
  }
  const raw = s["resources"];
  let resources: SlotResource[] = [];
  if (raw !== undefined && raw !== null) {
    if (typeof raw !== "string") {
      return { ok: false, message: `invalid spec.resources ${JSON.stringify(raw)}: expected a string such as "widgets.example.com, configmaps=owner"` };
    }
    if (raw.length > MAX_RESOURCES_LENGTH) return { ok: false, message: `invalid spec.resources: ${raw.length} characters, at most ${MAX_RESOURCES_LENGTH}` };
    try {
      resources = parseResources(raw, "spec.resources");
    } catch (e) {
      if (e instanceof ConfigError) return { ok: false, message: `${e.message} (allowed: the vocabulary of shardcar.io/resources, e.g. "widgets.example.com, configmaps=owner")` };
      throw e;
    }
  }
  if (filter === FilterMode.Labels && resources.length === 0) {
    return { ok: false, message: 'spec.filter is "labels" but spec.resources is not set: list the resources to label and their keys, e.g. resources: "widgets.example.com, configmaps=owner"' };
  }
  return { ok: true, value: { filter, resources } };
}

/** A ring in labels mode, as every labelling component needs it. */
export interface LabelSlotRing {
  readonly namespace: string;
  readonly name: string;
  /** `shard.shardcar.io/<name>`. */
  readonly label: string;
  readonly slotCount: number;
  readonly resources: readonly SlotResource[];
}

/** A ShardRing as far as label slots are concerned. */
export interface RingLike {
  readonly metadata?: { readonly name?: string | undefined; readonly namespace?: string | undefined } | undefined;
  readonly spec?: unknown;
  readonly status?: unknown;
}

/** Why a ShardRing's labelling is not running, for its `Labelled` condition. */
export interface LabelProblem {
  readonly namespace: string;
  readonly name: string;
  /** `SpecInvalid` or `LabelConflict`. */
  readonly reason: string;
  readonly message: string;
}

export interface LabelSlotConfig {
  /** Labels-mode rings that label at least one resource. */
  readonly rings: readonly LabelSlotRing[];
  readonly problems: readonly LabelProblem[];
}

/**
 * The slot count labels are computed with: the one the ring's tables use
 * (`status.slotCount`, which the leader never changes once a table exists)
 * or, before a table exists, `spec.slots`.
 */
export function labelSlotCount(ring: RingLike): number | undefined {
  const valid = (n: unknown): n is number => typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= MAX_SLOT_COUNT;
  const recorded = isRecord(ring.status) ? ring.status["slotCount"] : undefined;
  if (valid(recorded)) return recorded;
  const spec = isRecord(ring.spec) ? ring.spec["slots"] ?? DEFAULT_SLOT_COUNT : DEFAULT_SLOT_COUNT;
  return valid(spec) ? spec : undefined;
}

function resourceId(r: { readonly resource: string; readonly group: string }): string {
  return r.group === "" ? r.resource : `${r.resource}.${r.group}`;
}

/**
 * The labels-mode rings among `objects`, and what keeps the others from
 * labelling. Two rings of the same name in different namespaces write the
 * same label key; where both label one resource, neither labels it (an
 * object cannot hold two slots under one key), and both say why.
 */
export function labelSlotConfig(objects: Iterable<RingLike>): LabelSlotConfig {
  const problems: LabelProblem[] = [];
  const candidates: LabelSlotRing[] = [];
  for (const o of objects) {
    const namespace = o.metadata?.namespace ?? "";
    const name = o.metadata?.name ?? "";
    const spec = decodeLabelSpec(o.spec);
    if (!spec.ok) {
      // Only a ring meant to label is refused; a broken resources field on a
      // shardselector ring is reported the same way, as it would be the day
      // the ring switches.
      problems.push({ namespace, name, reason: "SpecInvalid", message: spec.message });
      continue;
    }
    if (spec.value.filter !== FilterMode.Labels) continue;
    let label: string;
    try {
      label = slotLabelKey(name);
    } catch (e) {
      problems.push({ namespace, name, reason: "SpecInvalid", message: e instanceof Error ? e.message : String(e) });
      continue;
    }
    const slotCount = labelSlotCount(o);
    if (slotCount === undefined) {
      problems.push({ namespace, name, reason: "SpecInvalid", message: `spec.slots ${JSON.stringify(isRecord(o.spec) ? o.spec["slots"] : undefined)} is not a slot count between 1 and ${MAX_SLOT_COUNT}` });
      continue;
    }
    candidates.push({ namespace, name, label, slotCount, resources: spec.value.resources });
  }
  // label key + resource → the rings that would label it
  const claims = new Map<string, LabelSlotRing[]>();
  for (const r of candidates) {
    for (const res of r.resources) {
      const k = `${r.label} ${resourceId(res)}`;
      claims.set(k, [...(claims.get(k) ?? []), r]);
    }
  }
  const rings: LabelSlotRing[] = [];
  for (const r of candidates) {
    const kept: SlotResource[] = [];
    for (const res of r.resources) {
      const rivals = (claims.get(`${r.label} ${resourceId(res)}`) ?? []).filter((x) => x !== r);
      if (rivals.length === 0) {
        kept.push(res);
        continue;
      }
      problems.push({
        namespace: r.namespace,
        name: r.name,
        reason: "LabelConflict",
        message: `ring ${r.namespace}/${r.name} and ${rivals.map((x) => `${x.namespace}/${x.name}`).join(", ")} both label ${resourceId(res)} with ${r.label}; neither labels it until one ring is renamed or drops it from spec.resources`,
      });
    }
    if (kept.length > 0) rings.push({ ...r, resources: kept });
  }
  return { rings, problems };
}

/** The rings that label `group`/`resource`, each with that resource's key. */
export function ringsLabelling(config: LabelSlotConfig, group: string, resource: string): { ring: LabelSlotRing; key: ResourceKey }[] {
  const out: { ring: LabelSlotRing; key: ResourceKey }[] = [];
  for (const ring of config.rings) {
    const r = ring.resources.find((x) => x.group === group && x.resource === resource);
    if (r !== undefined) out.push({ ring, key: r.key });
  }
  return out;
}

/**
 * The slot label `meta` must carry in `ring` under `key`, as text; undefined
 * when it depends on a uid the object does not have yet (CREATE admission of
 * a `uid`-keyed object, or an `owner`-keyed one without a controller).
 */
export function wantedSlot(ring: LabelSlotRing, key: ResourceKey, meta: KeyMetadata): string | undefined {
  const value = keyValue(meta, key);
  return value === undefined ? undefined : formatSlot(slotOfValue(value, ring.slotCount));
}

export type LabelState = "labelled" | "unlabelled" | "mislabelled";

/**
 * How a stored object stands: its label equals the wanted slot, is absent,
 * or is anything else (another slot, or text that is no slot at all). A
 * stored object always has a uid, so the wanted slot is always known; one
 * without (a broken list) counts as unlabelled.
 */
export function labelState(ring: LabelSlotRing, key: ResourceKey, meta: KeyMetadata, labels: Readonly<Record<string, string>> | undefined): { state: LabelState; want: string | undefined } {
  const want = wantedSlot(ring, key, meta);
  const have = labels?.[ring.label];
  if (have === undefined) return { state: "unlabelled", want };
  if (want !== undefined && have === want && parseSlot(have, ring.slotCount) !== undefined) return { state: "labelled", want };
  return { state: want === undefined ? "unlabelled" : "mislabelled", want };
}

/** `widgets.example.com` or `configmaps`, as users write it. */
export function slotResourceName(r: { readonly resource: string; readonly group: string }): string {
  return resourceId(r);
}
