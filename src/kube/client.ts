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
import type * as http from "node:http";
import { http as nodeHttp } from "../node-builtins.ts";
import * as https from "node:https";
import { ShardcarError } from "../errors.ts";
import { isRecord } from "../is-record.ts";
import type { Connection } from "./connection.ts";

export { directConnection, kubeConfigConnection, TokenFile, type Connection, type DirectConnectionOptions } from "./connection.ts";

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
