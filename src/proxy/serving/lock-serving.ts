/**
 * Per-shard leader election on the wire: requests naming the controller's
 * lock are sent for `<name>-<identity>` (path and create/update bodies), and
 * the answers renamed back (`lock-rename.ts` does the renaming), so every
 * replica of an unmodified controller leads its own shard.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { pipeline, Readable } from "node:stream";
import type { ProxyServer } from "http-proxy-3";
import { renameBody, type LockMatch } from "./lock-rename.ts";
import { endToEndHeaders } from "./routing.ts";
import { sendStatus } from "./status.ts";

// A lock object is tiny; anything near etcd's 1.5 MiB object limit is not a lock.
const MAX_LOCK_BODY_BYTES = 1536 * 1024;

/**
 * Reads a whole body up to the lock limit and calls `done` with it. Past the
 * limit it stops reading and calls `tooLarge` (once) with what it has read;
 * the rest is still to come on `body`.
 */
function readSmall(body: Readable, tooLarge: (head: Buffer[]) => void, done: (raw: Buffer) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  const onData = (b: Buffer): void => {
    size += b.length;
    chunks.push(b);
    if (size <= MAX_LOCK_BODY_BYTES) return;
    body.off("data", onData);
    body.off("end", onEnd);
    body.pause();
    tooLarge(chunks);
  };
  const onEnd = (): void => done(Buffer.concat(chunks));
  body.on("data", onData);
  body.on("end", onEnd);
}

export class LockServing {
  readonly #proxy: ProxyServer;
  readonly #names = new WeakMap<ServerResponse, { name: string; renamed: string }>();

  constructor(proxy: ProxyServer) {
    this.#proxy = proxy;
  }

  /** Renames the lock in the request; {@link response} renames it back. */
  serve(req: IncomingMessage, res: ServerResponse, m: LockMatch, name: string, renamed: string): void {
    readSmall(
      req,
      () => {
        req.destroy();
        sendStatus(res, 413, "shardcar: leader-election lock request body too large", "RequestEntityTooLarge");
      },
      (raw) => {
        if (res.headersSent) return;
        // Creates and updates name the lock in the body too; a server refuses a
        // body whose name differs from the path's.
        const renamedBody = raw.length === 0 ? raw : (renameBody(raw, req.headers["content-type"], name, renamed) ?? raw);
        req.url = `${m.path}${m.query}`;
        // The body goes as read, so framed by its length. A GET's none: the
        // apiserver never reads it (as server.ts, for every read), and a
        // length left on it made the apiserver read the next request on the
        // pooled connection as the rest of the body. `Expect` was answered
        // by the front, and http-proxy-3 skips its proxyReq hooks (gzip's
        // removal) for a request that has one.
        const body = req.method === "GET" ? Buffer.alloc(0) : renamedBody;
        delete req.headers["transfer-encoding"];
        delete req.headers.expect;
        if (req.method === "GET") delete req.headers["content-length"];
        else if (body.length > 0) req.headers["content-length"] = String(body.length);
        this.#names.set(res, { name, renamed });
        this.#proxy.web(req, res, { buffer: Readable.from([body]) });
      },
    );
  }

  response(proxyRes: IncomingMessage, res: ServerResponse): void {
    const names = this.#names.get(res);
    proxyRes.on("error", () => res.destroy());
    readSmall(
      proxyRes,
      (head) => {
        // Larger than any lock object, so not one (a refusal that quotes a
        // huge name, say): it goes back as it came, unrenamed, and streamed.
        if (res.headersSent) return void proxyRes.destroy();
        res.writeHead(proxyRes.statusCode ?? 502, endToEndHeaders(proxyRes));
        for (const b of head) res.write(b);
        // pipeline, not pipe: a client gone mid-answer frees the upstream connection too.
        pipeline(proxyRes, res, () => {});
      },
      (raw) => {
        if (res.headersSent) return;
        const body = names === undefined ? raw : (renameBody(raw, proxyRes.headers["content-type"], names.renamed, names.name) ?? raw);
        const headers = endToEndHeaders(proxyRes);
        // A HEAD's answer has no body. The GET it describes would have the
        // renamed body's length, which the proxy never sees: the apiserver's
        // counts the unrenamed body, and the empty body's says 0. So none.
        if (res.req.method !== "HEAD") headers["content-length"] = String(body.length);
        res.writeHead(proxyRes.statusCode ?? 502, headers);
        res.end(body);
      },
    );
  }
}
