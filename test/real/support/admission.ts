/**
 * The injection rig of the real-server lane: a private realapi whose
 * webhook Service map points `shardcar-system/shardcar-webhook` at a loopback
 * port, shardcar's manifests applied to it, and `shardcar manager` running as
 * the pod its Deployment makes, on the one-pod kubelet
 * (test/support/kubelet/), so that the apiserver's real admission chain
 * calls the real webhook.
 *
 * What a cluster's controllers would do is done here, in their place: the
 * Deployment and ReplicaSet controllers (a ReplicaSet, then a Pod from the
 * template), the ServiceAccount admission plugin (the `kube-api-access-*`
 * volume, test/support/service-account-admission.ts), the root CA publisher
 * (`kube-root-ca.crt` in each namespace), and, in cert-manager mode,
 * cert-manager and its CA injector (the serving certificate in a Secret, and
 * `caBundle`).
 */
import { execFile, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { promisify } from "node:util";
import type { V1Pod } from "@kubernetes/client-node";
import { dump, loadAll } from "js-yaml";
import { createLocalCa } from "../../../src/pki/ca.ts";
import { NodePort, kubeletUnavailable, runPod, type ImageSpec, type RunningPod } from "../../support/kubelet/pod.ts";
import { admitServiceAccount } from "../../support/service-account-admission.ts";
import { obj, str, type JsonObject } from "../../../src/webhook/json.ts";
import { startPrivateRealApi, serviceAccountToken, type ExtraToken, type PrivateRealApi } from "./private-realapi.ts";
import { HttpError, call, callJson, waitUntil, type KubeObject, type Reply, type Target } from "./realapi.ts";

const exec = promisify(execFile);

export const ROOT = resolve(import.meta.dirname, "..", "..", "..");
export const MANAGER_NAMESPACE = "shardcar-system";
export const WEBHOOK_SERVICE = `${MANAGER_NAMESPACE}/shardcar-webhook:443`;
export const WEBHOOK_CONFIG = "shardcar";
export const LABEL_WEBHOOK = "label.inject.shardcar.io";
export const ANNOTATION_WEBHOOK = "annotation.inject.shardcar.io";

export type CertMode = "self" | "cert-manager";

/** What to kustomize: a directory, or a kustomization made of `resources` and `components` (as the install docs compose them). */
export type Kustomization = { readonly dir: string } | { readonly resources: readonly string[]; readonly components?: readonly string[] };

/** Runs `fn` with a directory holding `what`; a composed kustomization is written to a scratch directory first. */
export async function withKustomization<T>(what: Kustomization, fn: (dir: string) => Promise<T>): Promise<T> {
  if ("dir" in what) return fn(what.dir);
  const dir = mkdtempSync(join(tmpdir(), "shardcar-kustomize-"));
  try {
    writeFileSync(
      join(dir, "kustomization.yaml"),
      // kustomize takes no absolute paths; relative ones may leave the root for directories.
      dump({
        apiVersion: "kustomize.config.k8s.io/v1beta1",
        kind: "Kustomization",
        resources: what.resources.map((r) => relative(dir, r)),
        ...(what.components === undefined ? {} : { components: what.components.map((c) => relative(dir, c)) }),
      }),
    );
    return await fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `kubectl kustomize`, parsed. */
export function render(what: Kustomization): Promise<KubeObject[]> {
  return withKustomization(what, async (dir) => {
    const { stdout } = await exec("kubectl", ["kustomize", dir], { maxBuffer: 16 << 20 });
    return loadAll(stdout).filter((o): o is KubeObject => typeof o === "object" && o !== null);
  });
}

/** The manifests the rig installs in each certificate mode, as `kubectl kustomize` renders them. */
export function renderInstall(mode: CertMode): Promise<KubeObject[]> {
  const overlay = join(ROOT, "manifests", "overlays", "single-replica");
  if (mode === "self") return render({ dir: overlay });
  return render({ resources: [overlay], components: [join(ROOT, "manifests", "components", "cert-manager")] });
}

/** Why the injection rig cannot run here (a tool it needs is missing), or undefined. */
export function rigUnavailable(): string | undefined {
  const kubelet = kubeletUnavailable();
  if (kubelet !== undefined) return kubelet;
  if (spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" }).status !== 0) return "kubectl is not installed (it renders and applies the manifests)";
  if (!existsSync(join(ROOT, "dist", "cli", "bin.js"))) return "dist/cli/bin.js is missing: run npm run build (test/real/run.sh does)";
  return undefined;
}

/** `kubectl ARGS` against `api`; rejects with kubectl's stderr. */
export async function kubectl(api: PrivateRealApi, args: readonly string[], input?: string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = execFile("kubectl", ["--kubeconfig", api.kubeconfig, ...args], { maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      // kubectl diff exits 1 with the difference on stdout.
      if (err !== null) reject(new Error(`kubectl ${args.join(" ")}: ${stderr || err.message}${stdout === "" ? "" : `\n${stdout.slice(0, 4000)}`}`));
      else resolvePromise(stdout);
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/**
 * Minimal stand-ins for cert-manager's CRDs (the cluster would have
 * cert-manager installed): enough for its Issuer and Certificate to be
 * applied and stored. Nothing acts on them but the rig.
 */
export const CERT_MANAGER_CRDS: KubeObject[] = ["Issuer", "Certificate"].map((kind) => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: `${kind.toLowerCase()}s.cert-manager.io` },
  spec: {
    group: "cert-manager.io",
    names: { kind, listKind: `${kind}List`, plural: `${kind.toLowerCase()}s`, singular: kind.toLowerCase() },
    scope: "Namespaced",
    versions: [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } }],
  },
}));

/** Installs CRDs and waits until each is served. */
export async function installCrds(api: Target, crds: readonly KubeObject[]): Promise<void> {
  for (const crd of crds) {
    await callJson(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).catch((e: unknown) => {
      if (!(e instanceof HttpError && e.status === 409)) throw e;
    });
    const spec = crd["spec"] as { group: string; names: { plural: string }; versions: Array<{ name: string }> };
    const path = `/apis/${spec.group}/${spec.versions[0]?.name ?? "v1"}/${spec.names.plural}`;
    await waitUntil(`${path} is served`, async () => (await call(api, path)).status === 200, 30_000);
  }
}

/** The shardcar image, as this worktree's build: the Dockerfile's ENTRYPOINT, ENV, WORKDIR and USER, with /app = the worktree. */
export function shardcarImage(): ImageSpec {
  return {
    entrypoint: [process.execPath, "--enable-source-maps", "/app/dist/cli/bin.js"],
    cmd: ["--help"],
    env: { PATH: "/usr/local/bin", NODE_ENV: "production", NODE_OPTIONS: "" },
    workingDir: "/app",
    user: { uid: 65532, gid: 65532 },
    files: { "/app": ROOT },
  };
}

/** The kubelet's view of ConfigMaps and Secrets: GET from the apiserver. */
export function apiReader(api: Target) {
  return async (kind: "ConfigMap" | "Secret", namespace: string, name: string): Promise<Record<string, unknown> | undefined> => {
    const r = await call(api, `/api/v1/namespaces/${namespace}/${kind === "ConfigMap" ? "configmaps" : "secrets"}/${name}`);
    if (r.status === 404) return undefined;
    if (r.status !== 200) throw new Error(`GET ${kind} ${namespace}/${name}: ${r.status} ${r.body.toString("utf8").slice(0, 200)}`);
    return JSON.parse(r.body.toString("utf8")) as Record<string, unknown>;
  };
}

/** Creates `name` with `labels` (idempotent), and its `kube-root-ca.crt` as the root CA publisher would. */
export async function ensureNamespace(api: PrivateRealApi, name: string, labels: Record<string, string> = {}): Promise<void> {
  await callJson(api.admin, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name, labels } }).catch((e: unknown) => {
    if (!(e instanceof HttpError && e.status === 409)) throw e;
  });
  await callJson(api.admin, "POST", `/api/v1/namespaces/${name}/configmaps`, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "kube-root-ca.crt" }, data: { "ca.crt": api.caPem } }).catch((e: unknown) => {
    if (!(e instanceof HttpError && e.status === 409)) throw e;
  });
}

