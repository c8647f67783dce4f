/**
 * The load generator for P1 and S3, run as its own process (forked with an
 * IPC channel) so that its CPU use never sits in the proxy's or devapi's
 * event loop. Two modes, both bounded in count and time:
 *
 * - `rate`: open loop at a fixed request rate. Requests are issued on a
 *   schedule whatever the responses do, and each latency runs from the
 *   moment the request was issued to the last byte of its response, so a
 *   server that falls behind shows it as queueing in the percentiles
 *   instead of silently lowering the rate (no coordinated omission). The
 *   first `warmupMs` are sent but not recorded. GETs by default; with
 *   `method` and `body` any write (S3's creates and updates), where `{i}`
 *   in the URL and the body is the request's index (plus `indexFrom`), so
 *   every request names its own object. `https:` URLs are verified against
 *   `ca`. A 2xx answer is a success; every status is counted.
 * - `max`: closed loop, `connections` requests in flight at all times for
 *   `durationMs`; the completion rate is the maximum throughput.
 *
 * Messages in: `{ type: "rate", url, rate, durationMs, warmupMs }`,
 * `{ type: "max", url, connections, durationMs }`, `{ type: "exit" }`.
 * Replies: `{ type: "result", ... }` (see {@link RateResult}, {@link MaxResult}).
 */
import { Agent, request, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";

export interface RateResult {
  readonly type: "result";
  readonly sent: number;
  readonly recorded: number;
  readonly errors: number;
  readonly achievedRps: number;
  readonly p50: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
  readonly mean: number;
  /** How late, at the 99th percentile, requests left compared with their schedule (timer granularity). */
  readonly lagP99: number;
  /** Recorded answers by HTTP status ("0": no answer: a connection error or the 10 s timeout). */
  readonly statuses: Readonly<Record<string, number>>;
}

export interface MaxResult {
  readonly type: "result";
  readonly completed: number;
  readonly errors: number;
  readonly rps: number;
}

interface RateMsg {
  type: "rate";
  url: string;
  rate: number;
  durationMs: number;
  warmupMs: number;
  /** Default GET. */
  method?: string;
  /** Sent with content-type application/json; `{i}` is replaced as in the URL. */
  body?: string;
  /** Added to each request's index for `{i}` (default 0). */
  indexFrom?: number;
  /** Replaces the default headers' authorization. */
  token?: string;
  /** PEM, for `https:` URLs. */
  ca?: string;
}

interface MaxMsg {
  type: "max";
  url: string;
  connections: number;
  durationMs: number;
}

// Enough sockets that 5,000 req/s at a few ms each never waits for one on a
// healthy server, few enough that a stalled one queues visibly.
const MAX_SOCKETS = 128;
// A request that has not finished after this long counts as an error: every
// loop must end even if a server hangs.
const REQUEST_TIMEOUT_MS = 10_000;

const HEADERS = { accept: "application/json", authorization: "Bearer bench-p1" };

interface Target {
  readonly agent: Agent | HttpsAgent;
  readonly https: boolean;
  readonly host: string;
  readonly port: string;
  /** Path and query, `{i}` not yet replaced. */
  readonly path: string;
  readonly method: string;
  readonly body: string | undefined;
  readonly headers: Record<string, string>;
}

/** The HTTP status of one request (0: none), whose body is read to its end. */
function send(t: Target, i: number): Promise<number> {
  return new Promise((resolve) => {
    const index = String(i);
    const body = t.body?.replaceAll("{i}", index);
    const headers = body === undefined ? t.headers : { ...t.headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) };
    const opts = { agent: t.agent, host: t.host, port: t.port, method: t.method, path: t.path.replaceAll("{i}", index), headers, timeout: REQUEST_TIMEOUT_MS };
    const onResponse = (res: IncomingMessage): void => {
      res.on("data", () => {});
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", () => resolve(0));
    };
    const req = t.https ? httpsRequest({ ...opts, agent: t.agent as HttpsAgent }, onResponse) : request({ ...opts, agent: t.agent }, onResponse);
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(0));
    req.end(body);
  });
}

function once(agent: Agent, url: URL): Promise<boolean> {
  const t: Target = { agent, https: false, host: url.hostname, port: url.port, path: url.pathname + url.search, method: "GET", body: undefined, headers: HEADERS };
  return send(t, 0).then((status) => status === 200);
}

