/**
 * A cluster for the operator tools' tests: devapi (with the resources it
 * lacks registered: Services, Endpoints, MutatingWebhookConfigurations) behind
 * a thin front server that answers SelfSubjectAccessReview and
 * SubjectAccessReview from a policy (devapi has no authorizer), and a
 * kubeconfig file pointing at it, as an operator would have.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { seedPods, startDevApi, type DevApi, type GateMode } from "../../src/devapi/index.ts";
import { main } from "../../src/cli/main.ts";

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
  const upstream = new URL(api.url);
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
    const up = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    up.on("error", () => res.destroy());
    res.on("close", () => up.destroy());
    req.pipe(up);
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
export async function cli(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const sink = (f: (s: string) => void): Writable =>
    new Writable({
      write(c: Buffer, _e, cb) {
        f(c.toString());
        cb();
      },
    });
  const code = await main(argv, { stdout: sink((s) => (out += s)), stderr: sink((s) => (err += s)), env, signal: new AbortController().signal });
  return { code, out, err };
}

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
