/**
 * Preflight verdicts, as pure functions of what the shell observed: whether
 * the server honours `shardSelector`, whether the RBAC is there, whether the
 * leader-election lock and the webhook are in place, and whether every
 * object carries a shard label. No I/O and no clock: `now` is a parameter.
 */
import { fnv1a64 } from "../shard/hash.ts";
import { complement, contains, makeRange, type Range } from "../shard/range.ts";
import type { ShardSpec } from "../shard/spec.ts";
import { inspectCertificate, isSignedBy, splitPemBundle } from "../pki/inspect.ts";
import { RING_GROUP, RING_PLURAL } from "../ring/names.ts";

export type CheckStatus = "pass" | "warn" | "fail" | "skip";

export interface Check {
  /** Stable id, e.g. `shard-selector/pods`, for `--json` consumers. */
  readonly id: string;
  readonly title: string;
  readonly status: CheckStatus;
  /** One sentence: the verdict in plain words. */
  readonly summary: string;
  /** Evidence and what to do, one line each. */
  readonly details: readonly string[];
}

// ---------------------------------------------------------------------------
// shardSelector support

/** The ranges a probe asks for: everything except the sample's own hash, so an ignoring server gives itself away. */
export function probeRanges(sampleKey: string | undefined): Range[] {
  if (sampleKey === undefined) return [makeRange(0n, 1n << 63n)];
  const h = fnv1a64(sampleKey);
  return complement([makeRange(h, h + 1n)]);
}

export interface ProbeObservation {
  readonly status: number;
  /** Status message of a failed request. */
  readonly message?: string | undefined;
  readonly sentSelector: string;
  /** `metadata.shardInfo.selector` of the answer, if any. */
  readonly shardInfoSelector?: string | undefined;
  /** Shard keys (uid or namespace) of the items returned. */
  readonly itemKeys: readonly string[];
}

export type ProbeOutcome = "honoured" | "ignored" | "unknown" | "wrong" | "error";

/**
 * One probe's reading. Typed lists say it with `shardInfo` (authoritative);
 * custom-resource lists never carry it, so their answer is inferred from the
 * items: the probe excluded a known object, and an ignoring server returns
 * it (or anything else out of range). With no object to exclude there is
 * nothing to infer from.
 */
export function classifyProbe(custom: boolean, hadSample: boolean, ranges: readonly Range[], p: ProbeObservation): ProbeOutcome {
  if (p.status !== 200) return "error";
  const outside = p.itemKeys.some((k) => !contains(ranges, fnv1a64(k)));
  if (!custom && p.shardInfoSelector !== undefined) {
    // shardInfo promises the items are filtered; an item outside contradicts it.
    return p.shardInfoSelector === p.sentSelector && !outside ? "honoured" : "wrong";
  }
  if (outside) return "ignored";
  if (!custom) return "ignored"; // a typed list without shardInfo was not filtered by the server
  return hadSample ? "honoured" : "unknown";
}

export function judgeShardSupport(
  resource: { readonly name: string; readonly custom: boolean },
  outcomes: readonly ProbeOutcome[],
  errors: readonly ProbeObservation[],
  requireServerFiltering: boolean,
): Check {
  const id = `shard-selector/${resource.name}`;
  const title = `server honours shardSelector for ${resource.name}`;
  const n = outcomes.length;
  const count = (o: ProbeOutcome): number => outcomes.filter((x) => x === o).length;
  const how = resource.custom ? "inferred from the items (custom resources never carry shardInfo)" : "judged by metadata.shardInfo";
  const firstError = errors[0];
  if (firstError !== undefined) {
    const why =
      firstError.status === 403
        ? "the kubeconfig's user may not list it"
        : firstError.status === 404
          ? "the server does not serve it"
          : firstError.status === 500 && /invalid shard selector/.test(firstError.message ?? "")
            ? "the server rejected shardcar's canonical selector (a server bug: report it)"
            : `HTTP ${firstError.status}`;
    return { id, title, status: "fail", summary: `could not probe ${resource.name}: ${why}`, details: [firstError.message ?? "", `selector sent: ${firstError.sentSelector}`].filter((s) => s !== "") };
  }
  if (count("wrong") > 0) {
    return {
      id,
      title,
      status: "fail",
      summary: `the server claims to filter ${resource.name} but returned objects outside the selector (${count("wrong")} of ${n} probes)`,
      details: ["shardcar's proxy still filters such answers, but the server is not trustworthy; report it with the probe above"],
    };
  }
  const honoured = count("honoured");
  const ignored = count("ignored");
  const degraded = requireServerFiltering ? "fail" : "warn";
  if (honoured === n) {
    return { id, title, status: "pass", summary: `honoured in ${n} of ${n} probes; ${how}`, details: ["the apiserver filters: controllers and the apiserver's egress are both sharded"] };
  }
  if (ignored === n) {
    return {
      id,
      title,
      status: degraded,
      summary: `ignored in ${n} of ${n} probes: the ShardedListAndWatch gate is off, or the server is older than 1.36; ${how}`,
      details: [
        "shardcar still works: each proxy filters, so controller memory is sharded, but every replica still receives every object",
        "to have the server filter: kube-apiserver --feature-gates=ShardedListAndWatch=true (1.36+), on every apiserver",
      ],
    };
  }
  if (honoured > 0 && ignored > 0) {
    return {
      id,
      title,
      status: degraded,
      summary: `mixed: honoured in ${honoured} of ${n} probes, ignored in ${ignored}: some apiservers have the gate, some do not (a skewed HA control plane); ${how}`,
      details: ["shardcar checks every answer and filters the unfiltered ones, so caches stay exact; enable the gate on every apiserver to save the bandwidth"],
    };
  }
  return {
    id,
    title,
    status: "warn",
    summary: `cannot tell: there is no ${resource.name} object to infer from (custom resources never carry shardInfo)`,
    details: ["create one object of this resource and run preflight again; shardcar filters either way"],
  };
}

