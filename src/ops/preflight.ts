/**
 * `shardcar preflight`'s shell: asks the API server what the checks in
 * `checks.ts` need (probe lists, access reviews, the lock, the webhook, the
 * labels) and hands the observations to those pure judges.
 */
import type { ApiClient } from "../kube/client.ts";
import { canonicalSelector } from "../shard/selector.ts";
import type { ShardedResource, ShardSpec } from "../shard/spec.ts";
import {
  classifyProbe,
  judgeLabels,
  judgeLock,
  judgeRbac,
  judgeShardSupport,
  judgeWebhook,
  probeRanges,
  requiredPermissions,
  type AccessAnswer,
  type Check,
  type LockKind,
  type Permission,
  type PreflightReport,
  type ProbeObservation,
  type ProbeOutcome,
  type WebhookEntryObservation,
} from "./checks.ts";
import { resolveResource, resourceName, resourcePath, statusMessage, type ResolvedResource } from "./kube.ts";
import { isRecord } from "../is-record.ts";
import { readLabelRing, runLabelAudit } from "./audit-run.ts";
import { judgeLabelAudit, judgeLabelRing, judgeLabelWebhook, type WebhookRulesObservation } from "./label-audit.ts";
import { listAll, objectKey, shardInfoOf } from "./lists.ts";
import { slotResourceName, type SlotResource } from "../ring/label-slots.ts";
import { LABEL_SLOTS_PATH } from "../webhook/server.ts";

export interface PreflightOptions {
  readonly resources: readonly ShardedResource[];
  readonly shards: ShardSpec;
  /** The controller's namespace (its ServiceAccount, lock and ring live there). */
  readonly namespace: string;
  /** Check as this ServiceAccount (SubjectAccessReview); otherwise as the kubeconfig's user (SelfSubjectAccessReview). */
  readonly serviceAccount?: string | undefined;
  /** The controller's leader-election lock (`--leader-election leases/<name>`). */
  readonly lock?: { readonly kind: LockKind; readonly name: string } | undefined;
  /** MutatingWebhookConfiguration name; undefined skips the check. */
  readonly webhook?: string | undefined;
  /** The manager's serving-certificate Secret, `namespace/name`. */
  readonly webhookSecret?: string | undefined;
  /** Label-based setups: the label every object must carry. */
  readonly shardLabel?: string | undefined;
  /**
   * Label slots (`shardcar.io/filter: labels`): the ring whose ShardRing must
   * be in labels mode and label every resource, whose objects must all carry
   * their slot, and whose resources the stamping webhook must cover.
   */
  readonly labelRing?: string | undefined;
  /** The resources with the keys the pods will use (`owner` included); default `resources`. */
  readonly slotResources?: readonly SlotResource[] | undefined;
  /** Sharded probe lists per resource (several, to catch a mixed HA control plane). */
  readonly probes: number;
  readonly requireServerFiltering: boolean;
  readonly now: () => number;
}

function errorCheck(id: string, title: string, e: unknown): Check {
  return { id, title, status: "fail", summary: e instanceof Error ? e.message : String(e), details: [] };
}

