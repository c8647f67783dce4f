/**
 * Renders every kustomization under manifests/ with the real `kubectl
 * kustomize` and checks what would be applied: kinds, the webhook's
 * selectors and failure policies (a manager outage must never block a pod
 * that did not opt in), the RBAC the sidecar and the manager need, the
 * manager's security settings, and that the example controllers' pod
 * templates are accepted by the webhook's own decision function.
 *
 * js-yaml (the sidecar's kubeconfig parser) parses the output: the
 * client's own loadAllYaml would round-trip it through typed models.
 */
import t from "tap";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { loadAll } from "js-yaml";
import { decideInjection } from "../../src/webhook/decide.ts";
import { parsePodSettings } from "../../src/webhook/annotations.ts";
import { defaultInjectorConfig } from "../../src/webhook/config.ts";
import type { JsonObject } from "../../src/webhook/json.ts";
import { LABEL_SLOTS_PATH, MUTATE_PODS_PATH } from "../../src/webhook/server.ts";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const KUBECTL = process.env["KUBECTL"] ?? "kubectl";

/** Loosely typed rendered object: these checks walk whatever kustomize printed. */
interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [k: string]: unknown;
}
interface Rule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}
interface Selector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}
interface Webhook {
  name: string;
  failurePolicy: string;
  sideEffects: string;
  timeoutSeconds: number;
  admissionReviewVersions: string[];
  reinvocationPolicy?: string;
  clientConfig: { service: { name: string; namespace: string; path: string; port: number } };
  rules: Array<{ apiGroups: string[]; apiVersions: string[]; operations: string[]; resources: string[]; scope?: string }>;
  namespaceSelector?: Selector;
  objectSelector?: Selector;
  matchConditions?: Array<{ name: string; expression: string }>;
}
interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
  ports?: Array<{ name?: string; containerPort: number }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
  securityContext?: Record<string, unknown>;
  readinessProbe?: { httpGet?: { path: string; port: string | number; scheme?: string } };
  livenessProbe?: { httpGet?: { path: string; port: string | number; scheme?: string } };
}
interface PodTemplate {
  metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: { serviceAccountName?: string; securityContext?: Record<string, unknown>; containers: Container[]; volumes?: Array<{ name: string; secret?: { secretName: string } }> };
}
interface Deployment extends Obj {
  spec: { replicas: number; selector: Selector; template: PodTemplate };
}

async function render(dir: string): Promise<Obj[]> {
  const { stdout } = await run(KUBECTL, ["kustomize", dir], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
  return (loadAll(stdout) as Obj[]).filter((o) => o !== null);
}

const find = <T extends Obj = Obj>(objs: Obj[], kind: string, name: string): T => {
  const hit = objs.find((o) => o.kind === kind && o.metadata.name === name);
  if (hit === undefined) throw new Error(`no ${kind} ${name} in the rendered output`);
  return hit as T;
};
const kinds = (objs: Obj[]): string[] => objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
const selects = (sel: Selector, labels: Record<string, string>): boolean =>
  Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v) &&
  (sel.matchExpressions ?? []).every((e) => {
    const has = Object.hasOwn(labels, e.key);
    switch (e.operator) {
      case "Exists":
        return has;
      case "DoesNotExist":
        return !has;
      case "In":
        return has && (e.values ?? []).includes(labels[e.key] ?? "");
      case "NotIn":
        return !has || !(e.values ?? []).includes(labels[e.key] ?? "");
      default:
        throw new Error(`unknown operator ${e.operator}`);
    }
  });
const sorted = (a: readonly string[] | undefined): string[] => [...(a ?? [])].sort();

