/**
 * The rig of S3 (bench/macro/s3-write-path.ts): the real apiserver kit with
 * its real MutatingAdmissionWebhook plugin, whose webhook Service
 * `shardcar-system/shardcar-webhook:443` is mapped to a loopback
 * {@link TcpBalancer} (a Service and kube-proxy), in front of up to three
 * `shardcar manager` processes. The plugin verifies the manager's serving
 * certificate for `shardcar-webhook.shardcar-system.svc` against the
 * configuration's `caBundle`, as in a cluster.
 *
 * The managers run in cert-manager mode (`--cert-dir`, a certificate the rig
 * issues, as cert-manager would), so that none of them writes the
 * MutatingWebhookConfiguration: the bench creates and deletes it for its
 * rounds with and without the webhook. The webhook entry is the shipped one
 * (manifests/components/label-slots/webhook.yaml: failurePolicy, timeout,
 * matchConditions, reinvocation), with rules for ConfigMaps, as a user adds
 * theirs.
 *
 * The ring labels `configmaps=owner`: every write carries a controller
 * reference, so the webhook computes the slot and patches the label on
 * CREATE as on UPDATE (a uid-keyed CREATE is cheaper: no patch, nothing to
 * compute, the labeller labels it).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { load } from "js-yaml";
import { createLocalCa } from "../../src/pki/ca.ts";
import { slotLabelKey } from "../../src/shard/slots.ts";
import { webhookDnsNames } from "../../src/webhook/certs.ts";
import { callRealApi as call, startRealApi, stopRealApi, type RealApi } from "./realapi.ts";
import { CLI, Child, cpuMsOf, httpGet, start, until } from "./proc.ts";
import { TcpBalancer } from "./tcp-balancer.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const MANAGER_NS = "shardcar-system";
const SERVICE = "shardcar-webhook";
const TLS_NAME = `${SERVICE}.${MANAGER_NS}.svc`;
export const NS = "s3-writes";
export const RING = "s3";
export const LABEL = slotLabelKey(RING);
const MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
export const MWC_NAME = "shardcar";
const CM_PATH = `/api/v1/namespaces/${NS}/configmaps`;

/** The controller every bench ConfigMap names: its uid is the slot's key. */
const OWNER = { apiVersion: "apps/v1", kind: "ReplicaSet", name: "s3-owner", uid: "5a3e1c2b-0000-4000-8000-00000000b3b3", controller: true };

/** The body of a ConfigMap the bench writes; `{i}` is the load generator's index. */
export function configMapBody(round: string, labels: Readonly<Record<string, string>> = {}): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: `${round}-{i}`, labels: { bench: "s3", round, ...labels }, ownerReferences: [OWNER] },
    data: { index: "{i}", payload: "x".repeat(200) },
  });
}

export const configMapUrl = (api: RealApi, name = ""): string => `${api.url}${CM_PATH}${name === "" ? "" : `/${name}`}`;

/** The shipped stamping webhook, for ConfigMaps, trusting `caPem`. */
export function labelWebhookConfiguration(caPem: string): Record<string, unknown> {
  const patches = load(readFileSync(join(ROOT, "manifests/components/label-slots/webhook.yaml"), "utf8")) as Array<{ op: string; path: string; value: Record<string, unknown> }>;
  const hook = patches.find((p) => p.path === "/webhooks/-")?.value;
  if (hook === undefined) throw new Error("manifests/components/label-slots/webhook.yaml adds no webhook");
  const clientConfig = { ...(hook["clientConfig"] as Record<string, unknown>), caBundle: Buffer.from(caPem).toString("base64") };
  const rules = [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["configmaps"], scope: "Namespaced" }];
  return { apiVersion: "admissionregistration.k8s.io/v1", kind: "MutatingWebhookConfiguration", metadata: { name: MWC_NAME }, webhooks: [{ ...hook, clientConfig, rules }] };
}

export interface RigOptions {
  readonly replicas: number;
  /** The labeller's `--label-rate`. */
  readonly labelRate: number;
  /** Node flags for the manager processes (e.g. `--cpu-prof`). */
  readonly managerNodeArgs?: readonly string[];
}

export interface Manager {
  readonly child: Child;
  readonly port: number;
  readonly metrics: string;
}

