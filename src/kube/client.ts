/**
 * shardcar's one door to the API server, for every call it makes with its
 * *own* identity: the ring member's Lease and ShardRing calls, the
 * coordinator's and labeller's, the manager's certificate Secret and webhook
 * configuration, and the operator tools (`audit`, `preflight`, `hash
 * --for-object`) through the non-throwing {@link ApiClient.raw}. JSON over
 * `node:http`/`node:https`: one request, or one watch stream, at a time.
 * Where it goes and with which credentials comes from the one loader,
 * src/kube/config.ts. Failures are typed: {@link ApiError} (the server
 * answered no), {@link NoAnswerError} and its {@link TimeoutError} (it did
 * not answer usably).
 *
 * Why not `@kubernetes/client-node`: importing it costs an idle sidecar
 * ~80 MB of RSS and ~0.6 s of start (docs/performance.md, P6), and the member
 * needs a handful of REST calls. Where a kubeconfig needs what only
 * client-node can do (exec plugins, auth providers, proxies), the caller
 * loads it and passes it in through {@link kubeConfigConnection}; this file
 * only imports its types.
 *
 * Security: TLS is always verified in {@link directConnection} (the CA given,
 * else the system roots); plain HTTP only to loopback (devapi). Tokens go in
 * the `Authorization` header and nowhere else: errors carry the status code
 * and the server's Status message, never a request or a raw response body.
 */
import { readFile } from "node:fs/promises";
import type * as http from "node:http";
import { http as nodeHttp } from "../node-builtins.ts";
import * as https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
import { ConfigError, ShardcarError } from "../errors.ts";
import { isRecord } from "../is-record.ts";

/**
 * No usable answer: the connection or TLS failed, the call or the stream
 * timed out or was cut, or what came back was too large or not JSON.
 * Callers retry these; an {@link ApiError} is the server's considered answer.
 */
export class NoAnswerError extends ShardcarError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("SHARDCAR_ERR_UPSTREAM", message, options);
  }
}

/** The call had no answer in time, or a watch was silent too long (the caller resumes). */
export class TimeoutError extends NoAnswerError {}

/** A non-2xx answer. `statusCode` is what callers branch on (404, 409, 410). */
export class ApiError extends ShardcarError {
  readonly statusCode: number;
  /** The Status object's `reason` (`Conflict`, `NotFound`, ...), when the server sent one. */
  readonly reason: string | undefined;
  constructor(statusCode: number, message: string, reason?: string) {
    super("SHARDCAR_ERR_UPSTREAM", message);
    this.statusCode = statusCode;
    this.reason = reason;
  }
}

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

export type Query = Readonly<Record<string, string | number | boolean | undefined>>;

export interface RawRequestOptions {
  readonly query?: Query | undefined;
  /** Sent as JSON. */
  readonly body?: unknown;
  /** Default `application/json`; e.g. `application/merge-patch+json` for a PATCH. */
  readonly contentType?: string | undefined;
  /** Default `application/json`; e.g. metadata only: `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`. */
  readonly accept?: string | undefined;
  /** The whole call, connect to last byte. Default 30 s. */
  readonly timeoutMs?: number | undefined;
}

/** The ring's calls name their timeout: each is budgeted against a lease deadline. */
export interface RequestOptions extends RawRequestOptions {
  readonly timeoutMs: number;
}

/** What {@link ApiClient.raw} resolves with. */
export interface RawResponse {
  readonly status: number;
  /** Parsed JSON body, or undefined when the body is empty or not JSON. */
  readonly body: unknown;
  readonly bytes: number;
}

export interface WatchHandle {
  /** Resolves when the stream ended: `undefined` when the server closed it cleanly, else why. Never rejects. */
  readonly done: Promise<Error | undefined>;
  /** Ends the stream; `done` resolves. */
  abort(): void;
}

// Nothing the ring reads comes near these; a bigger answer is a wrong path
// or a broken server, and must not exhaust the sidecar's memory.
const MAX_BODY_BYTES = 64 * 1024 * 1024;
// No single page the operator tools read is anywhere near this; a bigger one
// means a wrong path (or a list asked for without paging).
const MAX_RAW_BODY_BYTES = 512 * 1024 * 1024;
const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_EVENT_BYTES = 16 * 1024 * 1024;
// client-node's watch default: a stream silent this long (no event, no
// bookmark) is ended and resumed from its last resourceVersion.
const WATCH_INACTIVITY_MS = 30_000;

/** The error for a non-2xx answer: the Status message if the body is a Status, else the HTTP reason phrase. */
function apiError(status: number, body: Buffer): ApiError {
  let s: unknown;
  try {
    s = JSON.parse(body.toString("utf8"));
  } catch {
    s = undefined;
  }
  const st = isRecord(s) && s["kind"] === "Status" ? s : {};
  const message = typeof st["message"] === "string" && st["message"] !== "" ? st["message"] : (nodeHttp.STATUS_CODES[status] ?? "error");
  return new ApiError(status, message, typeof st["reason"] === "string" ? st["reason"] : undefined);
}

