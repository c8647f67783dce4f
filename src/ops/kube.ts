/**
 * The operator tools' door to the API server: raw JSON requests with the
 * credentials and trust of a kubeconfig (through client-node's KubeConfig,
 * so every auth method it supports works), plus discovery of a resource's
 * path and kind.
 *
 * Raw rather than client-node's typed clients because the tools send what
 * those cannot: `shardSelector`, `resourceVersionMatch` with paging, and
 * `as=PartialObjectMetadataList`.
 */
import * as http from "node:http";
import * as https from "node:https";
import { KubeConfig } from "@kubernetes/client-node";
import { ConfigError, ShardcarError } from "../errors.ts";
import type { ShardedResource } from "../shard/spec.ts";
import { resourceName, type ResolvedResource } from "./resource.ts";
import { isRecord } from "../is-record.ts";

export { groupVersion, resourceName, resourcePath, statusMessage, type ResolvedResource } from "./resource.ts";

export interface KubeResponse {
  readonly status: number;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  readonly body: unknown;
  readonly bytes: number;
}

export interface RequestOptions {
  readonly query?: Record<string, string | undefined>;
  readonly body?: unknown;
  readonly accept?: string;
  /** Default 30 s. */
  readonly timeoutMs?: number;
}

// No single answer the tools read is anywhere near this; a bigger one means a
// wrong path (or a list asked for without paging), and must not exhaust memory.
const MAX_BODY_BYTES = 512 * 1024 * 1024;

/** Loads a kubeconfig the way kubectl does: a file, or in-cluster, or the default chain; then `--context`. */
export function loadKubeConfig(opts: { kubeconfig?: string | undefined; context?: string | undefined; env: NodeJS.ProcessEnv }): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (opts.kubeconfig !== undefined) kc.loadFromFile(opts.kubeconfig);
    else if (opts.env.KUBECONFIG === undefined && opts.env.KUBERNETES_SERVICE_HOST !== undefined && opts.env.KUBERNETES_SERVICE_PORT !== undefined) kc.loadFromCluster();
    else kc.loadFromDefault();
  } catch (e) {
    throw new ConfigError("--kubeconfig", `cannot load the kubeconfig${opts.kubeconfig === undefined ? "" : ` ${JSON.stringify(opts.kubeconfig)}`}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  if (opts.context !== undefined) {
    if (kc.getContextObject(opts.context) === null) throw new ConfigError("--context", `invalid --context ${JSON.stringify(opts.context)}: no such context in the kubeconfig`);
    kc.setCurrentContext(opts.context);
  }
  if (kc.getCurrentCluster() === null) throw new ConfigError("--kubeconfig", "the kubeconfig has no current cluster");
  return kc;
}

/** One API server, one identity. Stateless apart from client-node's agent cache; safe to share. */
export class KubeClient {
  readonly server: URL;
  readonly #kc: KubeConfig;

  constructor(kc: KubeConfig) {
    const cluster = kc.getCurrentCluster();
    if (cluster === null) throw new ConfigError("--kubeconfig", "the kubeconfig has no current cluster");
    this.#kc = kc;
    this.server = new URL(cluster.server);
  }

  /**
   * One request; resolves with any HTTP status (callers judge it), rejects
   * only when there is no answer (connection refused, TLS failure, timeout).
   */
  async request(method: string, path: string, opts: RequestOptions = {}): Promise<KubeResponse> {
    const url = new URL(path.replace(/^\/+/, ""), this.server.href.endsWith("/") ? this.server.href : `${this.server.href}/`);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
    const o: https.RequestOptions = { method, headers: { accept: opts.accept ?? "application/json" } };
    await this.#kc.applyToHTTPSOptions(o);
    const payload = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
    const headers: http.OutgoingHttpHeaders = {};
    // client-node fills in Authorization (and impersonation) as a plain record.
    if (isRecord(o.headers)) for (const [k, v] of Object.entries(o.headers)) if (typeof v === "string" || typeof v === "number" || Array.isArray(v)) headers[k] = v;
    headers["accept"] = opts.accept ?? "application/json";
    if (payload !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(payload.length);
    }
    const mod = url.protocol === "http:" ? http : https;
    return new Promise<KubeResponse>((resolve, reject) => {
      const req = mod.request(url, { ...o, method, headers, timeout: opts.timeoutMs ?? 30_000 }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (b: Buffer) => {
          size += b.length;
          if (size > MAX_BODY_BYTES) {
            res.destroy(new ShardcarError("SHARDCAR_ERR_UPSTREAM", `${method} ${url.pathname}: answer larger than ${MAX_BODY_BYTES} bytes`));
            return;
          }
          chunks.push(b);
        });
        res.on("error", reject);
        res.on("end", () => {
          const raw = Buffer.concat(chunks);
          let body: unknown;
          try {
            body = raw.length === 0 ? undefined : JSON.parse(raw.toString("utf8"));
          } catch {
            body = undefined;
          }
          resolve({ status: res.statusCode ?? 0, body, bytes: raw.length });
        });
      });
      req.on("timeout", () => req.destroy(new ShardcarError("SHARDCAR_ERR_UPSTREAM", `${method} ${url.pathname}: no answer within ${opts.timeoutMs ?? 30_000} ms`)));
      req.on("error", (e) => reject(e instanceof ShardcarError ? e : new ShardcarError("SHARDCAR_ERR_UPSTREAM", `${method} ${url.origin}${url.pathname}: ${e.message}`, { cause: e })));
      req.end(payload);
    });
  }

  get(path: string, opts: RequestOptions = {}): Promise<KubeResponse> {
    return this.request("GET", path, opts);
  }
}

/**
 * Finds a resource's preferred version, kind and scope through discovery, and
 * whether a CRD serves it. Throws {@link ShardcarError} when the server does
 * not serve it (the message says how to check).
 */
export async function resolveResource(client: KubeClient, r: ShardedResource): Promise<ResolvedResource> {
  let version = "v1";
  if (r.group !== "") {
    const g = await client.get(`/apis/${r.group}`);
    const pv = isRecord(g.body) && isRecord(g.body["preferredVersion"]) ? g.body["preferredVersion"]["version"] : undefined;
    if (g.status !== 200 || typeof pv !== "string") throw new ShardcarError("SHARDCAR_ERR_UPSTREAM", `API group ${r.group} is not served (GET /apis/${r.group}: HTTP ${g.status}); check with kubectl api-resources`);
    version = pv;
  }
  const path = r.group === "" ? "/api/v1" : `/apis/${r.group}/${version}`;
  const d = await client.get(path);
  const list = isRecord(d.body) && Array.isArray(d.body["resources"]) ? d.body["resources"] : [];
  const entry = list.find((e): e is Record<string, unknown> => isRecord(e) && e["name"] === r.resource);
  if (d.status !== 200 || entry === undefined) {
    throw new ShardcarError("SHARDCAR_ERR_UPSTREAM", `${resourceName(r)} is not served by ${path} (HTTP ${d.status}); check the name with kubectl api-resources`);
  }
  // A CRD's group always has a dot; built-in groups without one (apps,
  // batch, policy) never need the lookup. CRDs may live in *.k8s.io groups
  // (Gateway API), so the lookup decides; the name is only a fallback when
  // the CRD cannot be read.
  let custom = false;
  if (r.group.includes(".")) {
    const crd = await client.get(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${r.resource}.${r.group}`);
    custom = crd.status === 200 || (crd.status !== 404 && !r.group.endsWith(".k8s.io"));
  }
  return { ...r, version, kind: typeof entry["kind"] === "string" ? entry["kind"] : "", namespaced: entry["namespaced"] === true, custom };
}
