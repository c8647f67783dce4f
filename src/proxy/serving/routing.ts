/**
 * The proxy's four ways upstream, one http-proxy-3 instance each:
 * pass-through (untouched, upgrades included), pass-through reads (a GET
 * the proxy does not shard, sent without the body and framing the apiserver
 * never reads: request/classify.ts `readsNoBody`, server.ts), sharded LIST/WATCH (the
 * response handled by the proxy, so it can filter), and the renamed
 * leader-election lock (the response renamed back).
 *
 * Upstream requests always end when the controller goes away: a watch whose
 * client left must not stay open upstream (design.md, data path §1).
 */
import type { ClientRequest, IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { createProxyServer, type ProxyServer } from "http-proxy-3";
import type { Logger } from "../../log.ts";
import { filterableAccept } from "../request/accept.ts";
import { sendPlainError, sendStatus } from "./status.ts";
import { describeUpstreamError, type Upstream } from "./upstream.ts";

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade", "trailer"]);

/** An upstream response's end-to-end headers, to pass on to the client. */
export function endToEndHeaders(proxyRes: IncomingMessage): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(proxyRes.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
  return headers;
}

/**
 * Whether the apiserver's answer has a status node cannot write (below 100
 * or over 999: a broken apiserver or intermediary); if so it is answered 502
 * instead. Writing its head would throw, outside any handler, and end the
 * process. Run before anything writes the answer's head.
 */
function refusedStatus(proxyRes: IncomingMessage, res: ServerResponse): boolean {
  const code = proxyRes.statusCode ?? 0;
  if (code >= 100 && code <= 999) return false;
  proxyRes.destroy();
  sendStatus(res, 502, `shardcar: the apiserver answered status ${code}, which is not an HTTP status`, "InternalError");
  return true;
}

export interface Routes {
  readonly passthrough: ProxyServer;
  readonly reads: ProxyServer;
  readonly sharded: ProxyServer;
  readonly locks: ProxyServer;
  close(): void;
}

export function createRoutes(o: {
  upstream: Upstream;
  logger: Logger;
  /** Told of every request that did not reach the upstream (the upstream probe looks again). */
  upstreamFailed?: ((err: Error) => void) | undefined;
  onSharded: (proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse) => void;
  onLock: (proxyRes: IncomingMessage, res: ServerResponse) => void;
}): Routes {
  const common = { target: o.upstream.url.href, agent: o.upstream.agent, changeOrigin: true, secure: true, xfwd: false };
  const passthrough = createProxyServer({ ...common, ws: true });
  const reads = createProxyServer(common);
  const sharded = createProxyServer({ ...common, selfHandleResponse: true });
  const locks = createProxyServer({ ...common, selfHandleResponse: true });
  for (const p of [passthrough, reads, sharded, locks]) {
    p.on("error", (err: Error, _req: IncomingMessage, res: ServerResponse | Duplex) => {
      const why = describeUpstreamError(err);
      o.logger.warn({ upstream: o.upstream.url.origin, err: why }, "upstream request failed");
      o.upstreamFailed?.(err);
      // Plain text, not a Status: client-go shows a 5xx's text body in its
      // message, discovery's included (kubectl's "an error on the server
      // (...)"), where it reads a Status body only outside discovery and a
      // 503's message never: a JSON Status here showed kubectl "unknown".
      if ("writeHead" in res) sendPlainError(res, 502, `shardcar: apiserver ${o.upstream.url.origin} unreachable: ${why}`);
      else res.destroy();
    });
  }
  // An upgrade the apiserver answers without upgrading (a log with
  // follow=true streams on) is relayed by http-proxy-3, which never ends it
  // when the client leaves: its request upstream would stay open for good.
  passthrough.on("proxyReqWs", (proxyReq, _req, socket) => {
    proxyReq.once("response", (proxyRes: IncomingMessage) => {
      const stop = (): void => {
        proxyRes.destroy();
        socket.destroy();
      };
      socket.once("end", stop);
      socket.once("close", stop);
    });
  });
  // An answer the apiserver gave before the client's body was done (a 404
  // for a path it does not serve): the front then reads on and drops the
  // rest of the body (front.ts), so its copy upstream never ends, and the
  // upstream connection stayed in use for good. Half a body sent, it cannot
  // be reused: close it. (A lock request is read whole before it is sent,
  // and a sharded one is sent without its body.)
  passthrough.on("proxyRes", (proxyRes, req, res) => {
    // Most requests (every GET without a body) are complete by now: no
    // listener for them, since this runs once per pass-through answer.
    if (req.complete) return;
    res.once("finish", () => {
      // node sets `req` on a client's response (its ClientRequest); @types/node does not declare it.
      if (!req.complete) (proxyRes as IncomingMessage & { readonly req?: ClientRequest }).req?.destroy();
    });
  });
  // node sends a response's head with its first body bytes, and
  // http-proxy-3 only writes the head: a quiet watch (or a followed log)
  // passed through showed the controller no answer at all until its first
  // event, where the apiserver answers at once. A streamed answer (no
  // Content-Length) gets its head sent as soon as it is written.
  //
  // And an answer the apiserver cuts (a restart, a dropped connection) must
  // end for the client too: http-proxy-3 pipes it on, and a pipe passes on
  // neither an error nor an abort, so an unsharded watch cut upstream stayed
  // open at the controller, which then never saw another event.
  for (const p of [passthrough, reads]) {
    p.on("proxyRes", (proxyRes, _req, res) => {
      // A head already written stops http-proxy-3 writing its own.
      if (refusedStatus(proxyRes, res)) return;
      proxyRes.once("close", () => {
        if (!proxyRes.complete) res.destroy();
      });
      if (proxyRes.headers["content-length"] !== undefined) return;
      // http-proxy-3 writes the head after its proxyRes listeners, in the same tick.
      process.nextTick(() => {
        if (res.headersSent || res.destroyed || res.writableEnded) return;
        try {
          res.flushHeaders();
        } catch {
          // refusedStatus has refused every status node will not write; a
          // head that still cannot be written must end this answer, not the process.
          res.destroy();
        }
      });
    });
  }
  sharded.on("proxyReq", (proxyReq, req) => {
    // The proxy must be able to read the body; it never inflates gzip.
    proxyReq.removeHeader("accept-encoding");
    const accept = filterableAccept(req.headers.accept);
    if (accept !== undefined) proxyReq.setHeader("accept", accept);
  });
  sharded.on("proxyRes", (proxyRes, req, res) => {
    if (!refusedStatus(proxyRes, res)) o.onSharded(proxyRes, req, res);
  });
  locks.on("proxyReq", (proxyReq) => proxyReq.removeHeader("accept-encoding"));
  locks.on("proxyRes", (proxyRes, _req, res) => {
    if (!refusedStatus(proxyRes, res)) o.onLock(proxyRes, res);
  });
  return {
    passthrough,
    reads,
    sharded,
    locks,
    close() {
      passthrough.close();
      reads.close();
      sharded.close();
      locks.close();
    },
  };
}
