/**
 * The load generator for P1, run as its own process (forked with an IPC
 * channel) so that its CPU use never sits in the proxy's or devapi's event
 * loop. Two modes, both bounded in count and time:
 *
 * - `rate`: open loop at a fixed request rate. Requests are issued on a
 *   schedule whatever the responses do, and each latency runs from the
 *   moment the request was issued to the last byte of its response, so a
 *   server that falls behind shows it as queueing in the percentiles
 *   instead of silently lowering the rate (no coordinated omission). The
 *   first `warmupMs` are sent but not recorded.
 * - `max`: closed loop, `connections` requests in flight at all times for
 *   `durationMs`; the completion rate is the maximum throughput.
 *
 * Messages in: `{ type: "rate", url, rate, durationMs, warmupMs }`,
 * `{ type: "max", url, connections, durationMs }`, `{ type: "exit" }`.
 * Replies: `{ type: "result", ... }` (see {@link RateResult}, {@link MaxResult}).
 */
import { Agent, request } from "node:http";

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

function once(agent: Agent, url: URL): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ agent, host: url.hostname, port: url.port, path: url.pathname + url.search, headers: HEADERS, timeout: REQUEST_TIMEOUT_MS }, (res) => {
      res.on("data", () => {});
      res.on("end", () => resolve(res.statusCode === 200));
      res.on("error", () => resolve(false));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
    req.end();
  });
}

function pct(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

async function rate(m: RateMsg): Promise<RateResult> {
  const url = new URL(m.url);
  const agent = new Agent({ keepAlive: true, maxSockets: MAX_SOCKETS });
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
        void once(agent, url).then((ok) => {
          lat[i] = performance.now() - issued;
          if (!ok && i >= warm) errors++;
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
  agent.destroy();
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