/**
 * Arms a timeout: calls `fn` after `ms` unless the returned function is
 * called first. The ring hands its clock's (src/ring/clock.ts), so a call's
 * deadline and the renew deadline it serves are measured on one clock.
 */
export type SetTimer = (ms: number, fn: () => void) => () => void;

const realTimer: SetTimer = (ms, fn) => {
  const t = setTimeout(fn, Math.max(0, ms));
  return () => clearTimeout(t);
};

/** JSON requests and watches on one {@link Connection}. Stateless apart from the connection's agent; safe to share. */
export class ApiClient {
  readonly #conn: Connection;
  readonly #timer: SetTimer;
  constructor(conn: Connection, timer: SetTimer = realTimer) {
    this.#conn = conn;
    this.#timer = timer;
  }

  get server(): URL {
    return this.#conn.server;
  }

  #url(path: string, query: Query | undefined): URL {
    const base = this.#conn.server.href.endsWith("/") ? this.#conn.server.href : `${this.#conn.server.href}/`;
    const url = new URL(path.replace(/^\/+/, ""), base);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    return url;
  }

  async #open(method: string, url: URL, payload: Buffer | undefined, types: { accept?: string | undefined; contentType?: string | undefined } = {}): Promise<http.ClientRequest> {
    const { agent, headers } = await this.#conn.prepare();
    const h: http.OutgoingHttpHeaders = { ...headers, accept: types.accept ?? "application/json", "user-agent": "shardcar" };
    if (payload !== undefined) {
      h["content-type"] = types.contentType ?? "application/json";
      h["content-length"] = String(payload.length);
    }
    const mod = url.protocol === "http:" ? nodeHttp : https;
    return mod.request(url, { method, headers: h, ...(agent === undefined ? {} : { agent }) });
  }

  /**
   * One exchange, whatever the status; rejects with {@link NoAnswerError} only.
   *
   * A request sent on a kept-alive connection that the server closed as idle
   * in the same instant fails with ECONNRESET (or EPIPE) before any answer:
   * the server never read it. It is sent again once on a new connection, as
   * Node's documentation advises (`request.reusedSocket`). Without this, a
   * member whose renewals came just over the server's idle timeout apart lost
   * a renewal to each close, and under load fenced itself (S1, issue 32).
   * Safe for every call shardcar makes: its writes carry a resourceVersion
   * or are creates, so one that did land answers 409 on the second try.
   */
  async #exchange(method: string, path: string, opts: RawRequestOptions, maxBytes: number, resend = true): Promise<{ readonly status: number; readonly body: Buffer; readonly where: string }> {
    const url = this.#url(path, opts.query);
    const payload = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
    const where = `${method} ${url.pathname}`;
    const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    let req: http.ClientRequest | undefined;
    let expired: Error | undefined;
    // Armed before the connection is prepared: the deadline covers the whole call.
    const disarm = this.#timer(timeoutMs, () => {
      expired = new TimeoutError(`${where}: no answer within ${timeoutMs} ms`);
      req?.destroy(expired);
    });
    try {
      req = await this.#open(method, url, payload, opts);
    } catch (e) {
      disarm();
      throw e;
    }
    const sent = req;
    if (expired !== undefined) sent.destroy(expired);
    return new Promise((resolve, reject) => {
      let answered = false;
      const fail = (e: Error): void => {
        disarm();
        if (resend && !answered && expired === undefined && sent.reusedSocket && isStaleConnection(e)) {
          resolve(this.#exchange(method, path, opts, maxBytes, false));
          return;
        }
        reject(e instanceof ShardcarError ? e : new NoAnswerError(`${method} ${url.origin}${url.pathname}: ${e.message}`, { cause: e }));
      };
      sent.on("error", fail);
      sent.on("response", (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (b: Buffer) => {
          size += b.length;
          if (size > maxBytes) res.destroy(new NoAnswerError(`${where}: answer larger than ${maxBytes} bytes`));
          else chunks.push(b);
        });
        res.on("error", fail);
        res.on("end", () => {
          disarm();
          const status = res.statusCode ?? 0;
          if (status === 401) this.#conn.unauthorized();
          resolve({ status, body: Buffer.concat(chunks), where });
        });
      });
      sent.end(payload);
    });
  }

  /**
   * One call; resolves with the parsed JSON body of a 2xx answer, rejects
   * with {@link ApiError} for any other status, or with {@link NoAnswerError}
   * when there is no usable answer (connection, TLS, timeout, not JSON).
   */
  async request(method: string, path: string, opts: RequestOptions): Promise<unknown> {
    const { status, body, where } = await this.#exchange(method, path, opts, MAX_BODY_BYTES);
    if (status < 200 || status > 299) throw apiError(status, body);
    try {
      return body.length === 0 ? undefined : JSON.parse(body.toString("utf8"));
    } catch (e) {
      throw new NoAnswerError(`${where}: answer ${status} is not JSON`, { cause: e });
    }
  }

  /**
   * One call that never throws for an answer: resolves with any status and
   * the body parsed when it is JSON, for callers that judge every status
   * themselves (the operator tools); rejects with {@link NoAnswerError} only
   * when there is none. Bounded by {@link MAX_RAW_BODY_BYTES}: the tools
   * read whole pages of a list.
   */
  async raw(method: string, path: string, opts: RawRequestOptions = {}): Promise<RawResponse> {
    const { status, body } = await this.#exchange(method, path, opts, MAX_RAW_BODY_BYTES);
    let parsed: unknown;
    try {
      parsed = body.length === 0 ? undefined : JSON.parse(body.toString("utf8"));
    } catch {
      parsed = undefined;
    }
    return { status, body: parsed, bytes: body.length };
  }

  /** {@link raw} for a GET. */
  get(path: string, opts: RawRequestOptions = {}): Promise<RawResponse> {
    return this.raw("GET", path, opts);
  }

  /**
   * A watch (`?watch=true`): calls `onEvent` with each event's type and
   * object, in order. The stream ends on a non-200 answer ({@link ApiError}),
   * a line that is not a JSON event (the caller should relist), a connection
   * error, {@link WATCH_INACTIVITY_MS} without a byte (an error named
   * `TimeoutError`), or the server closing it (`undefined`). `accept` as
   * in {@link RequestOptions}.
   */
  watch(path: string, query: Query, onEvent: (type: string, object: unknown) => void, inactivityMs = WATCH_INACTIVITY_MS, accept?: string): WatchHandle {
    const url = this.#url(path, { ...query, watch: true });
    const where = `watch ${url.pathname}`;
    let req: http.ClientRequest | undefined;
    let over = false;
    let disarm = (): void => {};
    let resolveDone: (e: Error | undefined) => void = () => {};
    const done = new Promise<Error | undefined>((resolve) => (resolveDone = resolve));
    const finish = (e: Error | undefined, destroy = true): void => {
      if (over) return;
      over = true;
      disarm();
      // A stream the server ended cleanly leaves its socket to the agent.
      if (destroy) req?.destroy();
      resolveDone(e);
    };
    const arm = (): void => {
      disarm();
      disarm = this.#timer(inactivityMs, () => finish(new TimeoutError(`${where}: nothing received for ${inactivityMs} ms`)));
    };
    const fail = (message: string): void => finish(new NoAnswerError(`${where}: ${message}`));
    arm();
    this.#open("GET", url, undefined, { accept }).then(
      (r) => {
        req = r;
        if (over) {
          r.on("error", () => {});
          r.destroy();
          return;
        }
        r.on("error", (e) => finish(e instanceof ShardcarError ? e : new NoAnswerError(`${where}: ${e.message}`, { cause: e })));
        r.on("response", (res) => {
          const status = res.statusCode ?? 0;
          if (status !== 200) {
            const chunks: Buffer[] = [];
            let size = 0;
            res.on("data", (b: Buffer) => {
              size += b.length;
              if (size <= 64 * 1024) chunks.push(b);
            });
            res.on("end", () => {
              if (status === 401) this.#conn.unauthorized();
              finish(apiError(status, Buffer.concat(chunks)), false);
            });
            res.on("error", (e) => finish(e));
            return;
          }
          let pending: Buffer[] = [];
          let pendingBytes = 0;
          res.on("data", (b: Buffer) => {
            if (over) return;
            arm();
            let from = 0;
            for (let nl = b.indexOf(0x0a); nl !== -1; nl = b.indexOf(0x0a, from)) {
              pending.push(b.subarray(from, nl));
              const line = Buffer.concat(pending).toString("utf8");
              pending = [];
              pendingBytes = 0;
              from = nl + 1;
              if (line.trim() === "") continue;
              let ev: unknown;
              try {
                ev = JSON.parse(line);
              } catch {
                // Skipping it would leave the caller's snapshot silently stale.
                return fail("an event is not JSON");
              }
              if (!isRecord(ev) || typeof ev["type"] !== "string") return fail("an event has no type");
              onEvent(ev["type"], ev["object"]);
              if (over) return;
            }
            if (from < b.length) {
              pendingBytes += b.length - from;
              if (pendingBytes > MAX_EVENT_BYTES) return fail(`an event larger than ${MAX_EVENT_BYTES} bytes`);
              pending.push(b.subarray(from));
            }
          });
          res.on("error", (e) => finish(e));
          // Ended by the server (its timeout) or cut: either way the caller
          // resumes from the last event it saw, as client-node's watch did.
          res.on("end", () => finish(undefined, false));
          res.on("close", () => finish(undefined));
        });
        r.end();
      },
      (e: unknown) => finish(e instanceof Error ? e : new Error(String(e))),
    );
    return { done, abort: () => finish(undefined) };
  }
}

/** The errors of a kept-alive connection the server closed before it read the request. */
function isStaleConnection(e: Error): boolean {
  const code = (e as NodeJS.ErrnoException).code;
  return code === "ECONNRESET" || code === "EPIPE";
}
