/**
 * Where the apiserver is and who shardcar is to it: the one kubeconfig
 * loader, for the sidecar, the manager and the operator tools alike.
 *
 * The rule, written once ({@link chooseKubeSource}), is controller-runtime's
 * `config.GetConfig` (sigs.k8s.io/controller-runtime/pkg/client/config),
 * which most controllers a sidecar sits next to use:
 *
 * 1. `--kubeconfig PATH`;
 * 2. else `$KUBECONFIG` (a list of files, merged as client-go merges them);
 * 3. else in-cluster: `KUBERNETES_SERVICE_HOST` and `_PORT` set and the
 *    service account's token file present (client-go's `rest.InClusterConfig`);
 * 4. else `~/.kube/config`.
 *
 * Both halves of a connection (the server and its CA; the credentials) come
 * from the one source chosen, so the sidecar's upstream and its ring
 * credentials can never name different clusters.
 *
 * Read without `@kubernetes/client-node` (P6: importing it is most of an
 * idle sidecar's memory). The common kubeconfig covers what a sidecar is
 * given: a server, its CA (file or data), and a token, token file or client
 * certificate. A user that needs more (exec plugins, auth providers, basic
 * auth, impersonation) or a cluster behind `proxy-url` is reported in
 * {@link KubeAccess.needsClientNode}, and {@link connectionFor} then loads
 * client-node for the credentials. The cluster half is always read here, and
 * `insecure-skip-tls-verify` is refused.
 */
import { fs } from "../node-builtins.ts";
import { homedir } from "node:os";
import { delimiter, dirname, isAbsolute, join } from "node:path";
import { ConfigError } from "../errors.ts";
import { isRecord } from "../is-record.ts";
import type { Connection, DirectConnectionOptions } from "./client.ts";

/** The kubelet's mount point for every container's service-account files. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** Which configuration the rule chose, and why: for logs and error messages. */
export type KubeSource =
  | { readonly kind: "kubeconfig"; readonly paths: readonly string[]; readonly from: "--kubeconfig" | "$KUBECONFIG" | "~/.kube/config" }
  | { readonly kind: "in-cluster"; readonly saDir: string };

export interface SourceOptions {
  /** `--kubeconfig`, when given. */
  readonly kubeconfig?: string | undefined;
  readonly env: NodeJS.ProcessEnv;
  /** Where in-cluster config reads `token`, `ca.crt` and `namespace`. Default {@link SERVICE_ACCOUNT_DIR}. */
  readonly saDir?: string | undefined;
}

const set = (v: string | undefined): v is string => v !== undefined && v !== "";

/** The rule of the module comment. Reads nothing but whether the token file exists. */
export function chooseKubeSource(o: SourceOptions): KubeSource {
  if (set(o.kubeconfig)) return { kind: "kubeconfig", paths: [o.kubeconfig], from: "--kubeconfig" };
  const listed = (o.env.KUBECONFIG ?? "").split(delimiter).filter((p) => p !== "");
  if (listed.length > 0) return { kind: "kubeconfig", paths: listed, from: "$KUBECONFIG" };
  const saDir = o.saDir ?? SERVICE_ACCOUNT_DIR;
  if (set(o.env.KUBERNETES_SERVICE_HOST) && set(o.env.KUBERNETES_SERVICE_PORT) && fs.existsSync(join(saDir, "token"))) return { kind: "in-cluster", saDir };
  return { kind: "kubeconfig", paths: [join(set(o.env.HOME) ? o.env.HOME : homedir(), ".kube", "config")], from: "~/.kube/config" };
}

export function describeSource(s: KubeSource): string {
  return s.kind === "in-cluster" ? `in-cluster (${s.saDir})` : `${s.paths.join(delimiter)} (${s.from})`;
}

export interface KubeconfigCluster {
  readonly name: string;
  /** Without a trailing slash, as client-node keeps it. */
  readonly server: string;
  /** PEM, from `certificate-authority-data` or else `certificate-authority`; undefined = system roots. */
  readonly ca: string | undefined;
  readonly tlsServerName: string | undefined;
}

/** One source, resolved: everything a client of this cluster needs. */
export interface KubeAccess {
  readonly source: KubeSource;
  readonly cluster: KubeconfigCluster;
  /** The context's namespace, or the service account's. */
  readonly namespace: string | undefined;
  /** The current user's credentials, when they work without client-node. */
  readonly connection: DirectConnectionOptions | undefined;
  /** Why the credentials need client-node (e.g. `exec`), or undefined when they do not. */
  readonly needsClientNode: string | undefined;
  /** The merged kubeconfig with every file path absolute, for client-node (kubeconfig sources only). */
  readonly document: Record<string, unknown> | undefined;
  /** The context the document is read at. */
  readonly context: string | undefined;
}

/** A kubeconfig source, resolved, with the files it was read from (joined by the path delimiter). */
export type KubeconfigFile = KubeAccess & { readonly path: string };

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

