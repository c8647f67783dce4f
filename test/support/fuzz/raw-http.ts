/**
 * HTTP/1.1 over a bare socket, for fuzzers: the bytes go out exactly as
 * given (malformed ones included, so they reach the server's parser), in the
 * pieces given, and the client then reads, vanishes or resets as told.
 * Whatever came back is parsed afterwards into responses, each marked
 * complete or cut.
 */
import { connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";

export interface Endpoint {
  readonly host: string;
  readonly port: number;
  /** TLS, verified against `ca` for `servername`. */
  readonly tls?: { readonly ca: string; readonly servername: string };
}

/** What the client does once its bytes are written. */
export type ClientEnd =
  /** Reads until the server closes, `expect` responses are complete, or `maxMs` passes; then closes. */
  | { readonly kind: "read"; readonly maxMs: number; readonly expect: number }
  /** Reads for `ms` (a watch, a slow reader), then closes: a client gone mid-response. */
  | { readonly kind: "read-for"; readonly ms: number }
  /** Closes at once, before any answer: a client gone mid-request. */
  | { readonly kind: "vanish" }
  /** Sends a TCP reset after `ms`. */
  | { readonly kind: "reset"; readonly ms: number };

export interface Exchange {
  /** Written in order; with TLS, after the handshake. */
  readonly writes: readonly Buffer[];
  /** Milliseconds between writes (a slow client); 0 writes them back to back. */
  readonly gapMs: number;
  readonly end: ClientEnd;
  /** TLS only: give up during the handshake instead (after `ms`), writing nothing. */
  readonly abortHandshakeMs?: number;
}

/** One request as a table of inputs writes it, in latin1 so that any byte can be written. */
export interface RawMessage {
  readonly method: string;
  /** Request line and headers, without the final blank line. */
  readonly head: string;
  readonly body?: string;
}

/** A row of a table of raw inputs: the requests, how they go out, and the statuses they must get. */
export interface RawRow {
  /** What the row holds the server to. */
  readonly name: string;
  readonly messages: readonly RawMessage[];
  /** The bytes written, when not the messages as they are (cut, split). */
  readonly bytes?: (whole: Buffer) => Buffer[];
  /** Milliseconds between those writes (a slow client); default 0. */
  readonly gapMs?: number;
  /** Default: read until every message is answered. */
  readonly end?: ClientEnd;
  /** The statuses of the answers, in order; `undefined` when the client leaves before it could read any. */
  readonly want?: readonly number[];
}

/** The row's messages on the wire. */
export function rawBytes(messages: readonly RawMessage[]): Buffer {
  return Buffer.concat(messages.map((m) => Buffer.from(`${m.head}\r\n\r\n${m.body ?? ""}`, "latin1")));
}

/** Runs a row against `ep`: its bytes, then its client behaviour. */
export function exchangeRow(ep: Endpoint, row: RawRow, whole: Buffer): Promise<ExchangeResult> {
  return exchange(ep, { writes: row.bytes?.(whole) ?? [whole], gapMs: row.gapMs ?? 0, end: row.end ?? { kind: "read", maxMs: 20_000, expect: row.messages.length } }, row.messages.map((m) => m.method.toUpperCase()));
}

export interface ExchangeResult {
  readonly received: Buffer;
  /** Whether the server closed (or reset) the connection first. */
  readonly serverClosed: boolean;
  readonly error: string | undefined;
  /** The client's port: the server's name for this connection. */
  readonly localPort?: number | undefined;
}

const wait = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The socket to talk on, and the TCP socket under it (the same without TLS), which can be reset. */
function open(ep: Endpoint): { socket: Socket; tcp: Socket } {
  const tcp = netConnect({ host: ep.host, port: ep.port });
  if (ep.tls === undefined) return { socket: tcp, tcp };
  return { socket: tlsConnect({ socket: tcp, ca: ep.tls.ca, servername: ep.tls.servername }), tcp };
}

/** However the server behaves, an exchange ends this long after its last write. */
const HARD_STOP_MS = 60_000;

/** Runs one exchange. Never rejects: every outcome is data. */
export function exchange(ep: Endpoint, ex: Exchange, methods: readonly string[] = []): Promise<ExchangeResult> {
  return new Promise((resolve) => {
    const { socket, tcp } = open(ep);
    const chunks: Buffer[] = [];
    let serverClosed = false;
    let error: string | undefined;
    let settled = false;
    let localPort: number | undefined;
    tcp.once("connect", () => (localPort = tcp.localPort));
    const timers: NodeJS.Timeout[] = [];
    const finish = (): void => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      socket.destroy();
      tcp.destroy();
      resolve({ received: Buffer.concat(chunks), serverClosed, error, localPort });
    };
    socket.on("data", (b: Buffer) => {
      chunks.push(b);
      if (ex.end.kind === "read" && parseResponses(Buffer.concat(chunks), methods).responses.filter((r) => r.complete).length >= ex.end.expect) finish();
    });
    socket.on("error", (e: Error) => {
      error = e.message;
    });
    tcp.on("error", (e: Error) => {
      error ??= e.message;
    });
    socket.on("end", () => {
      serverClosed = true;
    });
    socket.on("close", () => {
      if (!settled) serverClosed = true;
      finish();
    });
    const after = (ms: number, fn: () => void): void => {
      timers.push(setTimeout(fn, ms));
    };
    after(HARD_STOP_MS, finish);
    if (ep.tls !== undefined && ex.abortHandshakeMs !== undefined) {
      after(ex.abortHandshakeMs, finish);
      return;
    }
    const start = async (): Promise<void> => {
      for (const [i, w] of ex.writes.entries()) {
        if (settled || socket.destroyed) return;
        if (i > 0 && ex.gapMs > 0) await wait(ex.gapMs);
        socket.write(w);
      }
      const end = ex.end;
      switch (end.kind) {
        case "read":
          after(end.maxMs, finish);
          return;
        case "read-for":
          after(end.ms, finish);
          return;
        case "vanish":
          finish();
          return;
        case "reset":
          after(end.ms, () => {
            if (!settled) tcp.resetAndDestroy();
          });
          return;
      }
    };
    socket.once(ep.tls === undefined ? "connect" : "secureConnect", () => void start());
  });
}