/** POSTs a pod; the reply as the apiserver gave it (admission errors included). */
export async function createPod(api: Target, pod: JsonObject, opts: { dryRun?: boolean } = {}): Promise<Reply> {
  const ns = str(obj(pod["metadata"])?.["namespace"]) ?? "default";
  return call(api, `/api/v1/namespaces/${ns}/pods${opts.dryRun === true ? "?dryRun=All" : ""}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(pod),
  });
}

/** The counts of `shardcar_inject_webhook_reviews_total`, by `result/reason`, plus `total`. */
export type ReviewCounts = ReadonlyMap<string, number>;

export function parseReviewCounts(metrics: string): ReviewCounts {
  const counts = new Map<string, number>([["total", 0]]);
  for (const line of metrics.split("\n")) {
    const m = /^shardcar_inject_webhook_reviews_total\{([^}]*)\} (\S+)$/.exec(line);
    if (m === null) continue;
    const labels = Object.fromEntries([...(m[1] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    const n = Number(m[2]);
    counts.set(`${labels["result"] ?? ""}/${labels["reason"] ?? ""}`, n);
    counts.set("total", (counts.get("total") ?? 0) + n);
  }
  return counts;
}

export interface RigOptions {
  readonly mode: CertMode;
  /**
   * Where the manifests come from: rendered by the rig (and applied with
   * `kubectl apply -f`), or already applied by the caller (§4: `kubectl apply
   * -k`), in which case the rig reads the Deployment back from the server.
   */
  readonly installed?: boolean;
  /** Extra service-account tokens for the server's token file (pods the test runs). */
  readonly tokens?: readonly ExtraToken[];
  /** Called with the private server before anything is installed (e.g. to `kubectl apply -k`). */
  readonly install?: (api: PrivateRealApi) => Promise<void>;
}

export class AdmissionRig {
  readonly api: PrivateRealApi;
  readonly webhook: NodePort;
  readonly mode: CertMode;
  readonly managerToken: ExtraToken;
  /** The manager Deployment as applied (read back from the server). */
  deployment: KubeObject = {};
  manager: RunningPod | undefined;
  managerPod: V1Pod | undefined;
  #replicaSet: KubeObject | undefined;
  #metricsPort: number | undefined;
  #podSeq = 0;

  private constructor(api: PrivateRealApi, webhook: NodePort, mode: CertMode, managerToken: ExtraToken) {
    this.api = api;
    this.webhook = webhook;
    this.mode = mode;
    this.managerToken = managerToken;
  }

  static async start(opts: RigOptions): Promise<AdmissionRig> {
    const webhook = await NodePort.open();
    const managerToken = serviceAccountToken(MANAGER_NAMESPACE, "shardcar-manager");
    let api: PrivateRealApi | undefined;
    try {
      api = await startPrivateRealApi({ webhookServices: { [WEBHOOK_SERVICE]: webhook.port }, tokens: [managerToken, ...(opts.tokens ?? [])] });
      const rig = new AdmissionRig(api, webhook, opts.mode, managerToken);
      await rig.#install(opts);
      return rig;
    } catch (e) {
      await api?.stop();
      await webhook.close();
      throw e;
    }
  }

  async #install(opts: RigOptions): Promise<void> {
    const api = this.api;
    await installCrds(api.admin, CERT_MANAGER_CRDS);
    if (opts.install !== undefined) await opts.install(api);
    if (opts.installed !== true) {
      const objects = await renderInstall(this.mode);
      if (this.mode === "cert-manager") await this.#actAsCertManager(objects);
      await kubectl(api, ["apply", "-f", "-"], objects.map((o) => dump(o)).join("---\n"));
    } else if (this.mode === "cert-manager") {
      throw new Error("the rig plays cert-manager only for manifests it renders");
    }
    this.deployment = await callJson(api.admin, "GET", `/apis/apps/v1/namespaces/${MANAGER_NAMESPACE}/deployments/shardcar-manager`);
    await ensureNamespace(api, MANAGER_NAMESPACE);
  }

  /**
   * cert-manager's part: a serving certificate for the Certificate's dnsNames
   * in its Secret, and the CA injector's `caBundle` on every webhook of the
   * configuration that asks for it (`cert-manager.io/inject-ca-from`).
   */
  async #actAsCertManager(objects: KubeObject[]): Promise<void> {
    const cert = objects.find((o) => o.kind === "Certificate");
    const spec = cert?.["spec"] as { secretName: string; dnsNames: string[] } | undefined;
    if (cert === undefined || spec === undefined) throw new Error("the cert-manager render has no Certificate");
    const now = new Date();
    const ca = await createLocalCa("cert-manager selfsigned (test)", now, 3600_000);
    const tls = await ca.issue({ commonName: spec.dnsNames[0] ?? "", names: spec.dnsNames, now, validityMs: 3600_000 });
    const b64 = (s: string): string => Buffer.from(s).toString("base64");
    await ensureNamespace(this.api, MANAGER_NAMESPACE, { "shardcar.io/injection": "disabled" });
    await callJson(this.api.admin, "POST", `/api/v1/namespaces/${MANAGER_NAMESPACE}/secrets`, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: spec.secretName, annotations: { "cert-manager.io/certificate-name": cert.metadata?.name ?? "" } },
      type: "kubernetes.io/tls",
      data: { "tls.crt": b64(tls.cert), "tls.key": b64(tls.key), "ca.crt": b64(ca.certPem) },
    });
    const mwc = objects.find((o) => o.kind === "MutatingWebhookConfiguration");
    const from = mwc?.metadata?.annotations?.["cert-manager.io/inject-ca-from"];
    if (from !== `${MANAGER_NAMESPACE}/${cert.metadata?.name ?? ""}`) throw new Error(`the webhook configuration's cert-manager.io/inject-ca-from is ${JSON.stringify(from)}, not the Certificate`);
    for (const w of (mwc?.["webhooks"] ?? []) as Array<{ clientConfig: { caBundle?: string } }>) w.clientConfig.caBundle = b64(ca.certPem);
  }

  /** The images this node has: shardcar's (whatever reference the Deployment gives it) and the test's own. */
  images(extra: Readonly<Record<string, ImageSpec>> = {}): (ref: string) => ImageSpec | undefined {
    const managerImage = this.#template().spec?.containers[0]?.image;
    return (ref) => (ref === managerImage ? shardcarImage() : extra[ref]);
  }

  #template(): V1Pod {
    return (this.deployment["spec"] as { template: V1Pod }).template;
  }

  /**
   * A new manager pod, as the ReplicaSet controller makes it from the
   * Deployment's template (admitted through the apiserver like any pod),
   * then run. `extraArgs` are appended to the container's args (an operator
   * editing the Deployment).
   */
  async startManager(extraArgs: readonly string[] = []): Promise<RunningPod> {
    const api = this.api;
    const template = structuredClone(this.#template()) as JsonObject & V1Pod;
    const hash = "6d4cf56db6";
    let rsObj = this.#replicaSet;
    if (rsObj === undefined) {
      const md = this.deployment.metadata ?? {};
      rsObj = await callJson<KubeObject>(api.admin, "POST", `/apis/apps/v1/namespaces/${MANAGER_NAMESPACE}/replicasets`, {
        apiVersion: "apps/v1",
        kind: "ReplicaSet",
        metadata: {
          name: `shardcar-manager-${hash}`,
          labels: { ...(template.metadata?.labels ?? {}), "pod-template-hash": hash },
          ownerReferences: [{ apiVersion: "apps/v1", kind: "Deployment", name: md.name ?? "", uid: md.uid ?? "", controller: true, blockOwnerDeletion: true }],
        },
        spec: { replicas: 1, selector: (this.deployment["spec"] as JsonObject)["selector"], template },
      });
      this.#replicaSet = rsObj;
    }
    const rs = rsObj.metadata ?? {};
    const c = template.spec?.containers[0];
    if (c !== undefined && extraArgs.length > 0) c.args = [...(c.args ?? []), ...extraArgs];
    const pod = admitServiceAccount({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: `shardcar-manager-${hash}-${(++this.#podSeq).toString(36).padStart(5, "x")}`,
        namespace: MANAGER_NAMESPACE,
        labels: { ...(template.metadata?.labels ?? {}), "pod-template-hash": hash },
        ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: rs.name ?? "", uid: rs.uid ?? "", controller: true, blockOwnerDeletion: true }],
      },
      spec: template.spec as unknown as JsonObject,
    });
    const reply = await createPod(api.admin, pod);
    if (reply.status !== 201) throw new Error(`creating the manager pod: ${reply.status} ${reply.body.toString("utf8")}`);
    const stored = JSON.parse(reply.body.toString("utf8")) as V1Pod;
    this.managerPod = stored;
    const running = await runPod(stored, {
      images: this.images(),
      apiserverPort: api.port,
      read: apiReader(api.admin),
      token: this.managerToken.token,
      restartBackoffMs: 500,
    });
    this.manager = running;
    this.#metricsPort = undefined;
    running.serve(this.webhook, 9443);
    try {
      await running.waitFor("the manager is ready", () => running.state("manager").ready, 60_000);
      await this.waitServing();
    } catch (e) {
      throw new Error(`${e instanceof Error ? e.message : String(e)}\nmanager logs:\n${running.logs("manager").slice(-4000)}`, { cause: e });
    }
    return running;
  }

  /** Until the apiserver's admission chain reaches the manager and gets a sidecar back (server-side dry run). */
  async waitServing(timeoutMs = 60_000): Promise<void> {
    const ns = await this.testNamespace();
    let last = "";
    await waitUntil(
      "the apiserver injects through the manager",
      async () => {
        const r = await createPod(this.api.admin, this.pod(ns, "probe", { label: true }), { dryRun: true });
        last = `${r.status} ${r.body.toString("utf8").slice(0, 300)}`;
        return r.status === 201 && r.body.includes("shardcar-proxy");
      },
      timeoutMs,
    ).catch((e: unknown) => {
      throw new Error(`${e instanceof Error ? e.message : String(e)}; last answer: ${last}`, { cause: e });
    });
  }

  async stopManager(): Promise<void> {
    this.webhook.unroute();
    await this.manager?.stop();
    this.manager = undefined;
  }

  /** The manager's review counts (its /metrics, through a port-forward to the pod). */
  async reviews(): Promise<ReviewCounts> {
    const m = this.manager;
    if (m === undefined) throw new Error("the manager is not running");
    this.#metricsPort ??= await m.forward(9465, m.podIP);
    const r = await call({ url: `http://127.0.0.1:${this.#metricsPort}` }, "/metrics");
    if (r.status !== 200) throw new Error(`manager /metrics: ${r.status}`);
    return parseReviewCounts(r.body.toString("utf8"));
  }

  #namespace: string | undefined;
  /** A namespace for test pods (created once), with its kube-root-ca.crt. */
  async testNamespace(): Promise<string> {
    if (this.#namespace === undefined) {
      await ensureNamespace(this.api, "team-a");
      this.#namespace = "team-a";
    }
    return this.#namespace;
  }

  /**
   * A controller's pod as its workload controller would send it, after the
   * ServiceAccount admission plugin: opted in by label and/or annotation.
   */
  pod(namespace: string, name: string, opts: { label?: boolean; annotation?: boolean; annotations?: Record<string, string>; spec?: JsonObject } = {}): JsonObject {
    const annotations: Record<string, string> = {
      ...(opts.label === true || opts.annotation === true ? { "shardcar.io/resources": "pods", "shardcar.io/shards": "1/3" } : {}),
      ...(opts.annotation === true ? { "shardcar.io/inject": "true" } : {}),
      ...(opts.annotations ?? {}),
    };
    return admitServiceAccount({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: `${name}-${(++this.#podSeq).toString(36)}`,
        namespace,
        labels: { app: name, ...(opts.label === true ? { "shardcar.io/inject": "true" } : {}) },
        ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
      },
      spec: {
        serviceAccountName: "controller",
        containers: [{ name: "controller", image: "example.test/controller:1", args: ["--leader-elect=false"] }],
        ...(opts.spec ?? {}),
      },
    });
  }

  async close(): Promise<void> {
    await this.stopManager().catch(() => {});
    await this.webhook.close();
    await this.api.stop();
  }
}
