/**
 * The upstream probe (src/proxy/serving/upstream-probe.ts): a wrong upstream keeps
 * the proxy unready, is named with its error in one log line, and is
 * probed again with a doubling backoff on a clock the test moves, so no
 * test sleeps against a bound; an upstream that answers, with anything,
 * makes it ready.
 */
import t from "tap";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createLogger } from "../../../src/log.ts";
import { makeUpstream, type Upstream } from "../../../src/proxy/serving/upstream.ts";
import { askVersion, UpstreamProbe, type UpstreamProbeOptions } from "../../../src/proxy/serving/upstream-probe.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { until } from "../../support/wait.ts";

function capturedLogger(): { logger: ReturnType<typeof createLogger>; lines: () => Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger({ level: "debug", destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) } });
  return { logger, lines: () => lines };
}

async function listening(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

/** A port nothing listens on: one that was just closed. */
async function closedPort(): Promise<number> {
  const s = createServer();
  const port = await listening(s);
  await new Promise((resolve) => s.close(resolve));
  return port;
}

function probeOf(upstream: Upstream, clock = new ManualClock(), ask?: UpstreamProbeOptions["ask"]) {
  const log = capturedLogger();
  const probe = new UpstreamProbe({ upstream, logger: log.logger, clock, ...(ask === undefined ? {} : { ask }) });
  t.teardown(() => probe.stop());
  return { probe, clock, lines: log.lines };
}

t.test("an unreachable upstream keeps the proxy unready and names the upstream in one log line", async (t) => {
  const port = await closedPort();
  let failed = 0;
  const counted: UpstreamProbeOptions["ask"] = (u, ms, c) => askVersion(u, ms, c).catch((e: unknown) => {
      failed++;
      throw e;
    });
  const { probe, clock, lines } = probeOf(makeUpstream(`http://127.0.0.1:${port}`), new ManualClock(), counted);
  t.match(probe.readiness.check(), /not probed yet/, "not ready before the first answer");
  probe.start();
  await until("the first probe to fail", () => failed === 1);
  t.match(probe.readiness.check(), `http://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`);
  // The retry fails the same way: still unready, and no second line.
  clock.advance(1000);
  await until("the retry to fail", () => failed === 2);
  t.ok(probe.readiness.check() !== undefined, "still unready");
  const named = lines().filter((l) => JSON.stringify(l).includes(`127.0.0.1:${port}`));
  t.equal(named.length, 1, "one line names the upstream");
  t.match(named[0], { level: 50, upstream: `http://127.0.0.1:${port}`, err: /ECONNREFUSED/, msg: new RegExp(`upstream http://127\\.0\\.0\\.1:${port} does not answer: connect ECONNREFUSED`) });
});

t.test("https to a plain-http server is named as a TLS failure that asks whether it serves http", async (t) => {
  const server = createServer((_req, res) => res.end("ok"));
  const port = await listening(server);
  t.teardown(() => server.close());
  const { probe, lines } = probeOf(makeUpstream(`https://127.0.0.1:${port}`));
  probe.start();
  await until("the probe to fail", () => /TLS/.test(probe.readiness.check() ?? ""));
  t.match(probe.readiness.check(), `https://127.0.0.1:${port}: TLS handshake failed: wrong version number (does it serve plain http?)`);
  t.match(lines()[0]?.msg, /TLS handshake failed: wrong version number/);
});

t.test("an unknown host is named with the name that did not resolve", async (t) => {
  const { probe } = probeOf(makeUpstream("https://no-such-host.invalid:6443"));
  probe.start();
  await until("the probe to fail", () => /ENOTFOUND/.test(probe.readiness.check() ?? ""));
  t.match(probe.readiness.check(), "https://no-such-host.invalid:6443: getaddrinfo ENOTFOUND no-such-host.invalid");
});

t.test("an upstream that answers at all, a 401 included, makes the proxy ready, and says so after a failure", async (t) => {
  let refuse = true;
  const server = createServer((req, res) => {
    if (refuse) req.socket.destroy();
    else res.writeHead(401).end();
  });
  const port = await listening(server);
  t.teardown(() => server.close());
  const { probe, clock, lines } = probeOf(makeUpstream(`http://127.0.0.1:${port}`));
  probe.start();
  await until("the first probe to fail", () => /socket hang up/.test(probe.readiness.check() ?? ""));
  refuse = false;
  clock.advance(1000);
  await until("the retry to be answered", () => probe.readiness.check() === undefined);
  t.equal(clock.pending, 0, "no further probe is due");
  t.match(lines().at(-1), { level: 30, msg: "upstream answers again", upstream: `http://127.0.0.1:${port}` });
});

t.test("a failing upstream is probed again after 1 s, 2 s, 4 s ..., up to 30 s, and at once after a forwarded request failed", async (t) => {
  let asked = 0;
  let answer = false;
  const { probe, clock } = probeOf(makeUpstream("http://127.0.0.1:1"), new ManualClock(), () => {
    asked++;
    return answer ? Promise.resolve() : Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:1"));
  });
  probe.start();
  const gaps: number[] = [];
  for (let i = 0; i < 7; i++) {
    await until("the probe's failure to schedule the next", () => clock.pending === 1);
    const before = asked;
    let waited = 0;
    while (asked === before) {
      clock.advance(500);
      waited += 500;
    }
    gaps.push(waited);
  }
  t.same(gaps, [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
  // Answered: nothing due, until a forwarded request fails.
  answer = true;
  await until("the pending retry", () => clock.pending === 1);
  clock.advance(30_000);
  await until("ready", () => probe.readiness.check() === undefined);
  const before = asked;
  probe.suspect();
  t.equal(asked, before + 1, "a failed request makes it look again at once");
});