// ---------------------------------------------------------------------------
// RBAC

export interface Permission {
  readonly verb: string;
  readonly group: string;
  readonly resource: string;
  /** Undefined: cluster-wide. */
  readonly namespace?: string | undefined;
  readonly name?: string | undefined;
  /** Why the sidecar or its controller needs it. */
  readonly why: string;
}

export interface RbacConfig {
  readonly resources: readonly { readonly resource: string; readonly group: string }[];
  readonly shards: ShardSpec;
  /** The controller's (and the ring's) namespace. */
  readonly namespace: string;
  /** The controller's leader-election lock, if it uses one. */
  readonly lock?: { readonly kind: LockKind; readonly name: string } | undefined;
}

/** Every permission an injected pod needs with its controller's ServiceAccount. */
export function requiredPermissions(c: RbacConfig): Permission[] {
  const out: Permission[] = [];
  for (const r of c.resources) {
    for (const verb of ["list", "watch"]) out.push({ verb, group: r.group, resource: r.resource, why: "the controller's informer, through the proxy (the proxy forwards the controller's own token)" });
  }
  if (c.shards.mode === "ring") {
    for (const verb of ["get", "list", "watch", "create", "update", "delete"]) {
      out.push({ verb, group: "coordination.k8s.io", resource: "leases", namespace: c.namespace, why: "the sidecar's member Lease (ClusterRole shardcar-sidecar)" });
    }
    for (const verb of ["get", "list", "watch"]) out.push({ verb, group: RING_GROUP, resource: RING_PLURAL, namespace: c.namespace, why: "the sidecar follows its ShardRing (ClusterRole shardcar-sidecar)" });
  }
  if (c.lock !== undefined) {
    // The proxy renames the lock per shard; a Role limited to the original
    // name (resourceNames) would refuse the renamed one.
    const ids = c.shards.mode === "index" ? [String(c.shards.index)] : c.shards.mode === "ordinal" ? Array.from({ length: c.shards.count }, (_, i) => String(i)) : [undefined];
    const lock = c.lock;
    const group = lock.kind === "leases" ? "coordination.k8s.io" : "";
    for (const id of ids) {
      for (const verb of ["get", "update"]) {
        out.push({
          verb,
          group,
          resource: lock.kind,
          namespace: c.namespace,
          name: id === undefined ? undefined : `${lock.name}-${id}`,
          why: id === undefined ? "the controller's leader-election lock, renamed per ring member (any name)" : `the controller's leader-election lock, renamed for shard ${id}`,
        });
      }
    }
    out.push({ verb: "create", group, resource: lock.kind, namespace: c.namespace, why: "the controller creates its renamed lock" });
  }
  // One row per distinct permission (ring mode and the lock overlap).
  const seen = new Set<string>();
  return out.filter((p) => {
    const k = `${p.verb} ${p.group} ${p.resource} ${p.namespace ?? ""} ${p.name ?? ""}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

export function describePermission(p: Permission): string {
  const res = p.group === "" ? p.resource : `${p.resource}.${p.group}`;
  return `${p.verb} ${res}${p.name === undefined ? "" : `/${p.name}`} ${p.namespace === undefined ? "(cluster-wide)" : `in ${p.namespace}`}`;
}

export interface AccessAnswer {
  readonly permission: Permission;
  /** Undefined when the review itself could not be made. */
  readonly allowed: boolean | undefined;
  readonly reason?: string | undefined;
}

export function judgeRbac(subject: string, answers: readonly AccessAnswer[]): Check {
  const id = "rbac";
  const title = `RBAC for ${subject}`;
  const unknown = answers.filter((a) => a.allowed === undefined);
  const denied = answers.filter((a) => a.allowed === false);
  if (unknown.length > 0 && denied.length === 0) {
    return { id, title, status: "warn", summary: `could not ask the server (${unknown[0]?.reason ?? "no answer"})`, details: ["preflight needs create on selfsubjectaccessreviews, or subjectaccessreviews for --service-account"] };
  }
  if (denied.length > 0) {
    return {
      id,
      title,
      status: "fail",
      summary: `${denied.length} of ${answers.length} permissions missing`,
      details: denied.map((a) => `missing: ${describePermission(a.permission)} — ${a.permission.why}`),
    };
  }
  return { id, title, status: "pass", summary: `all ${answers.length} permissions granted`, details: [] };
}

// ---------------------------------------------------------------------------
// leader-election lock

export type LockKind = "leases" | "configmaps" | "endpoints";

const LOCK_KIND_NAME: Record<LockKind, string> = { leases: "Lease", configmaps: "ConfigMap", endpoints: "Endpoints" };

export interface LockObservation {
  readonly namespace: string;
  readonly name: string;
  /** The kind configured (`--leader-election leases/<name>`). */
  readonly kind: LockKind;
  /** HTTP status of GET on each kind under that name (the configured one always present). */
  readonly found: Readonly<Partial<Record<LockKind, number>>>;
  readonly holder?: string | undefined;
}

export function judgeLock(o: LockObservation): Check {
  const id = "leader-election-lock";
  const title = `leader-election lock ${o.kind}/${o.name} in ${o.namespace}`;
  const renamed = `each replica will lead its own shard with ${o.kind}/${o.name}-<shard identity>`;
  const status = o.found[o.kind] ?? 0;
  const others = (Object.keys(o.found) as LockKind[]).filter((k) => k !== o.kind && o.found[k] === 200);
  if (status === 200) {
    return { id, title, status: "pass", summary: `exists, kind ${LOCK_KIND_NAME[o.kind]}${o.holder ? `, held by ${o.holder}` : ""}`, details: [renamed] };
  }
  if (others.length > 0) {
    return {
      id,
      title,
      status: "fail",
      summary: `no ${LOCK_KIND_NAME[o.kind]} of that name, but a ${others.map((k) => LOCK_KIND_NAME[k]).join(" and a ")} exists: the controller's lock is of another kind`,
      details: [`configure --leader-election ${others[0] ?? "leases"}/${o.name}; renaming the wrong kind leaves every replica contending for the one real lock`],
    };
  }
  if (status === 404) {
    return { id, title, status: "warn", summary: `no ${LOCK_KIND_NAME[o.kind]} of that name (yet)`, details: ["fine if the controller has never run; otherwise check the name, kind and namespace", renamed] };
  }
  return { id, title, status: "warn", summary: `could not read it (HTTP ${status})`, details: [] };
}

