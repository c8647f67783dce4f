/**
 * Forwards one HTTP request to the apiserver: the hot path of every request
 * the proxy handles, sharded or not.
 *
 * This is what http-proxy-3's `web()` did for the proxy's options (a target
 * URL, a keep-alive agent, `changeOrigin`, `secure`, no `xfwd`), without
 * its generic machinery: per request it rebuilt a URL from the target,
 * ran five option-driven passes over the response, and allocated closures
 * for options this proxy never sets. Measured with
 * `bench/support/proxy-cost.ts` (proxy CPU per request at a fixed rate),
 * that machinery was about a tenth of the proxy's cost for a small GET and
 * a small sharded LIST (docs/performance.md, "Profiling the hot paths").
 * Upgrades (exec, attach, port-forward) still go through http-proxy-3.
 *
 * Semantics kept from http-proxy-3, so callers see no difference:
 * - request headers are copied as sent, except `trailer`; `host` becomes
 *   the apiserver's (changeOrigin); the path is the apiserver URL's path
 *   joined with the request's, adjacent slashes merged;
 * - passed-through responses drop `transfer-encoding` (Node re-frames the
 *   body), get `connection` from the client's request when the apiserver
 *   sent none, and keep every other header, the status code and message;
 * - an error on either request goes to `onError`, except a reset caused
 *   by a client that already went away, which just ends the upstream request;
 * - a client that goes away before its response finished ends the
 *   upstream request.
 */
import { request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Upstream } from "./upstream.ts";

export interface ForwardOptions {
  /** Edits the upstream request's headers before they are sent (sharded requests). */
  readonly headers?: (headers: OutgoingHttpHeaders) => void;
  /**
   * Handles the upstream response itself (sharded requests). Without it the
   * response is passed through unchanged.
   */
  readonly onResponse?: (proxyRes: IncomingMessage) => void;
  /** Called once per failed request (connection refused, reset, TLS failure). */
  readonly onError: (err: Error) => void;
}

/** The parts of the upstream URL every request needs, computed once. */
export interface ForwardTarget {
  readonly upstream: Upstream;
  readonly send: typeof httpRequest;
  readonly hostname: string;
  readonly port: number;
  /** `Host` header value (changeOrigin). */
  readonly host: string;
  /** The URL's path without a trailing slash; "" for the root. */
  readonly base: string;
  readonly tls: boolean;
}

export function forwardTarget(upstream: Upstream): ForwardTarget {
  const u = upstream.url;
  const tls = u.protocol === "https:";
  // WHATWG URLs keep IPv6 brackets in hostname; sockets want the bare address.
  const hostname = u.hostname.startsWith("[") && u.hostname.endsWith("]") ? u.hostname.slice(1, -1) : u.hostname;
  return {
    upstream,
    send: tls ? httpsRequest : httpRequest,
    hostname,
    port: u.port === "" ? (tls ? 443 : 80) : Number(u.port),
    host: u.host,
    base: u.pathname.replace(/\/+$/, ""),
    tls,
  };
}

function joinPath(base: string, path: string): string {
  if (base === "") return path.startsWith("/") ? path : `/${path}`;
  return path.startsWith("/") ? base + path : `${base}/${path}`;
}

/** Sends `req` upstream and its response (or `onResponse`'s) back to `res`. */
export function forward(t: ForwardTarget, req: IncomingMessage, res: ServerResponse, o: ForwardOptions): void {
  const headers: OutgoingHttpHeaders = {};
  for (const k in req.headers) {
    if (k !== "trailer") headers[k] = req.headers[k];
  }
  headers["host"] = t.host;
  o.headers?.(headers);
  const proxyReq = t.send({
    agent: t.upstream.agent,
    hostname: t.hostname,
    port: t.port,
    method: req.method,
    path: joinPath(t.base, req.url ?? "/"),
    headers,
    // Never skip verification upstream (the agent carries the CA).
    ...(t.tls ? { rejectUnauthorized: true } : {}),
  });
  // A client that leaves before its response finished ends the upstream request.
  res.on("close", () => {
    if (!res.writableFinished) proxyReq.destroy();
  });
  const onError = (err: Error & { code?: string }): void => {
    if (req.socket.destroyed && err.code === "ECONNRESET") {
      proxyReq.destroy();
      return;
    }
    o.onError(err);
  };
  req.on("error", onError);
  proxyReq.on("error", onError);
  proxyReq.on("response", (proxyRes) => {
    if (o.onResponse !== undefined) {
      o.onResponse(proxyRes);
      return;
    }
    if (!res.headersSent) {
      const h = proxyRes.headers;
      delete h["transfer-encoding"];
      if (req.httpVersion === "1.0") h["connection"] = req.headers["connection"] ?? "close";
      else if (h["connection"] === undefined) h["connection"] = req.headers["connection"] ?? "keep-alive";
      for (const k in h) {
        const v = h[k];
        if (v !== undefined) res.setHeader(k, v);
      }
      res.statusCode = proxyRes.statusCode ?? 502;
      if (proxyRes.statusMessage && req.httpVersionMajor === 1) res.statusMessage = proxyRes.statusMessage;
    }
    if (!res.writableEnded) proxyRes.pipe(res);
  });
  req.pipe(proxyReq);
}
