/**
 * Label slots as the operator tools judge them, pure: how many objects of a
 * labels-mode ring's resource carry their right slot label, and which do
 * not (an object without it is in no proxy's cache: the audit names it,
 * never hides it); whether a ShardRing is ready for its pods to switch to
 * `shardcar.io/filter: labels`; and whether the stamping webhook's
 * configuration sends every resource of the ring to `/label-slots`.
 *
 * Every verdict goes through `src/ring/label-slots.ts`, which the webhook
 * and the labeller use too.
 */
import { labelState, slotResourceName, type LabelSlotRing, type SlotResource } from "../ring/label-slots.ts";
import type { KeyMetadata } from "../shard/slots.ts";
import type { Check } from "./checks.ts";

/** One object of the full list, as much as the label verdict needs. */
export interface LabelledObject {
  /** `namespace/name`, or `name` when cluster-scoped. */
  readonly id: string;
  readonly meta: KeyMetadata;
  readonly labels: Readonly<Record<string, string>>;
}

export interface LabelAuditReport {
  readonly ring: string;
  readonly resource: string;
  readonly key: SlotResource["key"];
  readonly label: string;
  readonly total: number;
  readonly labelled: number;
  readonly unlabelled: { readonly count: number; readonly examples: readonly string[] };
  readonly mislabelled: { readonly count: number; readonly examples: readonly { readonly id: string; readonly have: string; readonly want: string }[] };
  /** Every object carries its right label. */
  readonly ok: boolean;
}

export function buildLabelAudit(ring: LabelSlotRing, resource: SlotResource, objects: readonly LabelledObject[], examples = 10): LabelAuditReport {
  const unlabelled: string[] = [];
  const mislabelled: { id: string; have: string; want: string }[] = [];
  let u = 0;
  let m = 0;
  for (const o of objects) {
    const s = labelState(ring, resource.key, o.meta, o.labels);
    if (s.state === "unlabelled") {
      u++;
      if (unlabelled.length < examples) unlabelled.push(o.id);
    } else if (s.state === "mislabelled") {
      m++;
      if (mislabelled.length < examples) mislabelled.push({ id: o.id, have: o.labels[ring.label] ?? "", want: s.want ?? "" });
    }
  }
  return {
    ring: `${ring.namespace}/${ring.name}`,
    resource: slotResourceName(resource),
    key: resource.key,
    label: ring.label,
    total: objects.length,
    labelled: objects.length - u - m,
    unlabelled: { count: u, examples: unlabelled },
    mislabelled: { count: m, examples: mislabelled },
    ok: u === 0 && m === 0,
  };
}

/** The label audit in plain words, for a terminal. */
export function formatLabelAudit(r: LabelAuditReport): string {
  const out = [`shardcar audit of the slot label ${r.label} on ${r.resource} (keyed by ${r.key}) for labels-mode ring ${r.ring}`, ""];
  out.push(`total ${r.total} objects: ${r.labelled} labelled, ${r.unlabelled.count} unlabelled, ${r.mislabelled.count} mislabelled`);
  if (r.unlabelled.count > 0) {
    out.push(`UNLABELLED: ${r.unlabelled.count} object${r.unlabelled.count === 1 ? " has" : "s have"} no ${r.label} and ${r.unlabelled.count === 1 ? "is" : "are"} in no cache (the manager's labeller labels them; see the ShardRing's Labelled condition)`);
    for (const id of r.unlabelled.examples) out.push(`  ${id}`);
    if (r.unlabelled.count > r.unlabelled.examples.length) out.push(`  … and ${r.unlabelled.count - r.unlabelled.examples.length} more`);
  }
  if (r.mislabelled.count > 0) {
    out.push(`MISLABELLED: ${r.mislabelled.count} object${r.mislabelled.count === 1 ? " carries" : "s carry"} a slot that is not ${r.mislabelled.count === 1 ? "its" : "theirs"}: the owner of that slot drops ${r.mislabelled.count === 1 ? "it" : "them"}, so ${r.mislabelled.count === 1 ? "it is" : "they are"} in no cache`);
    for (const x of r.mislabelled.examples) out.push(`  ${x.id}  has ${JSON.stringify(x.have)}, wants ${JSON.stringify(x.want)}`);
    if (r.mislabelled.count > r.mislabelled.examples.length) out.push(`  … and ${r.mislabelled.count - r.mislabelled.examples.length} more`);
  }
  out.push("", r.ok ? `OK: every object carries its right ${r.label}.` : `NOT OK: ${r.unlabelled.count + r.mislabelled.count} object(s) in no cache.`);
  return out.join("\n") + "\n";
}

/** Preflight: may the ring's pods switch to `shardcar.io/filter: labels`? */
export function judgeLabelAudit(r: LabelAuditReport): Check {
  const id = `slot-label/${r.resource}`;
  const title = `every ${r.resource} object carries its right ${r.label}`;
  if (r.ok) return { id, title, status: "pass", summary: `all ${r.total} objects carry it`, details: [] };
  const missing = r.unlabelled.count + r.mislabelled.count;
  const names = [...r.unlabelled.examples, ...r.mislabelled.examples.map((x) => `${x.id} (has ${JSON.stringify(x.have)}, wants ${JSON.stringify(x.want)})`)];
  return {
    id,
    title,
    status: "fail",
    summary: `${missing} of ${r.total} objects lack it (${r.unlabelled.count} unlabelled, ${r.mislabelled.count} mislabelled): switching the pods to labels now would leave them in no cache`,
    details: [
      `first ${names.length}: ${names.join(", ")}${missing > names.length ? ", …" : ""}`,
      "wait for the manager's backfill (the ShardRing's Labelled condition turns True; shardcar audit --ring lists what is left), then run preflight again",
    ],
  };
}

