/**
 * A small HTTP(S) client for tests that talk to an apiserver or a proxy the
 * way a controller would, but read the raw answer: it verifies the server's
 * CA, sends a bearer token, and follows list pages. Shared by the
 * real-server lane (test/real) and the fault tests, for devapi and realapi
 * alike. Plus polling helpers.
 */
import * as http from "node:http";
import * as https from "node:https";
import { gunzipSync } from "node:zlib";
import { eventually } from "./wait.ts";

export interface Reply {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

export interface Target {
  /** Base URL, `https://127.0.0.1:N` (realapi, a TLS proxy) or `http://127.0.0.1:N` (a plain proxy). */
  readonly url: string;
  /** PEM the server certificate must chain to (https only). */
  readonly caPem?: string;
  /** Sent as `Authorization: Bearer …` unless undefined. */
  readonly token?: string;
}

const agents = new Map<string, https.Agent>();
function agentFor(caPem: string | undefined): https.Agent {
  const k = caPem ?? "";
  let a = agents.get(k);
  if (a === undefined) {
    a = new https.Agent({ keepAlive: true, maxSockets: 16, ...(caPem === undefined ? {} : { ca: caPem }), rejectUnauthorized: true });
    agents.set(k, a);
  }
  return a;
}

export interface RequestOptions {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Buffer;
  readonly timeoutMs?: number;
}

/** Opens a request; the caller reads the response (for watches). */
export function open(target: Target, pathAndQuery: string, opts: RequestOptions = {}): { req: http.ClientRequest; response: Promise<http.IncomingMessage> } {
  const url = new URL(pathAndQuery, target.url);
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (target.token !== undefined && headers["authorization"] === undefined) headers["authorization"] = `Bearer ${target.token}`;
  if (opts.body !== undefined) headers["content-length"] = String(Buffer.byteLength(opts.body));
  const reqOpts: https.RequestOptions = { method: opts.method ?? "GET", headers };
  const req = url.protocol === "https:" ? https.request(url, { ...reqOpts, agent: agentFor(target.caPem) }) : http.request(url, reqOpts);
  const response = new Promise<http.IncomingMessage>((resolve, reject) => {
    req.on("response", resolve);
    req.on("error", reject);
  });
  if (opts.timeoutMs !== undefined) req.setTimeout(opts.timeoutMs, () => req.destroy(new Error(`request to ${pathAndQuery} timed out after ${opts.timeoutMs} ms`)));
  req.end(opts.body);
  return { req, response };
}

/** One request, whole body. */
export async function call(target: Target, pathAndQuery: string, opts: RequestOptions = {}): Promise<Reply> {
  const { response } = open(target, pathAndQuery, { timeoutMs: 30_000, ...opts });
  const res = await response;
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks);
  // A client that sent Accept-Encoding: gzip (as Go's transport does) may get a compressed body.
  const body = res.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw;
  return { status: res.statusCode ?? 0, headers: res.headers, body };
}

export class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** JSON request; throws {@link HttpError} on anything but 2xx. */
export async function callJson<T = KubeObject>(target: Target, method: string, pathAndQuery: string, body?: unknown, contentType = "application/json"): Promise<T> {
  const r = await call(target, pathAndQuery, {
    method,
    headers: { accept: "application/json", ...(body === undefined ? {} : { "content-type": contentType }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (r.status < 200 || r.status > 299) throw new HttpError(r.status, `${method} ${pathAndQuery}: ${r.status} ${r.body.toString("utf8").slice(0, 400)}`);
  return JSON.parse(r.body.toString("utf8")) as T;
}

export interface KubeMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean; blockOwnerDeletion?: boolean }>;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  continue?: string;
  remainingItemCount?: number;
  shardInfo?: { selector?: string };
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: KubeMeta;
  [k: string]: unknown;
}

export interface KubeList {
  apiVersion?: string;
  kind?: string;
  metadata?: KubeMeta;
  items?: KubeObject[];
}

/** The whole collection at `path`, straight from the server (no proxy), following `continue`. */
export async function listAll(target: Target, path: string): Promise<{ items: KubeObject[]; resourceVersion: string }> {
  const items: KubeObject[] = [];
  let cont = "";
  let rv = "";
  for (;;) {
    const q = new URLSearchParams({ limit: "500" });
    if (cont !== "") q.set("continue", cont);
    const page = await callJson<KubeList>(target, "GET", `${path}?${q.toString()}`);
    items.push(...(page.items ?? []));
    if (rv === "") rv = page.metadata?.resourceVersion ?? "";
    cont = page.metadata?.continue ?? "";
    if (cont === "") return { items, resourceVersion: rv };
  }
}

/** Runs `fn` over `items` with at most `n` in flight. */
export async function inParallel<T, R>(items: readonly T[], n: number, fn: (x: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}

/** Polls `cond` until it holds; throws naming `what` after `timeoutMs` (a hang guard on the cluster clock, see wait.ts). */
export async function waitUntil(what: string, cond: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 200): Promise<void> {
  if (!(await eventually(cond, timeoutMs, everyMs))) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
}
