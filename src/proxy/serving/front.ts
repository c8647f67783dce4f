/**
 * The listener's front door, between node's HTTP server and the
 * {@link ShardProxy} handlers. It makes the request target the one that is
 * forwarded (see `src/proxy/request/request-target.ts`), refuses upgrades it cannot serve safely,
 * and is the last guard: a handler that throws is a bug, answered with a 500
 * Status (or a closed connection), a log line and a counter, never a process
 * exit. Every request the listener can receive gets an answer or a clean
 * close; the controller's other requests go on being served.
 *
 * It also ends what a vanished client leaves behind. Node aborts a request
 * whose client goes away only while its response is unfinished, and only
 * while the connection is its HTTP server's: one already answered (a 404 to
 * a GET with a body) whose body never arrived stays open, and so do requests
 * pipelined ahead of an upgrade, which takes the connection away. Their
 * copies upstream stay open too, holding an apiserver connection (or a
 * watch) for good. The front aborts them the way node aborts the others (an
 * ECONNRESET `aborted` error) and destroys the responses still queued behind
 * them, as node does when a connection closes: their close ends what was
 * sent upstream (http-proxy-3, the lineage) and keeps a request the proxy
 * held back from being sent at all. Such an upgrade (or CONNECT) then closes
 * its connection unanswered.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { Logger } from "../../log.ts";
import { classify, type ResourceIndex } from "../request/classify.ts";
import type { ProxyMetrics } from "../reporting/metrics.ts";
import { readRequestTarget } from "../request/request-target.ts";
import { endWithStatus, sendStatus } from "./status.ts";

export interface FrontOptions {
  readonly handle: (req: IncomingMessage, res: ServerResponse) => void;
  readonly handleUpgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  readonly index: ResourceIndex;
  readonly logger: Logger;
  readonly metrics: ProxyMetrics;
}

export interface Front {
  /** node's `request` listener. */
  readonly request: (req: IncomingMessage, res: ServerResponse) => void;
  /** node's `checkContinue` listener: a request with `Expect: 100-continue`. */
  readonly checkContinue: (req: IncomingMessage, res: ServerResponse) => void;
  /** node's `upgrade` listener. */
  readonly upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  /** node's `connect` listener: a CONNECT request, which asks for a tunnel. */
  readonly connect: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
}

/**
 * Why an upgrade is refused, if it is. An upgraded connection is a byte pipe
 * the proxy cannot filter: a sharded list or watch over it would reach the
 * controller whole. Only subresources upgrade (exec, attach, portforward,
 * proxy) and non-resource paths pass through. A list, watch or get of any
 * other resource is refused too: controllers list and watch over plain HTTP,
 * and an apiserver that answers such a request without upgrading streams an
 * answer that http-proxy-3 relays without ending it when the client leaves.
 */
function upgradeRefusal(req: IncomingMessage, index: ResourceIndex): { reason: "sharded-upgrade" | "resource-upgrade"; message: string } | undefined {
  const cls = classify(req.method ?? "GET", req.url ?? "/", index);
  const upgrade = JSON.stringify(req.headers.upgrade ?? "");
  if (cls.kind !== "passthrough") {
    const what = cls.group === "" ? cls.resource.resource : `${cls.resource.resource}.${cls.group}`;
    return { reason: "sharded-upgrade", message: `shardcar: a sharded ${what} ${cls.kind} cannot be served over an upgraded connection (Upgrade: ${upgrade}), whose bytes the proxy cannot filter; send it as a plain HTTP request` };
  }
  if (cls.reason === "subresource" || cls.reason === "not-resource-path" || cls.reason === "method") return undefined;
  return {
    reason: "resource-upgrade",
    message: `shardcar: ${req.method ?? ""} ${JSON.stringify((req.url ?? "").slice(0, 200))} asks to upgrade the connection (Upgrade: ${upgrade}); shardcar upgrades only subresources such as exec, attach and portforward: send a list, watch or get as a plain HTTP request`,
  };
}