// ---------------------------------------------------------------------------
// webhook

export interface WebhookEntryObservation {
  readonly name: string;
  /** Decoded PEM, or undefined when empty or absent. */
  readonly caBundle: string | undefined;
  readonly service?: { readonly namespace: string; readonly name: string } | undefined;
  /** HTTP status of GET on that Service. */
  readonly serviceStatus?: number | undefined;
}

export interface WebhookObservation {
  readonly name: string;
  /** HTTP status of GET mutatingwebhookconfigurations/<name>. */
  readonly status: number;
  readonly webhooks: readonly WebhookEntryObservation[];
  /** The serving certificate (`tls.crt` of the manager's Secret), when readable. */
  readonly servingCert?: string | undefined;
}

// The manager renews its serving certificate 122 days before expiry and
// cert-manager by default 30 days before; a CA closer to its end than this
// means renewal is not happening.
const CA_WARN_MS = 14 * 24 * 3600_000;

export function judgeWebhook(o: WebhookObservation, now: number): Check {
  const id = "webhook";
  const title = `webhook ${o.name}`;
  if (o.status === 404) return { id, title, status: "fail", summary: "not installed", details: ["install it: kubectl apply -k manifests/overlays/single-replica (see docs/install.md)"] };
  if (o.status !== 200) return { id, title, status: "warn", summary: `could not read it (HTTP ${o.status})`, details: [] };
  if (o.webhooks.length === 0) return { id, title, status: "fail", summary: "installed, but it has no webhooks", details: [] };
  const problems: string[] = [];
  const notes: string[] = [];
  let worst: CheckStatus = "pass";
  const raise = (s: CheckStatus): void => {
    if (s === "fail" || (s === "warn" && worst === "pass")) worst = s;
  };
  for (const w of o.webhooks) {
    if (w.caBundle === undefined) {
      raise("fail");
      problems.push(`${w.name}: caBundle is empty: the manager (or cert-manager's CA injector) has not filled it in; the apiserver cannot call the webhook`);
      continue;
    }
    const certs = splitPemBundle(w.caBundle);
    const facts = certs.map(inspectCertificate);
    if (certs.length === 0 || facts.some((f) => f === undefined)) {
      raise("fail");
      problems.push(`${w.name}: caBundle is not a PEM certificate bundle`);
      continue;
    }
    const valid = facts.filter((f) => f !== undefined && f.notBefore.getTime() <= now && now < f.notAfter.getTime());
    if (valid.length === 0) {
      raise("fail");
      problems.push(`${w.name}: no certificate in caBundle is valid now (${facts.map((f) => `${f?.notBefore.toISOString()} to ${f?.notAfter.toISOString()}`).join("; ")})`);
      continue;
    }
    const last = Math.max(...valid.map((f) => f?.notAfter.getTime() ?? 0));
    if (last - now < CA_WARN_MS) {
      raise("warn");
      problems.push(`${w.name}: caBundle expires ${new Date(last).toISOString()}, in under 14 days: is rotation running?`);
    }
    if (!valid.some((f) => f?.isCa === true)) {
      raise("warn");
      problems.push(`${w.name}: no certificate in caBundle is a CA`);
    }
    if (o.servingCert !== undefined) {
      if (certs.some((ca) => isSignedBy(o.servingCert ?? "", ca))) notes.push(`${w.name}: the serving certificate chains to caBundle`);
      else {
        raise("fail");
        problems.push(`${w.name}: the serving certificate is not signed by any certificate in caBundle: the apiserver will refuse the TLS handshake`);
      }
    }
    if (w.service !== undefined && w.serviceStatus === 404) {
      raise("fail");
      problems.push(`${w.name}: Service ${w.service.namespace}/${w.service.name} does not exist`);
    }
  }
  const summary =
    worst === "pass"
      ? `installed; ${o.webhooks.length} webhook${o.webhooks.length === 1 ? "" : "s"} with a valid CA bundle`
      : `installed, but ${problems.length} problem${problems.length === 1 ? "" : "s"}`;
  if (o.servingCert === undefined) notes.push("serving certificate not readable; the chain from caBundle to it was not checked");
  return { id, title, status: worst, summary, details: [...problems, ...notes] };
}