export interface ParsedResponse {
  readonly statusLine: string;
  readonly status: number;
  /** Lower-case names; repeated headers keep every value. */
  readonly headers: ReadonlyMap<string, readonly string[]>;
  readonly body: Buffer;
  /** Whether the whole body arrived (for a close-delimited body: the server closed). */
  readonly complete: boolean;
}

export interface ParsedStream {
  readonly responses: readonly ParsedResponse[];
  /** Set when the bytes are not HTTP/1.x responses: what is wrong, and where. */
  readonly malformed: string | undefined;
}

const STATUS_LINE = /^HTTP\/1\.[01] ([1-5][0-9]{2})(?: [^\r\n]*)?$/;

function header(headers: ReadonlyMap<string, readonly string[]>, name: string): string | undefined {
  return headers.get(name)?.[0];
}

/**
 * Parses every response in `bytes`. `methods[k]` is the method of the k-th
 * request (a HEAD response has no body); `closed` says whether the server
 * closed, which completes a close-delimited body.
 */
export function parseResponses(bytes: Buffer, methods: readonly string[], closed = false): ParsedStream {
  const responses: ParsedResponse[] = [];
  let at = 0;
  while (at < bytes.length) {
    const headEnd = bytes.indexOf("\r\n\r\n", at);
    if (headEnd === -1) {
      // A head still arriving, unless it cannot become one.
      const rest = bytes.subarray(at, at + 7).toString("latin1");
      const plausible = rest === "HTTP/1." || "HTTP/1.".startsWith(rest);
      return { responses, malformed: plausible ? undefined : `bytes at ${at} are not a status line: ${JSON.stringify(bytes.subarray(at, at + 40).toString("latin1"))}` };
    }
    const [statusLine = "", ...lines] = bytes.subarray(at, headEnd).toString("latin1").split("\r\n");
    const m = STATUS_LINE.exec(statusLine);
    if (m === null) return { responses, malformed: `not a status line at ${at}: ${JSON.stringify(statusLine.slice(0, 80))}` };
    const headers = new Map<string, string[]>();
    for (const line of lines) {
      const colon = line.indexOf(":");
      if (colon <= 0) return { responses, malformed: `not a header line: ${JSON.stringify(line.slice(0, 80))}` };
      const name = line.slice(0, colon).toLowerCase();
      headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
    }
    const status = Number(m[1]);
    at = headEnd + 4;
    if (status >= 100 && status < 200) {
      // 101 hands the connection to another protocol; 1xx otherwise precede the answer.
      if (status === 101) return { responses: [...responses, { statusLine, status, headers, body: bytes.subarray(at), complete: true }], malformed: undefined };
      continue;
    }
    const method = methods[responses.length] ?? "GET";
    const noBody = method === "HEAD" || status === 204 || status === 304;
    const te = header(headers, "transfer-encoding");
    const cl = header(headers, "content-length");
    if (noBody) {
      responses.push({ statusLine, status, headers, body: Buffer.alloc(0), complete: true });
    } else if (te !== undefined && /chunked/i.test(te)) {
      const { body, next, complete } = dechunk(bytes, at);
      responses.push({ statusLine, status, headers, body, complete });
      if (!complete) return { responses, malformed: undefined };
      at = next;
    } else if (cl !== undefined) {
      const n = Number(cl);
      if (!Number.isSafeInteger(n) || n < 0) return { responses, malformed: `bad content-length ${JSON.stringify(cl)}` };
      const complete = bytes.length - at >= n;
      responses.push({ statusLine, status, headers, body: bytes.subarray(at, at + n), complete });
      if (!complete) return { responses, malformed: undefined };
      at += n;
    } else {
      responses.push({ statusLine, status, headers, body: bytes.subarray(at), complete: closed });
      return { responses, malformed: undefined };
    }
  }
  return { responses, malformed: undefined };
}

function dechunk(bytes: Buffer, start: number): { body: Buffer; next: number; complete: boolean } {
  const parts: Buffer[] = [];
  let at = start;
  for (;;) {
    const lineEnd = bytes.indexOf("\r\n", at);
    if (lineEnd === -1) return { body: Buffer.concat(parts), next: at, complete: false };
    const size = Number.parseInt(bytes.subarray(at, lineEnd).toString("latin1").split(";")[0] ?? "", 16);
    if (!Number.isFinite(size)) return { body: Buffer.concat(parts), next: at, complete: false };
    const dataStart = lineEnd + 2;
    if (size === 0) {
      const trailerEnd = bytes.indexOf("\r\n", dataStart);
      return { body: Buffer.concat(parts), next: trailerEnd === -1 ? bytes.length : trailerEnd + 2, complete: trailerEnd !== -1 };
    }
    if (bytes.length < dataStart + size) {
      parts.push(bytes.subarray(dataStart));
      return { body: Buffer.concat(parts), next: bytes.length, complete: false };
    }
    parts.push(bytes.subarray(dataStart, dataStart + size));
    at = dataStart + size + 2;
  }
}