async function probeResource(client: ApiClient, r: ResolvedResource, opts: PreflightOptions): Promise<Check> {
  const name = resourceName(r);
  if (r.key === "owner") {
    // No shard selector can hash an ownerReference: nothing to probe.
    return { id: `shard-selector/${name}`, title: `server honours shardSelector for ${name}`, status: "skip", summary: `${name} is keyed by owner: in shardselector mode the proxy filters it by design (labels mode lets the server filter it)`, details: [] };
  }
  // One unsharded look for an object to exclude; then every probe asks for
  // everything but that object's hash. Probes are separate requests, so in a
  // mixed HA control plane they can land on different apiservers.
  const sample = await client.get(resourcePath(r), { query: { limit: "1" } });
  if (sample.status !== 200) {
    return judgeShardSupport({ name, custom: r.custom }, ["error"], [{ status: sample.status, message: statusMessage(sample.body), sentSelector: "(none: the unsharded sample list)", itemKeys: [] }], opts.requireServerFiltering);
  }
  const items = isRecord(sample.body) && Array.isArray(sample.body["items"]) ? sample.body["items"] : [];
  const sampleKey = items.length > 0 ? objectKey(items[0], r.key) : undefined;
  const ranges = probeRanges(sampleKey);
  const selector = canonicalSelector(r.key, ranges) ?? "";
  const outcomes: ProbeOutcome[] = [];
  const errors: ProbeObservation[] = [];
  for (let i = 0; i < opts.probes; i++) {
    const res = await client.get(resourcePath(r), { query: { limit: "1", shardSelector: selector } });
    const body = res.body;
    const obs: ProbeObservation = {
      status: res.status,
      message: statusMessage(body),
      sentSelector: selector,
      shardInfoSelector: shardInfoOf(body),
      itemKeys: (isRecord(body) && Array.isArray(body["items"]) ? body["items"] : []).map((o) => objectKey(o, r.key) ?? ""),
    };
    const outcome = classifyProbe(r.custom, sampleKey !== undefined, ranges, obs);
    outcomes.push(outcome);
    if (outcome === "error") errors.push(obs);
  }
  return judgeShardSupport({ name, custom: r.custom }, outcomes, errors, opts.requireServerFiltering);
}

async function reviewAccess(client: ApiClient, p: Permission, subject: { namespace: string; name: string } | undefined): Promise<AccessAnswer> {
  const resourceAttributes = { verb: p.verb, group: p.group, resource: p.resource, ...(p.namespace === undefined ? {} : { namespace: p.namespace }), ...(p.name === undefined ? {} : { name: p.name }) };
  const kind = subject === undefined ? "SelfSubjectAccessReview" : "SubjectAccessReview";
  const spec =
    subject === undefined
      ? { resourceAttributes }
      : {
          resourceAttributes,
          user: `system:serviceaccount:${subject.namespace}:${subject.name}`,
          groups: ["system:serviceaccounts", `system:serviceaccounts:${subject.namespace}`, "system:authenticated"],
        };
  try {
    const res = await client.raw("POST", `/apis/authorization.k8s.io/v1/${kind.toLowerCase()}s`, { body: { apiVersion: "authorization.k8s.io/v1", kind, spec } });
    const status = isRecord(res.body) && isRecord(res.body["status"]) ? res.body["status"] : undefined;
    if ((res.status !== 200 && res.status !== 201) || status === undefined || typeof status["allowed"] !== "boolean") {
      return { permission: p, allowed: undefined, reason: `${kind}: HTTP ${res.status}${statusMessage(res.body) === undefined ? "" : ` ${statusMessage(res.body)}`}` };
    }
    return { permission: p, allowed: status["allowed"], reason: typeof status["reason"] === "string" ? status["reason"] : undefined };
  } catch (e) {
    return { permission: p, allowed: undefined, reason: e instanceof Error ? e.message : String(e) };
  }
}

function lockPath(kind: LockKind, namespace: string, name: string): string {
  return kind === "leases" ? `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${name}` : `/api/v1/namespaces/${namespace}/${kind}/${name}`;
}

async function checkLock(client: ApiClient, namespace: string, lock: { kind: LockKind; name: string }): Promise<Check> {
  const found: Partial<Record<LockKind, number>> = {};
  const res = await client.get(lockPath(lock.kind, namespace, lock.name));
  found[lock.kind] = res.status;
  const spec = isRecord(res.body) && isRecord(res.body["spec"]) ? res.body["spec"] : undefined;
  let holder = typeof spec?.["holderIdentity"] === "string" ? spec["holderIdentity"] : undefined;
  if (holder === undefined && res.status === 200) {
    // ConfigMap and Endpoints locks keep the record in an annotation.
    const meta = isRecord(res.body) && isRecord(res.body["metadata"]) ? res.body["metadata"] : {};
    const rec = isRecord(meta["annotations"]) ? meta["annotations"]["control-plane.alpha.kubernetes.io/leader"] : undefined;
    if (typeof rec === "string") {
      try {
        const parsed: unknown = JSON.parse(rec);
        if (isRecord(parsed) && typeof parsed["holderIdentity"] === "string") holder = parsed["holderIdentity"];
      } catch {
        // not a leader record: no holder to report
      }
    }
  }
  if (res.status !== 200) {
    for (const kind of ["leases", "configmaps", "endpoints"] as const) {
      if (kind !== lock.kind) found[kind] = (await client.get(lockPath(kind, namespace, lock.name))).status;
    }
  }
  return judgeLock({ namespace, name: lock.name, kind: lock.kind, found, holder });
}