const BASE_KINDS = [
  "ClusterRole/shardcar-manager",
  "ClusterRole/shardcar-sidecar",
  "ClusterRoleBinding/shardcar-manager",
  "CustomResourceDefinition/shardrings.shardcar.io",
  "Deployment/shardcar-manager",
  "MutatingWebhookConfiguration/shardcar",
  "Namespace/shardcar-system",
  "PodDisruptionBudget/shardcar-manager",
  "Role/shardcar-manager",
  "RoleBinding/shardcar-manager",
  "Service/shardcar-webhook",
  "ServiceAccount/shardcar-manager",
];
const EXAMPLE_KINDS = [
  "ClusterRole/shardcar-example-kube-state-metrics",
  "ClusterRoleBinding/shardcar-example-kube-state-metrics",
  "Deployment/kube-state-metrics",
  "Namespace/shardcar-example",
  "RoleBinding/shardcar-sidecar",
  "ServiceAccount/kube-state-metrics",
];

const TARGETS = ["manifests/base", "manifests/overlays/single-replica", "manifests/overlays/multi-replica", "test/manifests/compose/cert-manager", "test/manifests/compose/label-only", "test/manifests/compose/label-slots", "test/manifests/compose/metrics-auth"];
const rendered = new Map<string, Obj[]>();

t.before(async () => {
  for (const dir of TARGETS) rendered.set(dir, await render(dir));
});
const get = (dir: string): Obj[] => rendered.get(dir) ?? [];

t.test("every overlay and component renders with kubectl kustomize", async (t) => {
  for (const dir of TARGETS) t.ok(get(dir).length > 0, `${dir} renders objects`);
  t.same(kinds(get("manifests/base")), BASE_KINDS, "base: exactly the manager's objects");
  for (const dir of ["manifests/overlays/single-replica", "manifests/overlays/multi-replica"]) {
    t.same(kinds(get(dir)), [...BASE_KINDS, ...EXAMPLE_KINDS].sort(), `${dir}: base plus an example controller`);
  }
  t.same(kinds(get("test/manifests/compose/cert-manager")), [...BASE_KINDS, ...EXAMPLE_KINDS, "Certificate/shardcar-webhook", "Issuer/shardcar-selfsigned"].sort());
});

t.test("base: every namespaced object lives in shardcar-system, and that namespace is excluded from injection", async (t) => {
  const objs = get("manifests/base");
  const clusterScoped = new Set(["Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"]);
  for (const o of objs) if (!clusterScoped.has(o.kind)) t.equal(o.metadata.namespace, "shardcar-system", `${o.kind}/${o.metadata.name}`);
  const ns = find(objs, "Namespace", "shardcar-system");
  const mwc = find<Obj & { webhooks: Webhook[] }>(objs, "MutatingWebhookConfiguration", "shardcar");
  for (const w of mwc.webhooks) {
    t.notOk(selects(w.namespaceSelector ?? {}, { "kubernetes.io/metadata.name": "shardcar-system", ...ns.metadata.labels }), `${w.name} never sees the manager's namespace`);
    t.ok(selects(w.namespaceSelector ?? {}, { "kubernetes.io/metadata.name": "team-a" }), `${w.name} sees an ordinary namespace`);
  }
});

t.test("webhooks: a manager outage can never block a pod that did not opt in", async (t) => {
  for (const dir of TARGETS) {
    const mwc = find<Obj & { webhooks: Webhook[] }>(get(dir), "MutatingWebhookConfiguration", "shardcar");
    for (const w of mwc.webhooks) {
      // A plain pod, with no shardcar label, in an ordinary namespace.
      const pods = w.rules.some((r) => r.resources.includes("pods") || r.resources.includes("*"));
      const reachesPlainPods = pods && selects(w.objectSelector ?? {}, { app: "web" });
      t.ok(w.failurePolicy === "Ignore" || !reachesPlainPods, `${dir} ${w.name}: failurePolicy ${w.failurePolicy} only for pods labelled shardcar.io/inject`);
      if (reachesPlainPods) {
        t.ok(
          (w.matchConditions ?? []).some((c) => c.expression.includes("'shardcar.io/inject' in object.metadata.annotations")),
          `${dir} ${w.name}: unlabelled pods are sent only when annotated (matchConditions)`,
        );
      }
    }
  }
});