function targetOf(m: RateMsg): Target {
  // `{i}` is not a valid URL character everywhere: keep the path as written.
  const url = new URL(m.url.replaceAll("{i}", "0"));
  const slash = m.url.indexOf("/", url.protocol.length + 2);
  const path = slash < 0 ? "/" : m.url.slice(slash);
  const https = url.protocol === "https:";
  const agent = https ? new HttpsAgent({ keepAlive: true, maxSockets: MAX_SOCKETS, ...(m.ca === undefined ? {} : { ca: m.ca }) }) : new Agent({ keepAlive: true, maxSockets: MAX_SOCKETS });
  const headers = m.token === undefined ? HEADERS : { ...HEADERS, authorization: `Bearer ${m.token}` };
  return { agent, https, host: url.hostname, port: url.port, path, method: m.method ?? "GET", body: m.body, headers };
}

function pct(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

async function rate(m: RateMsg): Promise<RateResult> {
  const target = targetOf(m);
  const from = m.indexFrom ?? 0;
  const statuses: Record<string, number> = {};
  const total = Math.ceil(((m.warmupMs + m.durationMs) * m.rate) / 1000);
  const warm = Math.ceil((m.warmupMs * m.rate) / 1000);
  const lat = new Float64Array(total);
  const lag = new Float64Array(total);
  let sent = 0;
  let done = 0;
  let errors = 0;
  const t0 = performance.now();
  let tEnd = t0;
  await new Promise<void>((resolve) => {
    const finish = (): void => {
      done++;
      if (done === total) {
        tEnd = performance.now();
        resolve();
      }
    };
    const tick = (): void => {
      const now = performance.now();
      const due = Math.min(total, Math.floor(((now - t0) * m.rate) / 1000) + 1);
      while (sent < due) {
        const i = sent++;
        const issued = performance.now();
        lag[i] = issued - (t0 + (i * 1000) / m.rate);
        void send(target, from + i).then((status) => {
          lat[i] = performance.now() - issued;
          if (i >= warm) {
            if (status < 200 || status > 299) errors++;
            statuses[String(status)] = (statuses[String(status)] ?? 0) + 1;
          }
          finish();
        });
      }
      if (sent < total) {
        // Sleep until the next request is due; a 1 ms timer batches a few
        // requests per tick at 5,000 req/s, the same for both targets.
        const next = t0 + (sent * 1000) / m.rate;
        setTimeout(tick, Math.max(0, next - performance.now()));
      }
    };
    tick();
  });
  target.agent.destroy();
  const rec = lat.subarray(warm).slice().sort();
  const lags = lag.subarray(warm).slice().sort();
  let sum = 0;
  for (const v of rec) sum += v;
  const measuredSpan = tEnd - (t0 + m.warmupMs);
  return {
    type: "result",
    sent,
    recorded: rec.length,
    errors,
    achievedRps: (rec.length * 1000) / Math.max(1, measuredSpan),
    p50: pct(rec, 0.5),
    p99: pct(rec, 0.99),
    p999: pct(rec, 0.999),
    max: rec[rec.length - 1] ?? Number.NaN,
    mean: sum / Math.max(1, rec.length),
    lagP99: pct(lags, 0.99),
    statuses,
  };
}

async function max(m: MaxMsg): Promise<MaxResult> {
  const url = new URL(m.url);
  const agent = new Agent({ keepAlive: true, maxSockets: m.connections });
  const end = performance.now() + m.durationMs;
  let completed = 0;
  let errors = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: m.connections }, async () => {
      while (performance.now() < end) {
        if (await once(agent, url)) completed++;
        else errors++;
      }
    }),
  );
  const span = performance.now() - t0;
  agent.destroy();
  return { type: "result", completed, errors, rps: (completed * 1000) / span };
}

if (import.meta.main) {
  process.on("message", (raw: unknown) => {
    const m = raw as RateMsg | MaxMsg | { type: "exit" };
    if (m.type === "exit") {
      process.disconnect();
      return;
    }
    const work = m.type === "rate" ? rate(m) : max(m);
    work.then(
      (r) => process.send?.(r),
      (e: unknown) => process.send?.({ type: "error", message: e instanceof Error ? e.message : String(e) }),
    );
  });
  process.send?.({ type: "ready" });
}