// User fields only client-node (or client-go) can act on.
const CLIENT_NODE_USER_FIELDS = ["exec", "auth-provider", "username", "password", "as", "as-groups", "as-uid", "as-user-extra"];
// Fields that name files, resolved against the kubeconfig that defines them (client-go's ResolvePaths).
const FILE_FIELDS: Readonly<Record<string, readonly string[]>> = {
  clusters: ["certificate-authority"],
  users: ["client-certificate", "client-key", "tokenFile", "token-file"],
};

/**
 * Reads and merges kubeconfig files as client-go does: for each named
 * cluster, user and context the first file that defines it wins, and so
 * does the first `current-context`. Relative file paths are made absolute
 * against the file that holds them. Missing files are skipped when others
 * were read (as client-go does for `$KUBECONFIG`); none at all is an error.
 */
async function readMerged(paths: readonly string[], fail: (message: string, cause?: unknown) => ConfigError): Promise<Record<string, unknown>> {
  const { load } = await import("js-yaml"); // loaded only here, and small
  const merged: Record<string, unknown> = { clusters: [], users: [], contexts: [] };
  let read = 0;
  for (const path of paths) {
    let text: string;
    try {
      text = fs.readFileSync(path, "utf8");
    } catch (e) {
      if (paths.length > 1 && e instanceof Error && "code" in e && e.code === "ENOENT") continue;
      throw fail(`cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`, e);
    }
    let doc: unknown;
    try {
      doc = load(text);
    } catch (e) {
      throw fail(`${path}: ${e instanceof Error ? (e.message.split("\n")[0] ?? "") : String(e)}`, e);
    }
    if (!isRecord(doc)) throw fail(`${path} is not a kubeconfig (expected a mapping)`);
    read++;
    const dir = dirname(path);
    for (const list of ["clusters", "users", "contexts"] as const) {
      const into = merged[list] as Record<string, unknown>[];
      const entries = Array.isArray(doc[list]) ? (doc[list] as unknown[]) : [];
      for (const e of entries) {
        if (!isRecord(e) || typeof e["name"] !== "string" || into.some((x) => x["name"] === e["name"])) continue;
        const key = list === "clusters" ? "cluster" : list === "users" ? "user" : "context";
        const body = isRecord(e[key]) ? { ...e[key] } : {};
        for (const f of FILE_FIELDS[list] ?? []) {
          const p = str(body[f]);
          if (p !== undefined && !isAbsolute(p)) body[f] = join(dir, p);
        }
        const exec = body["exec"];
        if (isRecord(exec) && typeof exec["command"] === "string" && exec["command"].includes("/") && !isAbsolute(exec["command"])) {
          body["exec"] = { ...exec, command: join(dir, exec["command"]) };
        }
        into.push({ name: e["name"], [key]: body });
      }
    }
    if (merged["current-context"] === undefined && str(doc["current-context"]) !== undefined) merged["current-context"] = doc["current-context"];
  }
  if (read === 0) throw fail("none of the files exists");
  return merged;
}

function named(doc: Record<string, unknown>, list: string, name: string, key: string): Record<string, unknown> | undefined {
  const entries = doc[list];
  if (!Array.isArray(entries)) return undefined;
  const e: unknown = entries.find((x) => isRecord(x) && x["name"] === name);
  if (!isRecord(e)) return undefined;
  const v = e[key];
  return isRecord(v) ? v : {};
}

/**
 * Reads the kubeconfig files (YAML or JSON) of `paths` and resolves
 * `context` (default: the current one). Throws {@link ConfigError} (flag
 * `flag`) for an unreadable file, a missing context, cluster or server, and
 * `insecure-skip-tls-verify`.
 */
