/**
 * Reading where the apiserver is and who the sidecar is, without
 * `@kubernetes/client-node` (P6: importing it is most of an idle sidecar's
 * memory): a kubeconfig file's current context, or the in-cluster
 * service-account files.
 *
 * The common kubeconfig covers what a sidecar is given: a server, its CA
 * (file or data), and a token, token file or client certificate. A user
 * that needs more (exec plugins, auth providers, basic auth, impersonation)
 * or a cluster behind `proxy-url` is reported in {@link KubeconfigFile.needsClientNode};
 * the caller then loads client-node for the credentials. The cluster half
 * is always read here, and `insecure-skip-tls-verify` is refused.
 */
import { fs } from "../node-builtins.ts";
import { dirname, isAbsolute, join } from "node:path";
import { ConfigError } from "../errors.ts";
import type { DirectConnectionOptions } from "./client.ts";
import { isRecord } from "../is-record.ts";

export interface KubeconfigCluster {
  readonly name: string;
  /** Without a trailing slash, as client-node keeps it. */
  readonly server: string;
  /** PEM, from `certificate-authority-data` or else `certificate-authority`; undefined = system roots. */
  readonly ca: string | undefined;
  readonly tlsServerName: string | undefined;
}

export interface KubeconfigFile {
  readonly path: string;
  readonly cluster: KubeconfigCluster;
  /** The current user's credentials, when this file can use them without client-node. */
  readonly connection: DirectConnectionOptions | undefined;
  /** Why the credentials need client-node (e.g. `exec`), or undefined when they do not. */
  readonly needsClientNode: string | undefined;
}

function named(list: unknown, name: string, key: string): Record<string, unknown> | undefined {
  if (!Array.isArray(list)) return undefined;
  const e: unknown = list.find((x) => isRecord(x) && x["name"] === name);
  if (!isRecord(e)) return undefined;
  const v = e[key];
  return isRecord(v) ? v : {};
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

// User fields only client-node (or client-go) can act on.
const CLIENT_NODE_USER_FIELDS = ["exec", "auth-provider", "username", "password", "as", "as-groups", "as-uid", "as-user-extra"];

/**
 * Reads `path` (YAML or JSON) and resolves its current context. Relative file
 * paths are taken from the kubeconfig's directory, as kubectl does. Throws
 * {@link ConfigError} (flag `--kubeconfig`) for an unreadable file, a missing
 * context, cluster or server, and `insecure-skip-tls-verify`.
 */
export async function readKubeconfig(path: string): Promise<KubeconfigFile> {
  const fail = (message: string, cause?: unknown): ConfigError => new ConfigError("--kubeconfig", `kubeconfig ${JSON.stringify(path)}: ${message}`, cause === undefined ? undefined : { cause });
  let doc: unknown;
  try {
    const text = fs.readFileSync(path, "utf8");
    // Loaded only here, and small (a few MB less than client-node's ~80).
    const { load } = await import("js-yaml");
    doc = load(text);
  } catch (e) {
    throw fail(e instanceof Error ? e.message.split("\n")[0] ?? "" : String(e), e);
  }
  if (!isRecord(doc)) throw fail("not a kubeconfig (expected a mapping)");
  const dir = dirname(path);
  const file = (p: string): string => (isAbsolute(p) ? p : join(dir, p));
  const read = (field: string, p: string): string => {
    try {
      return fs.readFileSync(file(p), "utf8");
    } catch (e) {
      throw fail(`cannot read ${field} ${JSON.stringify(p)}: ${e instanceof Error ? e.message : String(e)}`, e);
    }
  };
  const data = (v: string): string => Buffer.from(v, "base64").toString("utf8");

  const current = str(doc["current-context"]);
  if (current === undefined) throw fail("the kubeconfig has no current context");
  const ctx = named(doc["contexts"], current, "context");
  if (ctx === undefined) throw fail(`no context named ${JSON.stringify(current)}`);
  const clusterName = str(ctx["cluster"]);
  const c = clusterName === undefined ? undefined : named(doc["clusters"], clusterName, "cluster");
  if (clusterName === undefined || c === undefined) throw fail(`context ${JSON.stringify(current)} names no cluster that the file defines`);
  const server = str(c["server"]);
  if (server === undefined) throw fail(`cluster ${JSON.stringify(clusterName)} has no server`);
  if (c["insecure-skip-tls-verify"] === true) {
    throw new ConfigError("--kubeconfig", `cluster ${JSON.stringify(clusterName)} sets insecure-skip-tls-verify; shardcar always verifies the apiserver certificate`);
  }
  const caData = str(c["certificate-authority-data"]);
  const caFile = str(c["certificate-authority"]);
  const cluster: KubeconfigCluster = {
    name: clusterName,
    server: server.replace(/\/$/, ""),
    ca: caData !== undefined ? data(caData) : caFile !== undefined ? read("certificate-authority", caFile) : undefined,
    tlsServerName: str(c["tls-server-name"]),
  };

  const userName = str(ctx["user"]);
  const u = userName === undefined ? {} : (named(doc["users"], userName, "user") ?? {});
  const unsupported = CLIENT_NODE_USER_FIELDS.filter((k) => u[k] !== undefined && u[k] !== null && u[k] !== "");
  if (str(c["proxy-url"]) !== undefined) unsupported.push("proxy-url");
  if (unsupported.length > 0) return { path, cluster, connection: undefined, needsClientNode: unsupported.join(", ") };

  const certData = str(u["client-certificate-data"]);
  const certFile = str(u["client-certificate"]);
  const keyData = str(u["client-key-data"]);
  const keyFile = str(u["client-key"]);
  const cert = certData !== undefined ? data(certData) : certFile !== undefined ? read("client-certificate", certFile) : undefined;
  const key = keyData !== undefined ? data(keyData) : keyFile !== undefined ? read("client-key", keyFile) : undefined;
  if ((cert === undefined) !== (key === undefined)) throw fail(`user ${JSON.stringify(userName ?? "")} has a client certificate without its key, or a key without its certificate`);
  // client-go spells it tokenFile, client-node token-file; a token wins, as in both.
  const token = str(u["token"]);
  const tokenFile = str(u["tokenFile"]) ?? str(u["token-file"]);
  const connection: DirectConnectionOptions = {
    server: cluster.server,
    ca: cluster.ca,
    tlsServerName: cluster.tlsServerName,
    clientCert: cert !== undefined && key !== undefined ? { cert, key } : undefined,
    token,
    tokenFile: token === undefined && tokenFile !== undefined ? file(tokenFile) : undefined,
    flag: "--kubeconfig",
  };
  return { path, cluster, connection, needsClientNode: undefined };
}

/** The real apiserver, as the kubelet describes it to every container. */
export function inClusterServer(env: NodeJS.ProcessEnv, flag = "--injected"): string {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (host === undefined || port === undefined || host === "" || port === "") {
    throw new ConfigError(flag, `${flag} needs KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (the real apiserver), which the kubelet sets in every container`);
  }
  return `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/**
 * The pod's own identity: the service-account directory's `ca.crt` and
 * `token` (re-read as the kubelet rotates it), against the in-cluster server.
 */
export function inClusterConnection(env: NodeJS.ProcessEnv, saDir: string, flag = "--injected"): DirectConnectionOptions {
  const caPath = join(saDir, "ca.crt");
  let ca: string;
  try {
    ca = fs.readFileSync(caPath, "utf8");
  } catch (e) {
    throw new ConfigError(flag, `cannot read the service-account CA ${caPath}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  return { server: inClusterServer(env, flag), ca, tokenFile: join(saDir, "token"), flag };
}
