/**
 * Where the proxy sends requests, and how it trusts the apiserver. Read once
 * from a kubeconfig or the in-cluster environment through
 * `@kubernetes/client-node`, so the proxy resolves the server exactly as the
 * controller itself would have.
 *
 * Only the cluster half of the config is used: the proxy forwards the
 * controller's own credentials and never attaches its own.
 */
import type * as http from "node:http";
import { fs, http as nodeHttp } from "../node-builtins.ts";
import * as https from "node:https";
import { ConfigError } from "../errors.ts";

export interface Upstream {
  readonly url: URL;
  /** PEM bundle the apiserver certificate must chain to; undefined = system roots. */
  readonly ca?: string;
  /** Keep-alive agent shared by every upstream request. */
  readonly agent: http.Agent;
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

export function makeUpstream(server: string, ca?: string): Upstream {
  let url: URL;
  try {
    url = new URL(server);
  } catch (e) {
    throw new ConfigError("--kubeconfig", `apiserver address ${JSON.stringify(server)} is not a URL`, { cause: e });
  }
  if (url.protocol === "http:") {
    // Plain HTTP exists for the embedded devapi only; a real apiserver is
    // always reached over verified TLS.
    if (!LOOPBACK.has(url.hostname)) {
      throw new ConfigError("--kubeconfig", `refusing plain-HTTP apiserver ${server}: only loopback development servers may skip TLS`);
    }
    return { url, agent: new nodeHttp.Agent({ keepAlive: true }) };
  }
  if (url.protocol !== "https:") throw new ConfigError("--kubeconfig", `unsupported apiserver scheme in ${server}`);
  // rejectUnauthorized stays true: never skip verification upstream.
  const agent = new https.Agent({ keepAlive: true, ca, rejectUnauthorized: true });
  return ca === undefined ? { url, agent } : { url, ca, agent };
}

/**
 * Loads the upstream from `kubeconfigPath`, or in-cluster config when running
 * in a pod, or the default kubeconfig chain otherwise.
 * Refuses `insecure-skip-tls-verify`.
 */
export async function loadUpstream(opts: { kubeconfigPath?: string; server?: string; caFile?: string; env: NodeJS.ProcessEnv }): Promise<Upstream> {
  if (opts.server !== undefined) {
    return makeUpstream(opts.server, opts.caFile === undefined ? undefined : fs.readFileSync(opts.caFile, "utf8"));
  }
  // Loaded only here: client-node is most of an idle sidecar's memory, and an
  // injected or --server sidecar in a static mode never needs it.
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  if (opts.kubeconfigPath !== undefined) kc.loadFromFile(opts.kubeconfigPath);
  else if (opts.env.KUBERNETES_SERVICE_HOST !== undefined && opts.env.KUBERNETES_SERVICE_PORT !== undefined) kc.loadFromCluster();
  else kc.loadFromDefault();
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new ConfigError("--kubeconfig", "the kubeconfig has no current cluster");
  if (cluster.skipTLSVerify) {
    throw new ConfigError("--kubeconfig", `cluster ${JSON.stringify(cluster.name)} sets insecure-skip-tls-verify; shardcar always verifies the apiserver certificate`);
  }
  let ca: string | undefined;
  if (cluster.caData !== undefined) ca = Buffer.from(cluster.caData, "base64").toString("utf8");
  else if (cluster.caFile !== undefined) ca = fs.readFileSync(cluster.caFile, "utf8");
  return makeUpstream(cluster.server, ca);
}