t.test("webhooks: the label webhook fails closed, the annotation webhook fails open, and they never overlap", async (t) => {
  const mwc = find<Obj & { webhooks: Webhook[] }>(get("manifests/base"), "MutatingWebhookConfiguration", "shardcar");
  const svc = find<Obj & { spec: { ports: Array<{ port: number; targetPort: string }> } }>(get("manifests/base"), "Service", "shardcar-webhook");
  t.same(mwc.webhooks.map((w) => w.name), ["label.inject.shardcar.io", "annotation.inject.shardcar.io"]);
  const [label, annotation] = mwc.webhooks;
  t.equal(label?.failurePolicy, "Fail");
  t.same(label?.objectSelector, { matchExpressions: [{ key: "shardcar.io/inject", operator: "Exists" }] });
  t.equal(annotation?.failurePolicy, "Ignore");
  t.same(annotation?.objectSelector, { matchExpressions: [{ key: "shardcar.io/inject", operator: "DoesNotExist" }] });
  const cases: Array<Record<string, string>> = [{ "shardcar.io/inject": "true" }, { "shardcar.io/inject": "false" }, {}];
  for (const labels of cases) {
    const n = mwc.webhooks.filter((w) => selects(w.objectSelector ?? {}, labels)).length;
    t.equal(n, 1, `labels ${JSON.stringify(labels)} reach exactly one webhook`);
  }
  for (const w of mwc.webhooks) {
    t.same(w.rules, [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"], scope: "Namespaced" }], `${w.name}: pod CREATE only`);
    t.equal(w.sideEffects, "None");
    t.same(w.admissionReviewVersions, ["v1"]);
    t.equal(w.reinvocationPolicy, "Never");
    t.ok(w.timeoutSeconds <= 10, `${w.name}: timeout ${w.timeoutSeconds}s keeps pod creation responsive`);
    t.same(w.clientConfig.service, { name: svc.metadata.name, namespace: "shardcar-system", path: MUTATE_PODS_PATH, port: svc.spec.ports[0]?.port });
  }
});

t.test("the sidecar's ClusterRole: its member Lease and read access to ShardRings, nothing else", async (t) => {
  const role = find<Obj & { rules: Rule[] }>(get("manifests/base"), "ClusterRole", "shardcar-sidecar");
  t.same(
    role.rules.map((r) => ({ groups: sorted(r.apiGroups), resources: sorted(r.resources), verbs: sorted(r.verbs), names: r.resourceNames })),
    [
      { groups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create", "delete", "get", "list", "update", "watch"], names: undefined },
      { groups: ["shardcar.io"], resources: ["shardrings"], verbs: ["get", "list", "watch"], names: undefined },
    ],
  );
});

t.test("the manager's RBAC: no wildcards, secrets only in its namespace and only its own, its own webhook configuration only", async (t) => {
  const objs = get("manifests/base");
  const cluster = find<Obj & { rules: Rule[] }>(objs, "ClusterRole", "shardcar-manager");
  const ns = find<Obj & { rules: Rule[] }>(objs, "Role", "shardcar-manager");
  for (const r of [...cluster.rules, ...ns.rules]) {
    t.notOk([...(r.apiGroups ?? []), ...(r.resources ?? []), ...r.verbs].includes("*"), `no wildcard in ${JSON.stringify(r)}`);
  }
  t.notOk(cluster.rules.some((r) => r.resources?.includes("secrets")), "no cluster-wide secrets");
  const mwcRule = cluster.rules.find((r) => r.resources?.includes("mutatingwebhookconfigurations"));
  t.same(mwcRule?.resourceNames, ["shardcar"], "only its own MutatingWebhookConfiguration");
  t.same(sorted(mwcRule?.verbs), ["get", "patch"]);
  t.ok(cluster.rules.some((r) => r.resources?.includes("leases") && ["get", "list", "watch", "create", "update"].every((v) => r.verbs.includes(v))), "leases: coordinate rings");
  t.ok(cluster.rules.some((r) => r.resources?.includes("shardrings") && ["get", "list", "watch", "create"].every((v) => r.verbs.includes(v))), "shardrings");
  t.ok(cluster.rules.some((r) => r.resources?.includes("shardrings/status") && r.verbs.includes("update")), "shardrings/status");
  t.ok(cluster.rules.some((r) => r.resources?.includes("events") && r.verbs.includes("create")), "events");
  const deployment = find<Deployment>(objs, "Deployment", "shardcar-manager");
  const secretArg = deployment.spec.template.spec.containers[0]?.args?.find((a) => a.startsWith("--secret="))?.slice("--secret=".length);
  const named = ns.rules.find((r) => r.resources?.includes("secrets") && r.resourceNames !== undefined);
  t.same(named?.resourceNames, [secretArg], "get/update only the Secret the manager is told to use");
  t.same(sorted(named?.verbs), ["get", "update"]);
  for (const kind of ["RoleBinding", "ClusterRoleBinding"]) {
    const b = find<Obj & { subjects: Array<{ kind: string; name: string; namespace: string }> }>(objs, kind, "shardcar-manager");
    t.same(b.subjects, [{ kind: "ServiceAccount", name: deployment.spec.template.spec.serviceAccountName, namespace: "shardcar-system" }], `${kind} binds the manager's ServiceAccount`);
  }
});

t.test("the manager Deployment: two replicas behind a PDB, non-root, read-only root, no capabilities, RuntimeDefault seccomp", async (t) => {
  const objs = get("manifests/base");
  const d = find<Deployment>(objs, "Deployment", "shardcar-manager");
  t.equal(d.spec.replicas, 2);
  const pod = d.spec.template;
  t.match(pod.spec.securityContext, { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } });
  t.equal(pod.spec.containers.length, 1);
  const c = pod.spec.containers[0];
  t.equal(c?.name, "manager", "named manager: the manager reads its own image from this container");
  t.match(c?.securityContext, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ["ALL"] } });
  t.equal(c?.args?.[0], "manager");
  t.ok(c?.args?.includes("--cert-mode=self"));
  t.same(c?.env?.map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]), [["POD_NAME", "metadata.name"], ["POD_NAMESPACE", "metadata.namespace"]]);
  t.same(c?.readinessProbe?.httpGet, { path: "/healthz", port: "webhook", scheme: "HTTPS" });
  t.same(c?.livenessProbe?.httpGet, { path: "/healthz", port: "webhook", scheme: "HTTPS" });
  t.ok(c?.ports?.some((p) => p.name === "webhook" && p.containerPort === 9443));
  const pdb = find<Obj & { spec: { minAvailable: number; selector: Selector } }>(objs, "PodDisruptionBudget", "shardcar-manager");
  t.equal(pdb.spec.minAvailable, 1);
  t.ok(selects(pdb.spec.selector, pod.metadata.labels ?? {}), "the PDB covers the manager's pods");
  const svc = find<Obj & { spec: { selector: Record<string, string> } }>(objs, "Service", "shardcar-webhook");
  t.ok(selects({ matchLabels: svc.spec.selector }, pod.metadata.labels ?? {}), "the Service selects the manager's pods");
});