async function checkWebhook(client: ApiClient, name: string, secret: string | undefined, now: number): Promise<Check> {
  const cfg = await client.get(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${name}`);
  const raw = cfg.status === 200 && isRecord(cfg.body) && Array.isArray(cfg.body["webhooks"]) ? cfg.body["webhooks"] : [];
  const webhooks: WebhookEntryObservation[] = [];
  for (const w of raw) {
    if (!isRecord(w)) continue;
    const cc = isRecord(w["clientConfig"]) ? w["clientConfig"] : {};
    const b64 = typeof cc["caBundle"] === "string" ? cc["caBundle"] : "";
    const svc = isRecord(cc["service"]) && typeof cc["service"]["name"] === "string" && typeof cc["service"]["namespace"] === "string" ? { namespace: cc["service"]["namespace"], name: cc["service"]["name"] } : undefined;
    const serviceStatus = svc === undefined ? undefined : (await client.get(`/api/v1/namespaces/${svc.namespace}/services/${svc.name}`)).status;
    webhooks.push({ name: typeof w["name"] === "string" ? w["name"] : "?", caBundle: b64 === "" ? undefined : Buffer.from(b64, "base64").toString("utf8"), service: svc, serviceStatus });
  }
  let servingCert: string | undefined;
  const secretRef = secret ?? (webhooks[0]?.service === undefined ? undefined : `${webhooks[0].service.namespace}/shardcar-webhook-tls`);
  if (secretRef !== undefined) {
    const [ns, n] = secretRef.split("/");
    const s = await client.get(`/api/v1/namespaces/${ns ?? ""}/secrets/${n ?? ""}`);
    const data = isRecord(s.body) && isRecord(s.body["data"]) ? s.body["data"] : undefined;
    const crt = data?.["tls.crt"];
    if (s.status === 200 && typeof crt === "string") servingCert = Buffer.from(crt, "base64").toString("utf8");
  }
  return judgeWebhook({ name, status: cfg.status, webhooks, servingCert }, now);
}

async function checkLabels(client: ApiClient, r: ResolvedResource, label: string): Promise<Check> {
  let total = 0;
  let missing = 0;
  const examples: string[] = [];
  await listAll(client, resourcePath(r), { metadataOnly: true }, (item) => {
    total++;
    const meta = isRecord(item) && isRecord(item["metadata"]) ? item["metadata"] : {};
    const labels = isRecord(meta["labels"]) ? meta["labels"] : {};
    if (labels[label] === undefined) {
      missing++;
      if (examples.length < 5) examples.push(`${typeof meta["namespace"] === "string" ? `${meta["namespace"]}/` : ""}${String(meta["name"])}`);
    }
  });
  return judgeLabels({ resource: resourceName(r), label, total, missing, examples });
}

/** Label slots: the ring's spec, every object's label, the stamping webhook's rules. */
async function checkLabelSlots(client: ApiClient, ringName: string, wanted: readonly SlotResource[], opts: PreflightOptions): Promise<Check[]> {
  const checks: Check[] = [];
  try {
    const read = await readLabelRing(client, opts.namespace, ringName);
    checks.push(judgeLabelRing({ namespace: opts.namespace, ring: ringName, status: read.status, labels: read.ring, problem: read.problem, wanted, condition: read.condition }));
    const ring = read.ring;
    if (ring !== undefined) {
      for (const r of ring.resources.filter((x) => wanted.some((w) => w.group === x.group && w.resource === x.resource))) {
        try {
          checks.push(judgeLabelAudit(await runLabelAudit(client, ring, r, { examples: 10 })));
        } catch (e) {
          checks.push(errorCheck(`slot-label/${slotResourceName(r)}`, `every ${slotResourceName(r)} object carries its right ${ring.label}`, e));
        }
      }
    }
  } catch (e) {
    checks.push(errorCheck("label-ring", `ShardRing ${opts.namespace}/${ringName} is in labels mode`, e));
  }
  const name = opts.webhook ?? "shardcar";
  try {
    const cfg = await client.get(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${name}`);
    const raw = cfg.status === 200 && isRecord(cfg.body) && Array.isArray(cfg.body["webhooks"]) ? cfg.body["webhooks"] : [];
    const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);
    const webhooks: WebhookRulesObservation[] = raw.filter(isRecord).map((w) => {
      const cc = isRecord(w["clientConfig"]) ? w["clientConfig"] : {};
      const svcPath = isRecord(cc["service"]) && typeof cc["service"]["path"] === "string" ? cc["service"]["path"] : undefined;
      let path = svcPath;
      if (path === undefined && typeof cc["url"] === "string") {
        try {
          path = new URL(cc["url"]).pathname;
        } catch {
          path = undefined;
        }
      }
      const rules = Array.isArray(w["rules"]) ? w["rules"].filter(isRecord).map((r) => ({ apiGroups: strings(r["apiGroups"]), resources: strings(r["resources"]), operations: strings(r["operations"]) })) : [];
      return { name: typeof w["name"] === "string" ? w["name"] : "?", path, failurePolicy: typeof w["failurePolicy"] === "string" ? w["failurePolicy"] : undefined, rules };
    });
    checks.push(judgeLabelWebhook({ name, status: cfg.status, webhooks }, wanted, LABEL_SLOTS_PATH));
  } catch (e) {
    checks.push(errorCheck("label-webhook", `webhook ${name} sends every labelled resource to ${LABEL_SLOTS_PATH}`, e));
  }
  return checks;
}

