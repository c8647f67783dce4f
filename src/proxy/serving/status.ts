/**
 * The proxy's own error answers, shaped as Kubernetes `Status` objects so
 * clients surface them like any apiserver error: written on a response, or
 * on the raw socket of a refused upgrade. The bytes of a Status, in either
 * encoding and as a watch ERROR event, are src/proxy/scan/status-encoding.ts.
 */
import type { ServerResponse } from "node:http";
import { Socket } from "node:net";
import type { Duplex } from "node:stream";
// Not an ES import of node:http: it would load undici (src/node-builtins.ts).
import { http } from "../../node-builtins.ts";
import { statusBody } from "../scan/status-encoding.ts";

/** Writes an error answer, unless headers already went out (then the response is cut). */
function sendError(res: ServerResponse, code: number, contentType: string, body: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(code, { "content-type": contentType, "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** Writes a JSON Status response, unless headers already went out. */
export function sendStatus(res: ServerResponse, code: number, message: string, reason?: string): void {
  sendError(res, code, "application/json", JSON.stringify(statusBody(code, message, reason)));
}

/**
 * A plain-text error answer, for the one case a Status hides: a 5xx that
 * client-go meets in discovery, where it keeps the body of a text answer
 * only (routing.ts, an upstream that cannot be reached).
 */
export function sendPlainError(res: ServerResponse, code: number, message: string): void {
  sendError(res, code, "text/plain; charset=utf-8", `${message}\n`);
}

/** How long a refused upgrade's client may take to read the answer and close. */
const LINGER_MS = 10_000;

/**
 * The same answer on a raw socket (an upgrade request has no response
 * object), then the connection ends. The answer to a HEAD has the head
 * only, as node writes it for a response object: a client reads no body
 * after a HEAD's, and would take the Status for the next response.
 */
export function endWithStatus(socket: Duplex, code: number, message: string, opts: { readonly method?: string | undefined; readonly reason?: string } = {}): void {
  // An upgrade's socket is handed over without node's error handling: a
  // client already gone (EPIPE, ECONNRESET) must not become an uncaught error.
  socket.on("error", () => socket.destroy());
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  // It is handed over paused, too: whatever else the client sent would sit
  // unread, and its close would never be seen (the socket stayed open for
  // good). Read and drop it; a client that neither reads nor closes is cut.
  socket.resume();
  if (socket instanceof Socket) socket.setTimeout(LINGER_MS, () => socket.destroy());
  const body = JSON.stringify(statusBody(code, message, opts.reason));
  const head = `HTTP/1.1 ${code} ${http.STATUS_CODES[code] ?? ""}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n`;
  socket.end(opts.method === "HEAD" ? head : head + body);
}