t.test("the ShardRing CRD: shardcar.io/v1alpha1, namespaced, with a status subresource for the slot tables", async (t) => {
  type Crd = Obj & {
    spec: { group: string; scope: string; names: { kind: string; plural: string }; versions: Array<{ name: string; served: boolean; storage: boolean; subresources?: { status?: object }; schema: { openAPIV3Schema: JsonObject } }> };
  };
  const crd = find<Crd>(get("manifests/base"), "CustomResourceDefinition", "shardrings.shardcar.io");
  t.equal(crd.spec.group, "shardcar.io");
  t.equal(crd.spec.scope, "Namespaced");
  t.same(crd.spec.names, { kind: "ShardRing", listKind: "ShardRingList", plural: "shardrings", singular: "shardring", categories: ["shardcar"] });
  t.equal(crd.spec.versions.length, 1);
  const v = crd.spec.versions[0];
  t.match(v, { name: "v1alpha1", served: true, storage: true, subresources: { status: {} } });
  t.match(v?.schema.openAPIV3Schema, {
    properties: {
      spec: { properties: { slots: { type: "integer" }, handoff: { enum: ["overlap", "exclusive"] } } },
      status: {
        properties: {
          generation: { type: "integer" },
          committed: { properties: { generation: { type: "integer" }, members: { items: { properties: { name: { type: "string" }, slots: { type: "string" } } } } } },
          pending: { properties: { generation: { type: "integer" }, phase: { enum: ["Widening", "Narrowing"] } } },
          coverage: { properties: { readyRatio: { type: "number" }, overlapRatio: { type: "number" } } },
        },
      },
    },
  });
});

