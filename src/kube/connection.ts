/**
 * Where shardcar's own API calls go and who they say they are: a
 * {@link Connection} prepares each request's agent (trust, client
 * certificate, keep-alive) and credential headers. Two makers: a direct one
 * from a server URL, CA and token file (the sidecar's in-cluster
 * credentials), and one over a client-node KubeConfig for what only
 * client-node can do (exec plugins, auth providers). Apart from
 * `client.ts` because how a connection is made is not how a call is made;
 * `client.ts` re-exports all of it.
 *
 * Security: TLS is always verified (the CA given, else the system roots);
 * plain HTTP only to loopback (devapi). Tokens go in the `Authorization`
 * header and nowhere else.
 */
import { readFile } from "node:fs/promises";
import type * as http from "node:http";
import * as https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
import { http as nodeHttp } from "../node-builtins.ts";
import { ConfigError, ShardcarError } from "../errors.ts";

/** How a request reaches the server and who it says it is. */
export interface Connection {
  /** The server, possibly with a path prefix (e.g. behind a gateway). */
  readonly server: URL;
  /** The agent (trust, client certificate) and credential headers for the next request. */
  prepare(): Promise<{ readonly agent: http.Agent | undefined; readonly headers: Readonly<Record<string, string>> }>;
  /** The server answered 401: credentials may have rotated since they were read. */
  unauthorized(): void;
}

export interface DirectConnectionOptions {
  readonly server: string;
  /** PEM bundle the apiserver certificate must chain to; undefined = the system roots. */
  readonly ca?: string | undefined;
  /** The name to verify the certificate against, when it is not the server's host. */
  readonly tlsServerName?: string | undefined;
  /** PEM client certificate and key. */
  readonly clientCert?: { readonly cert: string; readonly key: string } | undefined;
  readonly token?: string | undefined;
  /** Read now and again every minute, as client-go does, so a rotated (projected) token is picked up. */
  readonly tokenFile?: string | undefined;
  /** The flag to blame in a {@link ConfigError}. */
  readonly flag?: string | undefined;
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

// client-go's cached file token source: a token read from a file is good for
// a minute and refreshed 10 s before that.
const TOKEN_REREAD_MS = 50_000;

/** A bearer token file, re-read periodically and after a 401; a failed re-read keeps the last token. */
export class TokenFile {
  readonly path: string;
  readonly #now: () => number;
  #token: string | undefined;
  #readAt = Number.NEGATIVE_INFINITY;
  constructor(path: string, now: () => number = () => performance.now()) {
    this.path = path;
    this.#now = now;
  }
  async get(): Promise<string> {
    const now = this.#now();
    if (this.#token !== undefined && now - this.#readAt < TOKEN_REREAD_MS) return this.#token;
    try {
      const t = (await readFile(this.path, "utf8")).trim();
      if (t === "") throw new Error("the file is empty");
      this.#token = t;
      this.#readAt = now;
    } catch (e) {
      // A token being rotated may be briefly unreadable; the old one is
      // still valid for a while (client-go does the same).
      if (this.#token === undefined) throw new ShardcarError("SHARDCAR_ERR_UPSTREAM", `cannot read the token file ${this.path}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    return this.#token;
  }
  invalidate(): void {
    this.#readAt = Number.NEGATIVE_INFINITY;
  }
}

/**
 * A connection without client-node: a keep-alive agent that verifies the
 * server against `ca`, and a static or file-backed bearer token.
 */
export function directConnection(o: DirectConnectionOptions): Connection {
  const flag = o.flag ?? "--kubeconfig";
  let server: URL;
  try {
    server = new URL(o.server);
  } catch (e) {
    throw new ConfigError(flag, `apiserver address ${JSON.stringify(o.server)} is not a URL`, { cause: e });
  }
  let agent: http.Agent;
  if (server.protocol === "http:") {
    // Plain HTTP exists for the embedded devapi only.
    if (!LOOPBACK.has(server.hostname)) throw new ConfigError(flag, `refusing plain-HTTP apiserver ${o.server}: only loopback development servers may skip TLS`);
    agent = new nodeHttp.Agent({ keepAlive: true });
  } else if (server.protocol === "https:") {
    // rejectUnauthorized stays true: the apiserver is always verified.
    agent = new https.Agent({
      keepAlive: true,
      rejectUnauthorized: true,
      ...(o.ca === undefined ? {} : { ca: o.ca }),
      ...(o.tlsServerName === undefined ? {} : { servername: o.tlsServerName }),
      ...(o.clientCert === undefined ? {} : { cert: o.clientCert.cert, key: o.clientCert.key }),
    });
  } else {
    throw new ConfigError(flag, `unsupported apiserver scheme in ${o.server}`);
  }
  const file = o.tokenFile === undefined ? undefined : new TokenFile(o.tokenFile);
  const fixed = o.token;
  return {
    server,
    async prepare() {
      const token = file !== undefined ? await file.get() : fixed;
      const headers: Record<string, string> = {};
      if (token !== undefined) headers["authorization"] = `Bearer ${token}`;
      return { agent, headers };
    },
    unauthorized() {
      file?.invalidate();
    },
  };
}

const keepAliveTwins = new WeakMap<http.Agent, http.Agent>();

/**
 * client-node's agent for the cluster, with keep-alive. client-node makes a
 * plain `new https.Agent(options)` (or `http.Agent` for a loopback devapi),
 * and since Node 19 only the global agent keeps connections alive by
 * default: every call would open a new connection, a TLS handshake per
 * labeller PATCH, Lease renewal or status write. The twin has the same
 * options (CA, client certificate, server name, verification) and is made
 * once per client-node agent, which client-node itself caches per cluster.
 * A proxy agent (`proxy-url`) is another class and is used as it is.
 */
function keepingAlive(agent: http.Agent): http.Agent {
  const ctor = agent.constructor;
  if (ctor !== https.Agent && ctor !== nodeHttp.Agent) return agent;
  const options = (agent as http.Agent & { options?: https.AgentOptions }).options ?? {};
  if (options.keepAlive === true) return agent;
  let twin = keepAliveTwins.get(agent);
  if (twin === undefined) {
    twin = ctor === https.Agent ? new https.Agent({ ...options, keepAlive: true }) : new nodeHttp.Agent({ ...options, keepAlive: true });
    keepAliveTwins.set(agent, twin);
  }
  return twin;
}

/**
 * A connection with a client-node KubeConfig's trust and credentials (every
 * auth method it supports), for callers that already load client-node: the
 * manager, tests, the demo. Same rules as client-node itself, including its
 * handling of `insecure-skip-tls-verify`.
 */
export function kubeConfigConnection(kc: KubeConfig): Connection {
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new ConfigError("--kubeconfig", "the kubeconfig has no current cluster");
  return {
    server: new URL(cluster.server),
    async prepare() {
      const o: https.RequestOptions = {};
      await kc.applyToHTTPSOptions(o);
      const headers: Record<string, string> = {};
      const h: unknown = o.headers;
      if (typeof h === "object" && h !== null) for (const [k, v] of Object.entries(h)) if (typeof v === "string") headers[k.toLowerCase()] = v;
      if (typeof o.auth === "string") headers["authorization"] = `Basic ${Buffer.from(o.auth).toString("base64")}`;
      return { agent: o.agent instanceof nodeHttp.Agent ? keepingAlive(o.agent) : undefined, headers };
    },
    unauthorized() {},
  };
}