/** Runs every configured check; never throws for an API failure (that becomes a failed check). */
export async function runPreflight(client: ApiClient, opts: PreflightOptions): Promise<PreflightReport> {
  const checks: Check[] = [];
  const resolved: ResolvedResource[] = [];
  for (const r of opts.resources) {
    const name = resourceName(r);
    try {
      const rr = await resolveResource(client, r);
      resolved.push(rr);
      // Labels mode filters with a label selector, which every server honours.
      if (opts.labelRing === undefined) checks.push(await probeResource(client, rr, opts));
    } catch (e) {
      checks.push(errorCheck(`shard-selector/${name}`, `server honours shardSelector for ${name}`, e));
    }
  }
  if (opts.labelRing !== undefined) checks.push(...(await checkLabelSlots(client, opts.labelRing, opts.slotResources ?? opts.resources, opts)));
  const subject = opts.serviceAccount === undefined ? undefined : { namespace: opts.namespace, name: opts.serviceAccount };
  const subjectName = subject === undefined ? "the kubeconfig's user" : `system:serviceaccount:${subject.namespace}:${subject.name}`;
  try {
    const perms = requiredPermissions({ resources: opts.resources, shards: opts.shards, namespace: opts.namespace, lock: opts.lock });
    const answers: AccessAnswer[] = [];
    for (const p of perms) answers.push(await reviewAccess(client, p, subject));
    checks.push(judgeRbac(subjectName, answers));
  } catch (e) {
    checks.push(errorCheck("rbac", `RBAC for ${subjectName}`, e));
  }
  if (opts.lock !== undefined) {
    try {
      checks.push(await checkLock(client, opts.namespace, opts.lock));
    } catch (e) {
      checks.push(errorCheck("leader-election-lock", `leader-election lock ${opts.lock.kind}/${opts.lock.name} in ${opts.namespace}`, e));
    }
  }
  if (opts.webhook !== undefined) {
    try {
      checks.push(await checkWebhook(client, opts.webhook, opts.webhookSecret, opts.now()));
    } catch (e) {
      checks.push(errorCheck("webhook", `webhook ${opts.webhook}`, e));
    }
  }
  if (opts.shardLabel !== undefined) {
    for (const r of resolved) {
      try {
        checks.push(await checkLabels(client, r, opts.shardLabel));
      } catch (e) {
        checks.push(errorCheck(`shard-label/${resourceName(r)}`, `every ${resourceName(r)} object carries label ${opts.shardLabel}`, e));
      }
    }
  }
  return { server: client.server.origin, subject: subjectName, checks, ok: checks.every((c) => c.status !== "fail") };
}