t.test("overlays: replica counts, and a PDB that never blocks a drain of a single replica", async (t) => {
  const single = get("manifests/overlays/single-replica");
  t.equal(find<Deployment>(single, "Deployment", "shardcar-manager").spec.replicas, 1);
  const pdb = find<Obj & { spec: Record<string, unknown> }>(single, "PodDisruptionBudget", "shardcar-manager");
  t.equal(pdb.spec["maxUnavailable"], 1);
  t.notOk("minAvailable" in pdb.spec);
  t.equal(find<Deployment>(single, "Deployment", "kube-state-metrics").spec.replicas, 1);
  const multi = get("manifests/overlays/multi-replica");
  t.equal(find<Deployment>(multi, "Deployment", "shardcar-manager").spec.replicas, 2);
  const ksm = find<Deployment>(multi, "Deployment", "kube-state-metrics");
  t.equal(ksm.spec.replicas, 3);
  t.equal(ksm.spec.template.metadata.annotations?.["shardcar.io/handoff"], "overlap");
});

t.test("the example controllers opt in correctly: the webhook's own decision injects their pods", async (t) => {
  for (const dir of ["manifests/overlays/single-replica", "manifests/overlays/multi-replica"]) {
    const objs = get(dir);
    const d = find<Deployment>(objs, "Deployment", "kube-state-metrics");
    const tpl = d.spec.template;
    t.equal(tpl.metadata.labels?.["shardcar.io/inject"], "true", `${dir}: labelled, so the fail-closed webhook handles it`);
    const parsed = parsePodSettings(tpl.metadata.annotations ?? {});
    t.ok(parsed.ok, `${dir}: annotations are valid ${parsed.ok ? "" : parsed.problems.join("; ")}`);
    // The pod the ReplicaSet controller would create from this template.
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        generateName: "kube-state-metrics-6c9d8f7b5-",
        namespace: d.metadata.namespace ?? "",
        labels: { ...tpl.metadata.labels, "pod-template-hash": "6c9d8f7b5" },
        annotations: tpl.metadata.annotations ?? {},
        ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: "kube-state-metrics-6c9d8f7b5", uid: "x", controller: true }],
      },
      spec: tpl.spec,
    } as unknown as JsonObject;
    const decision = decideInjection(pod, defaultInjectorConfig("ghcr.io/shardcar/shardcar:0.1.0"));
    t.ok("inject" in decision && decision.inject, `${dir}: injected (${JSON.stringify(decision).slice(0, 200)})`);
    if ("inject" in decision && decision.inject) t.equal(decision.plan.ring, "kube-state-metrics", "ring named after the Deployment");
    const sa = tpl.spec.serviceAccountName;
    const rb = find<Obj & { roleRef: { kind: string; name: string }; subjects: Array<{ kind: string; name: string; namespace: string }> }>(objs, "RoleBinding", "shardcar-sidecar");
    t.equal(rb.metadata.namespace, d.metadata.namespace, "the sidecar role is bound in the controller's namespace only");
    t.same(rb.roleRef, { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "shardcar-sidecar" });
    t.same(rb.subjects, [{ kind: "ServiceAccount", name: sa, namespace: d.metadata.namespace }], "bound to the controller's ServiceAccount");
  }
});