export async function readKubeconfig(paths: string | readonly string[], opts: { context?: string | undefined; flag?: string; source?: KubeSource } = {}): Promise<KubeconfigFile> {
  const list = typeof paths === "string" ? [paths] : paths;
  const path = list.join(delimiter);
  const flag = opts.flag ?? "--kubeconfig";
  const fail = (message: string, cause?: unknown): ConfigError => new ConfigError(flag, `kubeconfig ${JSON.stringify(path)}: ${message}`, cause === undefined ? undefined : { cause });
  const doc = await readMerged(list, fail);
  const read = (field: string, p: string): string => {
    try {
      return fs.readFileSync(p, "utf8");
    } catch (e) {
      throw fail(`cannot read ${field} ${JSON.stringify(p)}: ${e instanceof Error ? e.message : String(e)}`, e);
    }
  };
  const data = (v: string): string => Buffer.from(v, "base64").toString("utf8");

  const current = opts.context ?? str(doc["current-context"]);
  if (current === undefined) throw fail("the kubeconfig has no current context");
  const ctx = named(doc, "contexts", current, "context");
  if (ctx === undefined) {
    if (opts.context !== undefined) throw new ConfigError("--context", `invalid --context ${JSON.stringify(opts.context)}: no such context in the kubeconfig`);
    throw fail(`no context named ${JSON.stringify(current)}`);
  }
  const clusterName = str(ctx["cluster"]);
  const c = clusterName === undefined ? undefined : named(doc, "clusters", clusterName, "cluster");
  if (clusterName === undefined || c === undefined) throw fail(`context ${JSON.stringify(current)} names no cluster that the file defines`);
  const server = str(c["server"]);
  if (server === undefined) throw fail(`cluster ${JSON.stringify(clusterName)} has no server`);
  // Over plain HTTP (loopback devapi only, enforced by the connection) there is
  // nothing to verify: client-node insists on the flag there, so it is let be.
  if (c["insecure-skip-tls-verify"] === true && !server.startsWith("http://")) {
    throw new ConfigError(flag, `cluster ${JSON.stringify(clusterName)} sets insecure-skip-tls-verify; shardcar always verifies the apiserver certificate`);
  }
  const caData = str(c["certificate-authority-data"]);
  const caFile = str(c["certificate-authority"]);
  const cluster: KubeconfigCluster = {
    name: clusterName,
    server: server.replace(/\/$/, ""),
    ca: caData !== undefined ? data(caData) : caFile !== undefined ? read("certificate-authority", caFile) : undefined,
    tlsServerName: str(c["tls-server-name"]),
  };
  const base = { path, source: opts.source ?? { kind: "kubeconfig" as const, paths: list, from: "--kubeconfig" as const }, cluster, namespace: str(ctx["namespace"]), document: doc, context: current };

  const userName = str(ctx["user"]);
  const u = userName === undefined ? {} : (named(doc, "users", userName, "user") ?? {});
  const unsupported = CLIENT_NODE_USER_FIELDS.filter((k) => u[k] !== undefined && u[k] !== null && u[k] !== "");
  if (str(c["proxy-url"]) !== undefined) unsupported.push("proxy-url");
  if (unsupported.length > 0) return { ...base, connection: undefined, needsClientNode: unsupported.join(", ") };

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
    tokenFile: token === undefined ? tokenFile : undefined,
    flag,
  };
  return { ...base, connection, needsClientNode: undefined };
}

/** The real apiserver, as the kubelet describes it to every container. */
export function inClusterServer(env: NodeJS.ProcessEnv, flag = "--injected"): string {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!set(host) || !set(port)) {
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

/** In-cluster access from `saDir` (the injected sidecar's own, or the one the rule chose). */
export function inClusterAccess(env: NodeJS.ProcessEnv, saDir: string, flag = "--injected"): KubeAccess {
  const connection = inClusterConnection(env, saDir, flag);
  let namespace: string | undefined;
  try {
    namespace = str(fs.readFileSync(join(saDir, "namespace"), "utf8").trim());
  } catch {
    namespace = undefined; // optional, as in client-go
  }
  return {
    source: { kind: "in-cluster", saDir },
    cluster: { name: "in-cluster", server: connection.server, ca: connection.ca, tlsServerName: undefined },
    namespace,
    connection,
    needsClientNode: undefined,
    document: undefined,
    context: undefined,
  };
}

/**
 * The one loader: the source {@link chooseKubeSource} picks, read.
 * `context` applies to kubeconfig sources (`--context`).
 */
export async function loadKubeAccess(o: SourceOptions & { readonly context?: string | undefined; readonly flag?: string }): Promise<KubeAccess> {
  const source = chooseKubeSource(o);
  const flag = o.flag ?? "--kubeconfig";
  if (source.kind === "in-cluster") {
    if (o.context !== undefined) throw new ConfigError("--context", `--context ${JSON.stringify(o.context)} needs a kubeconfig, but the configuration is ${describeSource(source)}`);
    return inClusterAccess(o.env, source.saDir, flag);
  }
  try {
    return await readKubeconfig(source.paths, { context: o.context, flag, source });
  } catch (e) {
    if (e instanceof ConfigError && source.from === "~/.kube/config" && !fs.existsSync(source.paths[0] ?? "")) {
      throw new ConfigError(flag, `no cluster configuration: give --kubeconfig, set $KUBECONFIG, run in a pod (KUBERNETES_SERVICE_HOST and a service-account token), or create ${source.paths[0] ?? "~/.kube/config"}`, { cause: e });
    }
    throw e;
  }
}

/**
 * The credentials of `access` as a {@link Connection}: directly, or through
 * client-node when only it can produce them (loaded only then).
 */
export async function connectionFor(access: KubeAccess): Promise<Connection> {
  // Loaded when a client is wanted, not when only the upstream is (a static sidecar).
  const { directConnection, kubeConfigConnection } = await import("./client.ts");
  if (access.connection !== undefined) return directConnection(access.connection);
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  kc.loadFromString(JSON.stringify(access.document ?? {}));
  if (access.context !== undefined) kc.setCurrentContext(access.context);
  return kubeConfigConnection(kc);
}
