/**
 * Reading the recorded HTTP transcripts (`NAME.request.txt`,
 * `NAME.response.txt`, `NAME.actions.json`) and talking to a server the way
 * the recorder did: exact path and raw query, the recorded Accept and
 * User-Agent, nothing else. A `dir` is a folder of the recordings, absolute
 * or relative to test/fixtures/kube-apiserver/ (files stored gzipped are read
 * as they were recorded: test/support/fixtures.ts).
 */
import { request as httpRequest, type IncomingMessage } from "node:http";
import { join } from "node:path";
import { fixtureNames, hasFixture, readFixtureText } from "../support/fixtures.ts";

export interface RecordedRequest {
  readonly method: string;
  /** Path and raw query, exactly as sent. */
  readonly target: string;
  readonly accept?: string;
  readonly userAgent?: string;
}

export interface RecordedResponse {
  readonly status: number;
  readonly contentType: string;
  /** Undefined when the body was protobuf (kept in `.body.bin`). */
  readonly body?: string;
}

export interface RecordedAction {
  verb: "create" | "update" | "delete";
  namespace: string;
  name: string;
  status: number;
  uid: string;
}

function headerBlock(lines: string[]): Map<string, string> {
  const h = new Map<string, string>();
  for (const line of lines) {
    const i = line.indexOf(":");
    if (i > 0) h.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
  }
  return h;
}

export function readRequest(dir: string, name: string): RecordedRequest {
  const text = readFixtureText(join(dir, `${name}.request.txt`));
  const lines = text.split("\n");
  const [method = "GET", target = "/"] = (lines[0] ?? "").split(" ");
  const end = lines.indexOf("", 1);
  const h = headerBlock(lines.slice(1, end < 0 ? undefined : end));
  const r: { method: string; target: string; accept?: string; userAgent?: string } = { method, target };
  const accept = h.get("accept");
  const ua = h.get("user-agent");
  if (accept !== undefined) r.accept = accept;
  if (ua !== undefined) r.userAgent = ua;
  return r;
}

export function readResponse(dir: string, name: string): RecordedResponse {
  const text = readFixtureText(join(dir, `${name}.response.txt`));
  const split = text.indexOf("\n\n");
  const head = (split < 0 ? text : text.slice(0, split)).split("\n");
  const body = split < 0 ? "" : text.slice(split + 2);
  const status = Number((head[0] ?? "").split(" ")[1]);
  const h = headerBlock(head.slice(1));
  const contentType = h.get("content-type") ?? "";
  const r: { status: number; contentType: string; body?: string } = { status, contentType };
  if (!body.startsWith("# body:")) r.body = body;
  return r;
}

export function readActions(dir: string, name: string): { startResourceVersion?: string; actions: RecordedAction[] } | undefined {
  const file = join(dir, `${name}.actions.json`);
  if (!hasFixture(file)) return undefined;
  return JSON.parse(readFixtureText(file)) as { startResourceVersion?: string; actions: RecordedAction[] };
}

/** Case names in a directory (every `NAME.request.txt`), sorted. */
export function caseNames(dir: string): string[] {
  return fixtureNames(dir)
    .filter((f) => f.endsWith(".request.txt"))
    .map((f) => f.slice(0, -".request.txt".length));
}

export function hasProtobufBody(dir: string, name: string): boolean {
  return hasFixture(join(dir, `${name}.body.bin`));
}

/** Newline-delimited JSON values of a watch body. */
export function jsonLines(body: string): unknown[] {
  return body
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as unknown);
}

export interface Reply {
  status: number;
  headers: IncomingMessage["headers"];
  body: string;
}

/** One request with exactly the given headers; resolves with the whole body. */
export function send(base: string, target: string, opts: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...(opts.headers ?? {}) };
    // Node sends DELETE bodies without framing unless told the length.
    if (opts.body !== undefined) headers["content-length"] = Buffer.byteLength(opts.body);
    const req = httpRequest(new URL(target, base), { method: opts.method ?? "GET", headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(opts.body);
  });
}

/** Headers the recorder sent for a request: Accept and, when recorded, User-Agent. */
export function recordedHeaders(r: RecordedRequest): Record<string, string> {
  const h: Record<string, string> = {};
  if (r.accept !== undefined) h.accept = r.accept;
  if (r.userAgent !== undefined) h["user-agent"] = r.userAgent;
  return h;
}

/** An open watch stream collecting parsed events as they arrive. */
export class WatchClient {
  readonly events: unknown[] = [];
  status = 0;
  ended = false;
  private buf = "";
  private readonly waiters = new Set<() => void>();
  private readonly req: ReturnType<typeof httpRequest>;
  readonly ready: Promise<number>;

  constructor(base: string, target: string, headers: Record<string, string>) {
    let onReady: (s: number) => void = () => undefined;
    let onFail: (e: unknown) => void = () => undefined;
    this.ready = new Promise((resolve, reject) => {
      onReady = resolve;
      onFail = reject;
    });
    this.req = httpRequest(new URL(target, base), { headers }, (res) => {
      this.status = res.statusCode ?? 0;
      onReady(this.status);
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        this.buf += c;
        let nl;
        while ((nl = this.buf.indexOf("\n")) >= 0) {
          const line = this.buf.slice(0, nl);
          this.buf = this.buf.slice(nl + 1);
          if (line.trim() !== "") this.events.push(JSON.parse(line) as unknown);
        }
        this.wake();
      });
      res.on("end", () => {
        if (this.buf.trim() !== "" && this.status !== 200) this.events.push(JSON.parse(this.buf) as unknown);
        this.ended = true;
        this.wake();
      });
      res.on("error", () => {
        this.ended = true;
        this.wake();
      });
    });
    this.req.on("error", (e) => {
      this.ended = true;
      onFail(e);
      this.wake();
    });
    this.req.end();
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Resolves true once `pred` holds (checked on every chunk), false after `ms` or when the stream ends first. */
  waitFor(pred: () => boolean, ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (pred()) finish(true);
        else if (this.ended) finish(false);
      };
      const timer = setTimeout(() => finish(false), ms);
      const finish = (v: boolean): void => {
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(v);
      };
      this.waiters.add(check);
      check();
    });
  }

  /** Resolves once no event has arrived for `quietMs`, or after `maxMs`. */
  async settle(quietMs: number, maxMs: number): Promise<void> {
    const deadline = Date.now() + maxMs;
    let seen = -1;
    while (Date.now() < deadline && !this.ended && seen !== this.events.length) {
      seen = this.events.length;
      await new Promise((r) => setTimeout(r, quietMs));
    }
  }

  abort(): void {
    this.req.destroy();
  }
}