/** What the pods will shard, against what their ShardRing labels. */
export function judgeLabelRing(o: {
  readonly namespace: string;
  readonly ring: string;
  /** HTTP status of GET on the ShardRing. */
  readonly status: number;
  /** The decoded ring in labels mode; undefined when it is not (or its spec is refused). */
  readonly labels: LabelSlotRing | undefined;
  /** Why not, when `labels` is undefined and the ring exists. */
  readonly problem?: string | undefined;
  readonly wanted: readonly SlotResource[];
  /** The ring's `Labelled` condition, if any. */
  readonly condition?: { readonly status: string; readonly reason: string; readonly message: string } | undefined;
}): Check {
  const id = "label-ring";
  const title = `ShardRing ${o.namespace}/${o.ring} is in labels mode and labels every resource`;
  if (o.status === 404) {
    return { id, title, status: "fail", summary: "no such ShardRing", details: [`create it with spec.filter: labels and spec.resources listing ${o.wanted.map(describe).join(", ")}, then wait for its Labelled condition`] };
  }
  if (o.status !== 200) return { id, title, status: "fail", summary: `could not read it (HTTP ${o.status})`, details: [] };
  if (o.labels === undefined) {
    return { id, title, status: "fail", summary: o.problem ?? "spec.filter is not labels", details: ["set spec.filter: labels and spec.resources first: the manager labels nothing before that, and the pods would select objects that carry no label"] };
  }
  const ring = o.labels;
  const gaps: string[] = [];
  for (const w of o.wanted) {
    const r = ring.resources.find((x) => x.group === w.group && x.resource === w.resource);
    if (r === undefined) gaps.push(`${describe(w)} is not in spec.resources: nothing labels it`);
    else if (r.key !== w.key) gaps.push(`${slotResourceName(w)} is keyed by ${w.key} in the pods' shardcar.io/resources but by ${r.key} in spec.resources: the labels and the proxies' check would disagree`);
  }
  if (gaps.length > 0) return { id, title, status: "fail", summary: `${gaps.length} resource${gaps.length === 1 ? "" : "s"} of the pods ${gaps.length === 1 ? "is" : "are"} not labelled as they shard ${gaps.length === 1 ? "it" : "them"}`, details: gaps };
  const c = o.condition;
  if (c === undefined) return { id, title, status: "warn", summary: "no Labelled condition yet: is the manager running this ring?", details: [] };
  if (c.status !== "True") return { id, title, status: "warn", summary: `Labelled is ${c.status} (${c.reason})`, details: [c.message] };
  return { id, title, status: "pass", summary: `labels mode, ${ring.slotCount} slots, label ${ring.label}; Labelled: ${c.message}`, details: [] };
}

/** One webhook of a MutatingWebhookConfiguration, as far as coverage is concerned. */
export interface WebhookRulesObservation {
  readonly name: string;
  /** `clientConfig.service.path` or the path of `clientConfig.url`. */
  readonly path: string | undefined;
  readonly failurePolicy: string | undefined;
  readonly rules: readonly { readonly apiGroups: readonly string[]; readonly resources: readonly string[]; readonly operations: readonly string[] }[];
}

/** Whether the configuration sends CREATE and UPDATE of every resource of the ring to `/label-slots`. */
export function judgeLabelWebhook(config: { readonly name: string; readonly status: number; readonly webhooks: readonly WebhookRulesObservation[] }, resources: readonly SlotResource[], path: string): Check {
  const id = "label-webhook";
  const title = `webhook ${config.name} sends every labelled resource to ${path}`;
  if (config.status === 404) return { id, title, status: "fail", summary: "not installed", details: ["install manifests/components/label-slots with your resources in its rules (docs/label-slots.md)"] };
  if (config.status !== 200) return { id, title, status: "warn", summary: `could not read it (HTTP ${config.status})`, details: [] };
  const hooks = config.webhooks.filter((w) => w.path === path);
  if (hooks.length === 0) {
    return { id, title, status: "fail", summary: `no webhook calls ${path}`, details: ["add manifests/components/label-slots; without it every new object waits for the labeller, and a full update can drop its label (docs/label-slots.md)"] };
  }
  const has = (list: readonly string[], v: string): boolean => list.includes(v) || list.includes("*");
  const problems: string[] = [];
  for (const r of resources) {
    for (const op of ["CREATE", "UPDATE"]) {
      const covered = hooks.some((h) => h.rules.some((rule) => has(rule.apiGroups, r.group) && has(rule.resources, r.resource) && has(rule.operations, op)));
      if (!covered) problems.push(`${op} of ${slotResourceName(r)} is not sent: add apiGroups ["${r.group}"], resources ["${r.resource}"], operations [CREATE, UPDATE] to the rules of ${hooks.map((h) => h.name).join(", ")}`);
    }
  }
  const notes = hooks.filter((h) => h.failurePolicy !== "Ignore").map((h) => `${h.name} has failurePolicy ${h.failurePolicy ?? "Fail (the default)"}: a manager outage would block every write of these resources; use Ignore (the labeller catches up)`);
  if (problems.length > 0) return { id, title, status: "fail", summary: `${problems.length} resource operation${problems.length === 1 ? " is" : "s are"} not covered`, details: [...problems, ...notes] };
  return { id, title, status: notes.length > 0 ? "warn" : "pass", summary: `CREATE and UPDATE of ${resources.map(slotResourceName).join(", ")} go to ${hooks.map((h) => h.name).join(", ")}`, details: notes };
}

function describe(r: SlotResource): string {
  return `${slotResourceName(r)}${r.key === "uid" ? "" : `=${r.key}`}`;
}