// ---------------------------------------------------------------------------
// label-based sharding (convoy style)

export interface LabelObservation {
  readonly resource: string;
  readonly label: string;
  readonly total: number;
  readonly missing: number;
  /** A few `namespace/name` of objects without the label. */
  readonly examples: readonly string[];
}

export function judgeLabels(o: LabelObservation): Check {
  const id = `shard-label/${o.resource}`;
  const title = `every ${o.resource} object carries label ${o.label}`;
  if (o.missing === 0) return { id, title, status: "pass", summary: `all ${o.total} objects carry it`, details: [] };
  return {
    id,
    title,
    status: "fail",
    summary: `${o.missing} of ${o.total} objects lack it`,
    details: [`a label-scoped cache would never see them: ${o.examples.join(", ")}${o.missing > o.examples.length ? ", …" : ""}`],
  };
}

// ---------------------------------------------------------------------------

export interface PreflightReport {
  readonly server: string;
  readonly subject: string;
  readonly checks: readonly Check[];
  /** No check failed. */
  readonly ok: boolean;
}

const LABEL: Record<CheckStatus, string> = { pass: "PASS", warn: "WARN", fail: "FAIL", skip: "SKIP" };

export function formatPreflight(r: PreflightReport): string {
  const lines = [`shardcar preflight against ${r.server} (checking as ${r.subject})`, ""];
  for (const c of r.checks) {
    lines.push(`${LABEL[c.status]}  ${c.title}: ${c.summary}`);
    for (const d of c.details) lines.push(`      ${d}`);
  }
  const fails = r.checks.filter((c) => c.status === "fail").length;
  const warns = r.checks.filter((c) => c.status === "warn").length;
  lines.push("");
  lines.push(
    fails > 0
      ? `NOT READY: ${fails} check${fails === 1 ? "" : "s"} failed${warns > 0 ? `, ${warns} warning${warns === 1 ? "" : "s"}` : ""}. Fix the failures before enabling shardcar.`
      : warns > 0
        ? `READY, with ${warns} warning${warns === 1 ? "" : "s"}: shardcar will work; read the warnings above.`
        : "READY: every check passed.",
  );
  return lines.join("\n") + "\n";
}