t.test("cert-manager component: a Certificate for the Service, its CA injected into caBundle, mounted and used by the manager", async (t) => {
  const objs = get("test/manifests/compose/cert-manager");
  const cert = find<Obj & { spec: { secretName: string; dnsNames: string[]; issuerRef: { kind: string; name: string } } }>(objs, "Certificate", "shardcar-webhook");
  t.equal(cert.metadata.namespace, "shardcar-system");
  t.ok(cert.spec.dnsNames.includes("shardcar-webhook.shardcar-system.svc"), "valid for the name the apiserver dials");
  find(objs, cert.spec.issuerRef.kind, cert.spec.issuerRef.name);
  const mwc = find(objs, "MutatingWebhookConfiguration", "shardcar");
  t.equal(mwc.metadata.annotations?.["cert-manager.io/inject-ca-from"], `${cert.metadata.namespace ?? ""}/${cert.metadata.name}`);
  const d = find<Deployment>(objs, "Deployment", "shardcar-manager");
  const c = d.spec.template.spec.containers[0];
  t.ok(c?.args?.includes("--cert-mode=cert-manager"));
  const dir = c?.args?.find((a) => a.startsWith("--cert-dir="))?.slice("--cert-dir=".length);
  const mount = c?.volumeMounts?.find((m) => m.mountPath === dir);
  t.ok(mount, "--cert-dir is a mounted volume");
  t.equal(d.spec.template.spec.volumes?.find((v) => v.name === mount?.name)?.secret?.secretName, cert.spec.secretName, "the volume is cert-manager's Secret");
  const role = find<Obj & { rules: Rule[] }>(objs, "Role", "shardcar-manager");
  t.notOk(role.rules.some((r) => r.resources?.includes("secrets")), "no Secret permissions left to the manager");
});

