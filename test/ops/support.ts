/**
 * A cluster for the operator tools' tests: devapi (with the resources it
 * lacks registered: Services, Endpoints, MutatingWebhookConfigurations) behind
 * a thin front server that answers SelfSubjectAccessReview and
 * SubjectAccessReview from a policy (devapi has no authorizer), and a
 * kubeconfig file pointing at it, as an operator would have.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { relayTo } from "../support/relay.ts";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { seedPods, startDevApi, type DevApi, type GateMode } from "../../src/devapi/index.ts";
import { KubeConfig } from "@kubernetes/client-node";
import { runCli } from "../support/cli.ts";
import { silentLogger } from "../../src/log.ts";
import { runCoordinator, RingMember, RING_GROUP, RING_VERSION } from "../../src/ring/index.ts";
import { memberLeaseName, SLOTS_ANNOTATION } from "../../src/ring/names.ts";
import { until } from "../support/wait.ts";

export interface AccessSpec {
  readonly user?: string;
  readonly resourceAttributes?: { verb?: string; group?: string; resource?: string; namespace?: string; name?: string };
}

export type Policy = (spec: AccessSpec, kind: "SelfSubjectAccessReview" | "SubjectAccessReview") => boolean;

export const allowAll: Policy = () => true;

export interface OpsCluster {
  readonly api: DevApi;
  /** The front server's URL (what the kubeconfig points at). */
  readonly url: string;
  readonly kubeconfig: string;
  /** Access reviews answered so far. */
  readonly reviews: { kind: string; spec: AccessSpec; allowed: boolean }[];
  policy: Policy;
  stop(): Promise<void>;
}

export async function startOpsCluster(opts: { gate: GateMode; pods?: number; namespaces?: readonly string[]; policy?: Policy }): Promise<OpsCluster> {
  const api = await startDevApi({ gate: opts.gate });
  api.registerResource({ group: "", version: "v1", resource: "services", kind: "Service", namespaced: true });
  api.registerResource({ group: "", version: "v1", resource: "endpoints", kind: "Endpoints", namespaced: true, listKind: "EndpointsList", singular: "endpoints" });
  api.registerResource({ group: "admissionregistration.k8s.io", version: "v1", resource: "mutatingwebhookconfigurations", kind: "MutatingWebhookConfiguration", namespaced: false });
  if ((opts.pods ?? 0) > 0) seedPods(api, { count: opts.pods ?? 0, namespaces: opts.namespaces ?? ["default"] });
  const relay = relayTo(new URL(api.url));
  const reviews: OpsCluster["reviews"] = [];
  const state = { policy: opts.policy ?? allowAll };
  const server: Server = createServer((req, res) => {
    const m = /^\/apis\/authorization\.k8s\.io\/v1\/(selfsubjectaccessreviews|subjectaccessreviews)$/.exec(req.url ?? "");
    if (req.method === "POST" && m) {
      const chunks: Buffer[] = [];
      req.on("data", (b: Buffer) => chunks.push(b));
      req.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { spec?: AccessSpec };
        const kind = m[1] === "selfsubjectaccessreviews" ? "SelfSubjectAccessReview" : "SubjectAccessReview";
        const spec = body.spec ?? {};
        const allowed = state.policy(spec, kind);
        reviews.push({ kind, spec, allowed });
        res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ apiVersion: "authorization.k8s.io/v1", kind, spec, status: { allowed, ...(allowed ? {} : { reason: "test policy" }) } }));
      });
      return;
    }
    relay(req, res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const addr = server.address();
  const url = `http://127.0.0.1:${typeof addr === "object" && addr !== null ? addr.port : 0}`;
  const dir = mkdtempSync(join(tmpdir(), "shardcar-ops-"));
  const kubeconfig = join(dir, "kubeconfig");
  // Plain HTTP to a loopback test server: client-node insists on skipTLSVerify for http://.
  writeFileSync(
    kubeconfig,
    `apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: "${url}", insecure-skip-tls-verify: true}
users:
- name: operator
  user: {token: operator-token}
contexts:
- name: dev
  context: {cluster: dev, user: operator, namespace: shop}
current-context: dev
`,
  );
  const cluster: OpsCluster = {
    api,
    url,
    kubeconfig,
    reviews,
    get policy() {
      return state.policy;
    },
    set policy(p: Policy) {
      state.policy = p;
    },
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await api.close();
    },
  };
  return cluster;
}

/** Runs the CLI in-process. */
export const cli = runCli;

