/**
 * The smallest watching client there is, for benches that measure what a
 * watch costs the apiserver (S4): one protobuf WATCH held open over HTTPS,
 * to a `shardcar proxy` or straight to the server, that decodes nothing
 * but each frame's event type and counts frames and bytes. A real informer
 * would also decode every object and keep a cache; that costs the client,
 * not the server, and would only crowd the server's two cores.
 *
 * Frames are as k8s.io/apimachinery writes them on a protobuf watch
 * stream: a 4-byte big-endian length, then a WatchEvent whose first field
 * is its type (field 1, a string: tag 0x0a, one length byte for the short
 * type names).
 */
import type { ClientRequest } from "node:http";
import { request } from "node:https";

export interface WatchCounts {
  /** ADDED, MODIFIED and DELETED frames. */
  events: number;
  bookmarks: number;
  /** ERROR frames (a 410 or a server error inside the stream). */
  errors: number;
  /** Response body bytes. */
  bytes: number;
}

export interface WatchClient {
  readonly counts: WatchCounts;
  /** Set when the stream failed or ended early (watches here are held open until {@link close}). */
  readonly failure: () => string | undefined;
  readonly close: () => void;
}

export interface WatchTarget {
  /** `https://host:port/api/v1/...?...watch=true...` */
  readonly url: string;
  readonly token: string;
  /** PEM of the CA the server's certificate chains to. */
  readonly ca: string;
}

const PROTOBUF = "application/vnd.kubernetes.protobuf";
const EVENT_TYPES: ReadonlySet<string> = new Set(["ADDED", "MODIFIED", "DELETED"]);

/** Splits a protobuf watch stream into frames and counts them by type; chunk boundaries may fall anywhere. */
export class FrameCounter {
  readonly counts: WatchCounts = { events: 0, bookmarks: 0, errors: 0, bytes: 0 };
  /** The current frame's first bytes, until its type is known. */
  #head = Buffer.alloc(0);
  /** Bytes of the current frame still to skip once its type is known. */
  #skip = 0;

  push(chunk: Buffer): void {
    this.counts.bytes += chunk.length;
    let at = 0;
    while (at < chunk.length) {
      if (this.#skip > 0) {
        const n = Math.min(this.#skip, chunk.length - at);
        this.#skip -= n;
        at += n;
        continue;
      }
      // One byte at a time until the type is known: a few bytes per frame.
      this.#head = Buffer.concat([this.#head, chunk.subarray(at, at + 1)]);
      at++;
      const parsed = parseHead(this.#head);
      if (parsed === undefined) continue;
      this.#count(parsed.type);
      this.#skip = parsed.frameBytes - this.#head.length;
      this.#head = Buffer.alloc(0);
    }
  }

  #count(type: string): void {
    if (EVENT_TYPES.has(type)) this.counts.events++;
    else if (type === "BOOKMARK") this.counts.bookmarks++;
    else this.counts.errors++;
  }
}

/**
 * The frame's size (header included) and type once `head` holds enough of
 * it; undefined until then. A frame that does not start with a short type
 * string counts as an error frame.
 */
function parseHead(head: Buffer): { frameBytes: number; type: string } | undefined {
  if (head.length < 4) return undefined;
  const frameBytes = 4 + head.readUInt32BE(0);
  if (head.length === frameBytes) return { frameBytes, type: typeOf(head) ?? "?" };
  if (head.length < 6) return undefined;
  const type = typeOf(head);
  return type === undefined && head[4] === 0x0a && (head[5] ?? 0) < 128 ? undefined : { frameBytes, type: type ?? "?" };
}

function typeOf(head: Buffer): string | undefined {
  const len = head[5] ?? 0;
  if (head[4] !== 0x0a || len >= 128 || head.length < 6 + len) return undefined;
  return head.toString("latin1", 6, 6 + len);
}

/**
 * Opens one watch; resolves once the server (or proxy) answered 200 with a
 * protobuf watch stream, rejects otherwise. Its own TLS connection, as each
 * controller replica has its own.
 */
export function openWatch(t: WatchTarget, timeoutMs = 30_000): Promise<WatchClient> {
  return new Promise((resolve, reject) => {
    const counter = new FrameCounter();
    let failure: string | undefined;
    let closed = false;
    const req: ClientRequest = request(t.url, { method: "GET", agent: false, ca: t.ca, headers: { authorization: `Bearer ${t.token}`, accept: PROTOBUF } }, (res) => {
      const type = res.headers["content-type"] ?? "";
      if (res.statusCode !== 200 || !type.startsWith(PROTOBUF)) {
        const parts: Buffer[] = [];
        res.on("data", (b: Buffer) => parts.push(b));
        res.on("end", () => reject(new Error(`watch ${t.url}: HTTP ${res.statusCode ?? "?"} ${type}: ${Buffer.concat(parts).toString("utf8").slice(0, 500)}`)));
        return;
      }
      clearTimeout(timer);
      res.on("data", (b: Buffer) => counter.push(b));
      res.on("end", () => {
        if (!closed) failure ??= `watch ${t.url} ended after ${counter.counts.events} events`;
      });
      res.on("error", (e: Error) => {
        if (!closed) failure ??= `watch ${t.url}: ${e.message}`;
      });
      resolve({
        counts: counter.counts,
        failure: () => failure,
        close: () => {
          closed = true;
          req.destroy();
        },
      });
    });
    const timer = setTimeout(() => req.destroy(new Error(`watch ${t.url}: no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on("error", (e) => {
      clearTimeout(timer);
      if (!closed) failure ??= e.message;
      reject(e);
    });
    req.end();
  });
}
