/**
 * The scripted apiserver of the narrowing race tests (test/proxy/handoff/review*-narrowing.test.ts):
 * the real ShardProxy in front of an upstream whose LIST and WATCH answers and
 * timing a test controls, and the small clients that drive it.
 */
import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { silentLogger } from "../../../src/log.ts";
import { MutableOwnership } from "../../../src/shard/ownership.ts";
import { startProxy } from "../../../src/proxy/run.ts";
import { makeUpstream } from "../../../src/proxy/serving/upstream.ts";
import { HashMatcher, shardRange, type Range } from "../../../src/shard/range.ts";
import { parseResources } from "../../../src/shard/spec.ts";
import { ManualClock } from "./manual-clock.ts";

/** A uid whose hash lies in `inside` and outside `outside`. */
export function uidIn(inside: readonly Range[], outside: readonly Range[], tag: string): string {
  const a = new HashMatcher(inside);
  const b = new HashMatcher(outside);
  for (let i = 0; ; i++) {
    const u = `${tag}-${i}`;
    if (a.matchesString(u) && !b.matchesString(u)) return u;
  }
}

export function pod(name: string, uid: string, rv: string): Record<string, unknown> {
  return { kind: "Pod", apiVersion: "v1", metadata: { name, namespace: "ns", uid, resourceVersion: rv } };
}

export function listBody(items: Record<string, unknown>[], rv: string): string {
  return JSON.stringify({ kind: "PodList", apiVersion: "v1", metadata: { resourceVersion: rv }, items: items.map((p) => ({ ...p, kind: undefined, apiVersion: undefined })) });
}

export interface Fake {
  url: string;
  /** What the next LISTs answer (a queue; the last one repeats). */
  lists: Array<{ body: string; delay?: Promise<void> }>;
  /** Open upstream watches, in arrival order. */
  watches: ServerResponse[];
  /** Gate for the next watch's response headers. */
  watchHeaders: Promise<void> | undefined;
  watchRequests: number;
  listRequests: number;
  close(): Promise<void>;
}

export async function fakeUpstream(): Promise<Fake> {
  const f: Fake = { url: "", lists: [], watches: [], watchHeaders: undefined, watchRequests: 0, listRequests: 0, close: async () => {} };
  const srv = createServer((req: IncomingMessage, res: ServerResponse) => {
    const u = new URL(req.url ?? "/", "http://x");
    if (u.searchParams.get("watch") === "true" || u.searchParams.get("watch") === "1") {
      f.watchRequests++;
      const gate = f.watchHeaders;
      f.watchHeaders = undefined;
      void (gate ?? Promise.resolve()).then(() => {
        res.writeHead(200, { "content-type": "application/json" });
        res.flushHeaders();
        f.watches.push(res);
      });
      return;
    }
    f.listRequests++;
    const next = f.lists.length > 1 ? f.lists.shift() : f.lists[0];
    if (next === undefined) {
      res.writeHead(500).end();
      return;
    }
    void (next.delay ?? Promise.resolve()).then(() => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(next.body);
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  f.url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  f.close = () =>
    new Promise<void>((r) => {
      for (const w of f.watches) w.destroy();
      srv.closeAllConnections();
      srv.close(() => r());
    });
  return f;
}

export function event(type: string, obj: Record<string, unknown>): string {
  return `${JSON.stringify({ type, object: obj })}\n`;
}

export function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request(url, { headers }, (res) => {
      let body = "";
      res.on("data", (b: Buffer) => (body += b.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    })
      .on("error", reject)
      .end();
  });
}

export interface ClientWatch {
  events: Array<{ type: string; object: { metadata?: { name?: string; resourceVersion?: string; annotations?: Record<string, string> }; code?: number } }>;
  /** Every line received, as sent. */
  lines: string[];
  status: Promise<number>;
  ended: Promise<void>;
  abort(): void;
}

export function watch(url: string, headers: Record<string, string> = {}): ClientWatch {
  const events: ClientWatch["events"] = [];
  const lines: string[] = [];
  let setStatus: (n: number) => void = () => {};
  const status = new Promise<number>((r) => (setStatus = r));
  let abort = (): void => {};
  const ended = new Promise<void>((resolve) => {
    const req = request(url, { headers }, (res) => {
      setStatus(res.statusCode ?? 0);
      let buf = "";
      res.on("data", (b: Buffer) => {
        buf += b.toString();
        const parts = buf.split("\n");
        buf = parts.pop() ?? "";
        for (const l of parts) {
          if (l === "") continue;
          lines.push(l);
          events.push(JSON.parse(l) as ClientWatch["events"][number]);
        }
      });
      res.on("end", () => resolve());
      res.on("close", () => resolve());
    });
    req.on("error", () => resolve());
    req.end();
    abort = () => req.destroy();
  });
  return { events, lines, status, ended, abort };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Waits for a condition (polling); `ms` only bounds how long a test waits
 * for one that never comes. Never a stand-in for the proxy's own bounds:
 * those pass on the test's ManualClock.
 */
export async function until(p: () => boolean, ms = 3000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (p()) return true;
    await sleep(10);
  }
  return p();
}

/**
 * The real proxy (synthetic deletes on) in front of a scripted upstream,
 * on a ManualClock: its handoff bounds pass only by `clock.advance`.
 */
export async function setup(t: { teardown(fn: () => Promise<void>): void }, own: MutableOwnership, extra: Record<string, unknown> = {}) {
  const f = await fakeUpstream();
  const clock = new ManualClock();
  const proxy = await startProxy({
    clock,
    listen: { host: "127.0.0.1", port: 0 },
    upstream: makeUpstream(f.url),
    resources: parseResources("pods"),
    ownership: own,
    fallback: "filter",
    logger: silentLogger(),
    syntheticDeletes: true,
    ...extra,
  });
  t.teardown(async () => {
    await proxy.close();
    await f.close();
  });
  return { f, proxy, clock };
}


export const LOW = [shardRange(0, 2)];
export const HIGH = [shardRange(1, 2)];