/** A CRD for `releases.convoy.kumodo.io`, as a cluster would have it. */
export function releasesCrd(): Record<string, unknown> {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "releases.convoy.kumodo.io" },
    spec: {
      group: "convoy.kumodo.io",
      scope: "Namespaced",
      names: { plural: "releases", singular: "release", kind: "Release", listKind: "ReleaseList" },
      versions: [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } }],
    },
  };
}

/** A kubeconfig file that points straight at `url` (devapi, plain HTTP on loopback). */
export function kubeconfigFile(url: string, namespace = "default"): string {
  const dir = mkdtempSync(join(tmpdir(), "shardcar-kc-"));
  const path = join(dir, "kubeconfig");
  writeFileSync(
    path,
    `apiVersion: v1
kind: Config
clusters: [{name: dev, cluster: {server: "${url}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: dev, context: {cluster: dev, user: u, namespace: ${namespace}}}]
current-context: dev
`,
  );
  return path;
}

/**
 * A real ring on devapi: the manager's coordinator and RingMembers, each
 * acknowledging a new generation 50 ms after it arrives (as a proxy does once
 * its controller relisted). Short timings, as in test/ring.
 */
export class TestRing {
  readonly api: DevApi;
  readonly namespace: string;
  readonly ring: string;
  readonly members = new Map<string, RingMember>();
  readonly #kc: KubeConfig;
  #coordinator: { abort: AbortController; done: Promise<void> } | undefined;

  constructor(api: DevApi, namespace: string, ring: string) {
    this.api = api;
    this.namespace = namespace;
    this.ring = ring;
    this.#kc = new KubeConfig();
    this.#kc.loadFromOptions({
      clusters: [{ name: "dev", server: api.url, skipTLSVerify: true }],
      users: [{ name: "u", token: "ring" }],
      contexts: [{ name: "c", cluster: "dev", user: "u" }],
      currentContext: "c",
    });
  }

  startCoordinator(): void {
    const abort = new AbortController();
    const done = runCoordinator({ kubeConfig: this.#kc, namespace: this.namespace, ringNamespace: this.namespace, identity: "mgr", election: RING_TIMINGS, log: silentLogger() }, abort.signal);
    this.#coordinator = { abort, done };
  }

  async stopCoordinator(): Promise<void> {
    const c = this.#coordinator;
    this.#coordinator = undefined;
    c?.abort.abort();
    await c?.done;
  }

  async add(name: string): Promise<RingMember> {
    const m = new RingMember({ kubeConfig: this.#kc, namespace: this.namespace, ring: this.ring, member: name, timings: RING_TIMINGS, leaveTimeoutMs: 10_000, log: silentLogger() });
    m.subscribe((next) => {
      setTimeout(() => m.markApplied(next.generation), 50).unref();
    });
    this.members.set(name, m);
    await m.start();
    return m;
  }

  /** What SIGKILL (or a frozen process) leaves: no renewals, its Lease and claimed slots stay as they were. */
  kill(name: string): void {
    this.members.get(name)?.halt();
    this.members.delete(name);
  }

  #status(): { committed?: { generation: number; members: { name: string; slots: string }[] }; pending?: unknown } | undefined {
    return this.api.store.get({ group: RING_GROUP, version: RING_VERSION, resource: "shardrings" }, this.namespace, this.ring)?.status as
      | { committed?: { generation: number; members: { name: string; slots: string }[] }; pending?: unknown }
      | undefined;
  }

  /**
   * Waits for a committed table of exactly `names`, nothing pending, every
   * member on it, and every member's Lease showing its committed slots (a
   * member writes them at its next renewal; the audit reads them there).
   */
  async settled(names: readonly string[]): Promise<void> {
    const want = [...names].sort().join(",");
    await until(`ring ${this.ring} settled on [${want}] with its Leases up to date`, () => {
      const st = this.#status();
      const committed = st?.committed;
      if (committed === undefined || st?.pending !== undefined || committed.members.map((m) => m.name).sort().join(",") !== want) return false;
      if (![...this.members.values()].every((m) => m.current().generation === committed.generation)) return false;
      return committed.members.every((m) => this.api.store.get("leases.coordination.k8s.io", this.namespace, memberLeaseName(this.ring, m.name))?.metadata?.annotations?.[SLOTS_ANNOTATION] === m.slots);
    });
  }

  async stop(): Promise<void> {
    for (const m of this.members.values()) m.halt();
    await this.stopCoordinator();
  }
}

export const RING_TIMINGS = { leaseDurationSeconds: 2, renewDeadlineMs: 1_200, retryPeriodMs: 300 } as const;