t.test("metrics-auth component: the manager and its sidecars guard /metrics, the manager may ask the reviews, and a scraper role exists", async (t) => {
  const objs = get("test/manifests/compose/metrics-auth");
  t.same(kinds(objs), [...BASE_KINDS, ...EXAMPLE_KINDS, "ClusterRole/shardcar-metrics-auth", "ClusterRole/shardcar-metrics-reader", "ClusterRoleBinding/shardcar-manager-metrics-auth"].sort());
  const d = find<Obj & { spec: { template: { spec: { containers: Array<{ name: string; args?: string[] }> } } } }>(objs, "Deployment", "shardcar-manager");
  const args = d.spec.template.spec.containers.find((c) => c.name === "manager")?.args ?? [];
  t.ok(args.includes("--metrics-auth") && args.includes("--sidecar-metrics-auth"), "both flags, after the base's own");
  t.ok(args.includes("--cert-mode=self"), "the base's args are kept");
  const auth = find<Obj & { rules: Rule[] }>(objs, "ClusterRole", "shardcar-metrics-auth");
  t.same(auth.rules.map((r) => [r.apiGroups, r.resources, r.verbs]), [[["authentication.k8s.io"], ["tokenreviews"], ["create"]], [["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]]]);
  const binding = find<Obj & { roleRef: { name: string }; subjects: Array<{ name: string; namespace: string }> }>(objs, "ClusterRoleBinding", "shardcar-manager-metrics-auth");
  t.same([binding.roleRef.name, binding.subjects], ["shardcar-metrics-auth", [{ kind: "ServiceAccount", name: "shardcar-manager", namespace: "shardcar-system" }]]);
  const reader = find<Obj & { rules: Array<{ nonResourceURLs?: string[]; verbs: string[] }> }>(objs, "ClusterRole", "shardcar-metrics-reader");
  t.same(reader.rules, [{ nonResourceURLs: ["/metrics"], verbs: ["get"] }]);
});

t.test("label-only component: only the label webhook remains", async (t) => {
  const mwc = find<Obj & { webhooks: Webhook[] }>(get("test/manifests/compose/label-only"), "MutatingWebhookConfiguration", "shardcar");
  t.same(mwc.webhooks.map((w) => w.name), ["label.inject.shardcar.io"]);
});

t.test("label-slots component: the stamping webhook never blocks a write, is sent only the updates that can move a label, and the labeller's RBAC is aggregated", async (t) => {
  const objs = get("test/manifests/compose/label-slots");
  t.same(kinds(objs), [...BASE_KINDS, ...EXAMPLE_KINDS, "ClusterRole/shardcar-label-slots-example", "ClusterRole/shardcar-manager-label-slots", "ClusterRoleBinding/shardcar-manager-label-slots"].sort());
  const mwc = find<Obj & { webhooks: Webhook[] }>(objs, "MutatingWebhookConfiguration", "shardcar");
  t.same(sorted(mwc.webhooks.map((w) => w.name)), ["annotation.inject.shardcar.io", "label.inject.shardcar.io", "slots.shardcar.io"], "beside the injection webhooks, in the same configuration (one caBundle)");
  const slots = mwc.webhooks.find((w) => w.name === "slots.shardcar.io");
  const inject = mwc.webhooks.find((w) => w.name === "label.inject.shardcar.io");
  t.equal(slots?.failurePolicy, "Ignore", "a manager outage must not block the controllers' writes");
  t.same(slots?.clientConfig.service, { ...inject?.clientConfig.service, path: LABEL_SLOTS_PATH }, "the same Service, the stamping path");
  t.equal(slots?.sideEffects, "None");
  t.equal(slots?.reinvocationPolicy, "IfNeeded");
  t.ok((slots?.timeoutSeconds ?? 99) <= 5, "a short timeout: it is on every write of these resources");
  for (const r of slots?.rules ?? []) t.same(sorted(r.operations), ["CREATE", "UPDATE"], `${r.resources.join(",")}: CREATE and UPDATE`);
  t.same(slots?.rules.flatMap((r) => r.resources), ["gadgets", "widgets", "configmaps"], "the user's resources, from their patch");
  t.match(slots?.matchConditions?.[0]?.expression, /request\.operation != 'UPDATE'/);
  t.match(slots?.matchConditions?.[0]?.expression, /shard\.shardcar\.io\//);
  t.match(slots?.matchConditions?.[0]?.expression, /ownerReferences/);
  const role = find<Obj & { aggregationRule: { clusterRoleSelectors: Selector[] } }>(objs, "ClusterRole", "shardcar-manager-label-slots");
  const mine = find<Obj & { rules: Rule[] }>(objs, "ClusterRole", "shardcar-label-slots-example");
  t.ok(role.aggregationRule.clusterRoleSelectors.some((sel) => selects(sel, mine.metadata.labels ?? {})), "the user's ClusterRole is aggregated");
  for (const r of mine.rules) t.same(sorted(r.verbs), ["list", "patch", "watch"], "metadata-only list+watch and label patches, nothing else");
  const binding = find<Obj & { roleRef: { name: string }; subjects: Array<{ name: string; namespace: string }> }>(objs, "ClusterRoleBinding", "shardcar-manager-label-slots");
  t.equal(binding.roleRef.name, role.metadata.name);
  t.same(binding.subjects.map((x) => `${x.namespace}/${x.name}`), ["shardcar-system/shardcar-manager"]);
});