export class WritePathRig {
  readonly api: RealApi;
  readonly balancer: TcpBalancer;
  readonly managers: Manager[] = [];
  readonly #caPem: string;
  readonly #certDir: string;
  readonly #opts: RigOptions;
  #webhook: boolean | undefined;

  private constructor(api: RealApi, balancer: TcpBalancer, caPem: string, certDir: string, opts: RigOptions) {
    this.api = api;
    this.balancer = balancer;
    this.#caPem = caPem;
    this.#certDir = certDir;
    this.#opts = opts;
  }

  /**
   * The kit, the balancer, the managers (none behind the balancer yet: see
   * {@link use}), the ShardRing and its CRD.
   */
  static async start(opts: RigOptions): Promise<WritePathRig> {
    const balancer = await TcpBalancer.start();
    const certDir = mkdtempSync(join(tmpdir(), "shardcar-s3-certs-"));
    let api: RealApi | undefined;
    try {
      const now = new Date();
      const ca = await createLocalCa("s3 bench cert-manager CA", now, 24 * 3600_000);
      const tls = await ca.issue({ commonName: TLS_NAME, names: webhookDnsNames(SERVICE, MANAGER_NS), now, validityMs: 24 * 3600_000 });
      writeFileSync(join(certDir, "tls.crt"), tls.cert);
      writeFileSync(join(certDir, "tls.key"), tls.key);
      api = await startRealApi("off", undefined, { REALAPI_WEBHOOK_SERVICES: `${MANAGER_NS}/${SERVICE}:443=127.0.0.1:${balancer.port}` });
      const rig = new WritePathRig(api, balancer, ca.certPem, certDir, opts);
      await rig.#install();
      for (let i = 0; i < opts.replicas; i++) rig.managers.push(await rig.#startManager(i));
      await Promise.all(rig.managers.map((m) => rig.#waitStamps(m)));
      return rig;
    } catch (e) {
      if (api !== undefined) await stopRealApi(api, true);
      await balancer.close();
      rmSync(certDir, { recursive: true, force: true });
      throw e;
    }
  }

  async #install(): Promise<void> {
    for (const name of [MANAGER_NS, NS]) await this.#ok("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name } }, [201, 409]);
    const crd = load(readFileSync(join(ROOT, "manifests/base/crds/shardrings.shardcar.io.yaml"), "utf8"));
    await this.#ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd, [201, 409]);
    const rings = `/apis/shardcar.io/v1alpha1/namespaces/${NS}/shardrings`;
    if (!(await until(async () => (await call(this.api, "GET", rings)).status === 200, 30_000))) throw new Error(`${rings} is not served 30 s after its CRD was created`);
    await this.#ok("POST", rings, { apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name: RING, namespace: NS }, spec: { filter: "labels", resources: "configmaps=owner", slots: 256 } }, [201, 409]);
  }

  async #ok(method: string, path: string, body: unknown, want: readonly number[]): Promise<string> {
    const r = await call(this.api, method, path, body);
    if (!want.includes(r.status)) throw new Error(`${method} ${path}: HTTP ${r.status} ${r.body.slice(0, 300)}`);
    return r.body;
  }

  async #startManager(i: number): Promise<Manager> {
    const args = [...(this.#opts.managerNodeArgs ?? []), CLI, "manager", "--image", "ghcr.io/shardcar/shardcar:bench", "--webhook-listen", "127.0.0.1:0", "--cert-mode", "cert-manager", "--cert-dir", this.#certDir];
    args.push("--namespace", MANAGER_NS, "--metrics-listen", "127.0.0.1:0", "--label-rate", String(this.#opts.labelRate), "--label-burst", "10");
    const child = start(`manager-${i}`, process.execPath, args, { ...process.env, KUBECONFIG: join(this.api.runDir, "kubeconfig"), POD_NAME: `shardcar-manager-s3-${i}`, POD_NAMESPACE: MANAGER_NS });
    const port = Number((await child.waitLine(/serving the webhook on https:\/\/[^:]+:(\d+)/, 60_000))[1]);
    const metrics = (await child.waitLine(/serving metrics on (http:\/\/\S+)/, 30_000))[1] ?? "";
    return { child, port, metrics };
  }

  /** Until `m` stamps a CREATE sent to it directly: it has read the ShardRing. */
  async #waitStamps(m: Manager): Promise<void> {
    const review = JSON.stringify({
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      request: { uid: "probe", operation: "CREATE", resource: { group: "", version: "v1", resource: "configmaps" }, namespace: NS, object: { metadata: { name: "probe", ownerReferences: [OWNER] } } },
    });
    const stamped = (): Promise<boolean> =>
      new Promise((resolve) => {
        const req = request({ host: "127.0.0.1", port: m.port, servername: TLS_NAME, ca: this.#caPem, method: "POST", path: "/label-slots", headers: { "content-type": "application/json" }, agent: false, timeout: 5000 }, (res) => {
          const parts: Buffer[] = [];
          res.on("data", (b: Buffer) => parts.push(b));
          res.on("end", () => resolve(Buffer.concat(parts).toString("utf8").includes('"patch"')));
        });
        req.on("error", () => resolve(false));
        req.on("timeout", () => req.destroy());
        req.end(review);
      });
    if (!(await until(stamped, 60_000, 100))) throw new Error(`${m.child.name} does not stamp a ConfigMap 60 s after it started; output:\n${m.child.lines.slice(-20).join("\n")}`);
  }

  /** The first `n` managers behind the balancer; open connections are ended. */
  use(n: number): void {
    this.balancer.setBackends(this.managers.slice(0, n).map((m) => m.port));
  }

  /**
   * Creates (or deletes) the webhook configuration, and waits until the
   * admission plugin has seen it: a server-side dry-run CREATE comes back
   * stamped (or not).
   */
  async setWebhook(present: boolean): Promise<void> {
    if (this.#webhook === present) return;
    if (present) await this.#ok("POST", MWC_PATH, labelWebhookConfiguration(this.#caPem), [201, 409]);
    else await this.#ok("DELETE", `${MWC_PATH}/${MWC_NAME}`, undefined, [200, 404]);
    const probe = JSON.parse(configMapBody("probe").replaceAll("{i}", "0")) as Record<string, unknown>;
    const seen = await until(async () => {
      const r = await call(this.api, "POST", `${CM_PATH}?dryRun=All`, probe);
      return r.status === 201 && r.body.includes(LABEL) === present;
    }, 30_000, 20);
    if (!seen) throw new Error(`the admission plugin did not ${present ? "call" : "stop calling"} the webhook within 30 s of the configuration's ${present ? "creation" : "deletion"}`);
    this.#webhook = present;
  }

  /** Deletes every ConfigMap of `round` (one deletecollection). */
  async deleteRound(round: string): Promise<void> {
    await this.#ok("DELETE", `${CM_PATH}?labelSelector=${encodeURIComponent(`round=${round}`)}`, undefined, [200]);
  }

  /** A ConfigMap's slot label, or undefined. */
  async slotOf(name: string): Promise<string | undefined> {
    const r = await call(this.api, "GET", `${CM_PATH}/${name}`);
    if (r.status !== 200) throw new Error(`GET configmap ${name}: HTTP ${r.status}`);
    return (JSON.parse(r.body) as { metadata?: { labels?: Record<string, string> } }).metadata?.labels?.[LABEL];
  }

  /** `shardcar_label_webhook_reviews_total` of each manager, summed over results, and by result. */
  async reviews(): Promise<Array<Record<string, number>>> {
    return Promise.all(
      this.managers.map(async (m) => {
        const text = (await httpGet(m.metrics, 5000)).body;
        const out: Record<string, number> = { total: 0 };
        for (const [, result = "", n] of text.matchAll(/^shardcar_label_webhook_reviews_total\{result="([^"]*)"\} (\S+)$/gm)) {
          out[result] = Number(n);
          out["total"] = (out["total"] ?? 0) + Number(n);
        }
        return out;
      }),
    );
  }

  /** CPU ms so far: the apiserver, etcd, each manager, and this process (the balancer runs in it). */
  cpu(): { apiserver: number; etcd: number; managers: number[]; bench: number } {
    const pids = { apiserver: this.api.pids.server, etcd: this.api.pids.etcd };
    const own = process.cpuUsage();
    return { apiserver: cpuMsOf(pids.apiserver), etcd: cpuMsOf(pids.etcd), managers: this.managers.map((m) => cpuMsOf(m.child.pid)), bench: (own.user + own.system) / 1000 };
  }

  async stop(): Promise<void> {
    await Promise.all(this.managers.map((m) => m.child.stop(5000)));
    await this.balancer.close();
    await stopRealApi(this.api, true);
    rmSync(this.#certDir, { recursive: true, force: true });
  }
}