/** The ECONNRESET error node destroys an aborted request with. */
function aborted(): Error {
  return Object.assign(new Error("aborted"), { code: "ECONNRESET" });
}

export function createFront(opts: FrontOptions): Front {
  const { logger, metrics } = opts;
  /**
   * Per connection, its requests not yet done: answer unfinished or body not
   * ended. One close listener per connection, not one per request.
   */
  const pending = new WeakMap<Socket, Map<IncomingMessage, ServerResponse>>();
  const settled = (req: IncomingMessage, res: ServerResponse): boolean => req.complete && res.writableFinished;
  const track = (req: IncomingMessage, res: ServerResponse): void => {
    const socket = req.socket;
    let open = pending.get(socket);
    if (open === undefined) {
      const map = new Map<IncomingMessage, ServerResponse>();
      open = map;
      pending.set(socket, map);
      socket.once("close", () => abortAll(map));
    }
    const unsettled = open;
    unsettled.set(req, res);
    const forget = (): void => {
      if (settled(req, res)) unsettled.delete(req);
    };
    req.once("end", forget);
    // "finish", not "close": a sharded response already carries ten close
    // listeners (node's pipeline, http-proxy-3, the lineage), and an
    // eleventh makes node warn once per response. A response that never
    // finishes is one whose connection closes, which abortAll clears.
    res.once("finish", () => {
      forget();
      // node discards the rest of a body no handler read, but not of one
      // whose reading began: http-proxy-3 pipes a GET's body upstream, and
      // when the apiserver answers first the copy ends and leaves the body
      // paused mid-way. The connection then reads no more, and never sees
      // its client leave; it stayed open until the keep-alive timeout.
      // Read on and drop the rest, as node does for a body never read.
      if (!req.complete && !req.destroyed) {
        req.unpipe();
        req.resume();
      }
    });
  };
  const abortAll = (unsettled: Map<IncomingMessage, ServerResponse>): void => {
    for (const r of unsettled.keys()) if (!r.destroyed) r.destroy(aborted());
    unsettled.clear();
  };
  /** The target, made the forwarded one; or the refusal, already answered. */
  const accept = (req: IncomingMessage, refuse: (code: number, message: string) => void): boolean => {
    if (req.httpVersionMajor !== 1) {
      // As the apiserver (Go's net/http) answers any other version on an
      // HTTP/1 connection; http-proxy-3 would echo it in the status line of
      // an upgrade's answer that did not upgrade. (node's parser itself
      // refuses HTTP/1.2 and up.)
      metrics.rejectedRequests.inc({ reason: "http-version" });
      refuse(505, `shardcar: HTTP version ${JSON.stringify(req.httpVersion)} is not supported; send HTTP/1.1`);
      return false;
    }
    const target = readRequestTarget(req.url ?? "/");
    if (target.ok) {
      req.url = target.url;
      return true;
    }
    metrics.rejectedRequests.inc({ reason: target.reason });
    logger.debug({ method: req.method, reason: target.reason }, target.message);
    refuse(400, target.message);
    return false;
  };
  const failed = (listener: "request" | "upgrade", req: IncomingMessage, err: unknown, answer: (message: string) => void): void => {
    metrics.handlerFailures.inc({ listener });
    const message = err instanceof Error ? err.message : String(err);
    logger.error({ err, method: req.method, url: req.url, listener }, "request handler threw; answering 500");
    answer(`shardcar: internal error serving ${req.method ?? ""} ${JSON.stringify((req.url ?? "").slice(0, 200))}: ${message}`);
  };
  /**
   * An upgrade or a CONNECT takes the connection from node's HTTP server as
   * soon as it is parsed, even pipelined behind requests still being
   * answered: node no longer aborts those requests, nor closes their
   * responses still queued, when the client goes. (The response holding the
   * connection keeps node's close listener and closes with it.)
   */
  const orphanEarlier = (req: IncomingMessage): boolean => {
    const earlier = pending.get(req.socket);
    if (earlier === undefined) return false;
    // Settled but not yet forgotten: a body whose last bytes came in the
    // same read as the upgrade is complete, its end not yet emitted.
    for (const [r, res] of earlier) if (settled(r, res)) earlier.delete(r);
    if (earlier.size === 0) return false;
    const queued = [...earlier.values()].filter((res) => res.socket === null && !res.destroyed);
    abortAll(earlier);
    // As node's own abort of a closed connection's queued responses: destroy
    // emits the response's one close (on the next tick, since it has no
    // socket), from which its handlers learn the client is gone.
    for (const res of queued) res.destroy();
    return true;
  };
  /**
   * An upgrade or a CONNECT behind requests not yet done on its connection
   * closes the connection, unanswered (HTTP clients upgrade on a connection
   * of its own, or after the answers before it).
   * Their answers could only be written into what the upgrade made of it
   * (a 200 after the 101, a 101 inside a watch's body, an answer inside an
   * exec tunnel), and the response holding it closes only when it does.
   * (Aborting a request whose end node has not yet emitted destroys the
   * socket anyway, and a tunnel relayed on it would have nothing to end it.)
   */
  const refusedBehindEarlier = (req: IncomingMessage, socket: Duplex): boolean => {
    if (!orphanEarlier(req)) return false;
    metrics.rejectedRequests.inc({ reason: "pipelined-upgrade" });
    logger.debug({ method: req.method }, "an upgrade or CONNECT pipelined behind unfinished requests: connection closed");
    socket.destroy();
    return true;
  };
  const request = (req: IncomingMessage, res: ServerResponse): void => {
    if (!accept(req, (code, m) => sendStatus(res, code, m))) return;
    track(req, res);
    try {
      opts.handle(req, res);
    } catch (err) {
      failed("request", req, err, (m) => sendStatus(res, 500, m));
    }
  };
  return {
    request,
    checkContinue(req, res) {
      // Left to itself node sends the 100 at once, and for a request
      // pipelined behind one still being answered it queues the 100 on the
      // response, whose head it later puts in front of the queue: the client
      // reads "HTTP/1.1 100 Continue" inside that answer's body, and every
      // answer after it is misread. Only the response on the connection
      // sends the 100; a pipelined request has sent its body already, and a
      // server may leave the 100 out once content has arrived (RFC 9110
      // §10.1.1).
      if (res.socket !== null) res.writeContinue();
      request(req, res);
    },
    upgrade(req, socket, head) {
      if (refusedBehindEarlier(req, socket)) return;
      if (!accept(req, (code, m) => endWithStatus(socket, code, m, { method: req.method }))) return;
      try {
        const refusal = upgradeRefusal(req, opts.index);
        if (refusal !== undefined) {
          metrics.rejectedRequests.inc({ reason: refusal.reason });
          endWithStatus(socket, 400, refusal.message, { method: req.method });
          return;
        }
        opts.handleUpgrade(req, socket, head);
      } catch (err) {
        failed("upgrade", req, err, (m) => endWithStatus(socket, 500, m, { method: req.method }));
      }
    },
    connect(req, socket) {
      // Without this listener node destroys the connection, but the requests
      // pipelined ahead of the CONNECT would stay open upstream (a watch for
      // good). The apiserver has no tunnels to give: kubectl's exec, attach
      // and port-forward upgrade a GET or POST.
      if (refusedBehindEarlier(req, socket)) return;
      metrics.rejectedRequests.inc({ reason: "connect" });
      endWithStatus(socket, 405, `shardcar: CONNECT ${JSON.stringify((req.url ?? "").slice(0, 200))} asks for a tunnel, which neither shardcar nor the apiserver serves; exec, attach and port-forward upgrade a GET or POST`, { method: req.method });
    },
  };
}
