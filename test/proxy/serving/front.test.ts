/**
 * The listener's front door (src/proxy/serving/front.ts), on live proxies: a bad
 * request is a 400 that names the bad value and the proxy serves on; a
 * handler that throws is a 500, a log line and a counter, not an exit; a
 * client that leaves takes its upstream request with it; upgrades the proxy
 * cannot filter are refused.
 */
import t, { type Test } from "tap";
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { Duplex, Writable } from "node:stream";
import { Registry } from "prom-client";
import { pino } from "pino";
import { startDevApi, seedPods, type DevApi } from "../../../src/devapi/index.ts";
import { silentLogger } from "../../../src/log.ts";
import { indexResources } from "../../../src/proxy/request/classify.ts";
import { createFront, type FrontOptions } from "../../../src/proxy/serving/front.ts";
import { parseLockSpec } from "../../../src/settings/lock.ts";
import { ProxyMetrics } from "../../../src/proxy/reporting/metrics.ts";
import { StaticOwnership } from "../../../src/shard/ownership.ts";
import { startProxy, type RunningProxy } from "../../../src/proxy/run.ts";
import { endWithStatus } from "../../../src/proxy/serving/status.ts";
import { makeUpstream, type Upstream } from "../../../src/proxy/serving/upstream.ts";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, shardRange } from "../../../src/shard/range.ts";
import { parseResources } from "../../../src/shard/spec.ts";
import { eventually } from "../../support/wait.ts";
import { exchange, parseResponses, type ParsedResponse } from "../../support/fuzz/raw-http.ts";

const OWNED = [shardRange(0, 4)];

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((r) => server.close(() => r()));
}

function endpoint(p: RunningProxy): { host: string; port: number } {
  return { host: "127.0.0.1", port: Number(new URL(p.url).port) };
}

/** Sends `head` (and `body`) raw and reads one whole response. */
async function send(p: RunningProxy, head: string, body = ""): Promise<ParsedResponse> {
  const res = await exchange(endpoint(p), { writes: [Buffer.from(head + body, "latin1")], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 1 } }, ["GET"]);
  const r = parseResponses(res.received, ["GET"], res.serverClosed).responses[0];
  if (r === undefined) throw new Error(`no response to ${JSON.stringify(head.split("\r\n")[0])}`);
  return r;
}

const status = (r: ParsedResponse): { code?: number; reason?: string; message?: string; kind?: string } => JSON.parse(r.body.toString("utf8")) as { code?: number; reason?: string; message?: string };

async function counter(p: RunningProxy, name: "rejectedRequests" | "handlerFailures"): Promise<number> {
  return (await p.metrics[name].get()).values.reduce((s, v) => s + v.value, 0);
}

for (const lock of [false, true]) {
  t.test(`a malformed percent-escape gets a 400 naming it, and the proxy serves on${lock ? " (with --leader-election)" : ""}`, async (t) => {
    const api = await startDevApi({ gate: "off" });
    seedPods(api, { count: 20, namespaces: 2 });
    const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream: makeUpstream(api.url), resources: parseResources("pods"), ownership: new StaticOwnership(OWNED), fallback: "filter", logger: silentLogger(), ...(lock ? { lock: { spec: parseLockSpec("leases/demo-lock"), identity: "0" } } : {}) });
    t.teardown(async () => {
      await proxy.close();
      await api.close();
    });
    for (const path of ["/api/v1/namespaces/%zz/pods", "/apis/coordination.k8s.io/v1/namespaces/ns-0/leases/%zz", "/api/v1/pods%"]) {
      const r = await send(proxy, `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
      t.equal(r.status, 400, path);
      const s = status(r);
      t.equal(s.kind, "Status");
      t.equal(s.reason, "BadRequest");
      t.match(s.message, /invalid URL escape "%(zz)?"/, `${path}: the message names the escape`);
    }
    t.equal(await counter(proxy, "rejectedRequests"), 3, "each refusal is counted");
    const list = await send(proxy, "GET /api/v1/pods HTTP/1.1\r\nHost: x\r\n\r\n");
    t.equal(list.status, 200, "the next request is served");
    t.equal(list.headers.get("x-shardcar-generation")?.[0], "0", "and sharded");
  });
}

t.test("a handler that throws is answered 500 with a log line and a counter; the next request is served", async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: "info" }, new Writable({ write: (chunk: Buffer, _e, cb) => (lines.push(chunk.toString()), cb()) }));
  const metrics = new ProxyMetrics(new Registry());
  let calls = 0;
  const front = createFront({
    handle: (_req, res) => {
      if (++calls === 1) throw new Error("a bug in a handler");
      res.writeHead(200).end("ok");
    },
    handleUpgrade: () => {
      throw new Error("a bug in the upgrade handler");
    },
    index: indexResources(parseResources("pods")),
    logger,
    metrics,
  });
  const server: Server = createServer(front.request);
  server.on("upgrade", front.upgrade);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => closeServer(server));
  const port = (server.address() as AddressInfo).port;
  const get = async (head: string): Promise<ParsedResponse | undefined> => {
    const res = await exchange({ host: "127.0.0.1", port }, { writes: [Buffer.from(head)], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 1 } });
    return parseResponses(res.received, ["GET"], res.serverClosed).responses[0];
  };
  const first = await get("GET /api/v1/namespaces/x/pods/y HTTP/1.1\r\nHost: x\r\n\r\n");
  t.equal(first?.status, 500);
  t.match(first === undefined ? "" : status(first).message, /internal error serving GET "\/api\/v1\/namespaces\/x\/pods\/y": a bug in a handler/);
  t.equal((await get("GET /version HTTP/1.1\r\nHost: x\r\n\r\n"))?.status, 200, "the next request is served");
  const up = await get("GET /api/v1/namespaces/x/pods/y/exec HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
  t.equal(up?.status, 500, "an upgrade handler that throws is answered too");
  t.equal((await metrics.handlerFailures.get()).values.reduce((s, v) => s + v.value, 0), 2, "both counted");
  t.equal(lines.filter((l) => l.includes("request handler threw")).length, 2, "both logged");
});

t.test("a client gone after its answer but before its body ended takes the upstream request with it", async (t) => {
  // Like the apiserver (Go's net/http waits for the rest of an unread body,
  // with no deadline): it answers without reading the body and never times
  // the connection out. (devapi, being node, would drop it after 5 s.)
  const apiserver = createServer((_req, res) => res.writeHead(404, { "content-type": "application/json" }).end('{"kind":"Status","code":404}'));
  apiserver.keepAliveTimeout = 0;
  apiserver.requestTimeout = 0;
  await new Promise<void>((r) => apiserver.listen(0, "127.0.0.1", r));
  t.teardown(() => closeServer(apiserver));
  const upstream: Upstream = makeUpstream(`http://127.0.0.1:${(apiserver.address() as AddressInfo).port}`);
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream, resources: parseResources("pods"), ownership: new StaticOwnership(OWNED), fallback: "filter", logger: silentLogger() });
  t.teardown(() => proxy.close());
  const inUse = (): number => Object.values(upstream.agent.sockets).reduce((n, l) => n + (l?.length ?? 0), 0);
  const answer = await new Promise<string>((resolve) => {
    const socket = connect(endpoint(proxy), () => socket.write("GET /api/v1/nothing-here HTTP/1.1\r\nHost: x\r\nContent-Length: 44\r\n\r\n{}"));
    let got = Buffer.alloc(0);
    socket.on("data", (b: Buffer) => {
      got = Buffer.concat([got, b]);
      // Leave once the proxy is done with its answer (its write callbacks ran), as a client that read it would.
      if (parseResponses(got, ["GET"]).responses[0]?.complete === true) setImmediate(() => setImmediate(() => socket.destroy()));
    });
    socket.on("close", () => resolve(got.toString("latin1")));
  });
  t.match(answer, /^HTTP\/1\.1 404/, "answered before the body ended");
  t.ok(await eventually(() => inUse() === 0, 10_000), `the upstream request ended with its client (${inUse()} in use)`);
});

/** A proxy on four pods of a gate-off devapi, both closed at the end of `t`. */
async function proxyOnDevApi(t: Test): Promise<{ api: DevApi; upstream: Upstream; proxy: RunningProxy }> {
  const api = await startDevApi({ gate: "off" });
  seedPods(api, { count: 4 });
  const upstream = makeUpstream(api.url);
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream, resources: parseResources("pods"), ownership: new StaticOwnership(OWNED), fallback: "filter", logger: silentLogger() });
  t.teardown(async () => {
    await proxy.close();
    await api.close();
  });
  return { api, upstream, proxy };
}

/** No upstream request, devapi watch or proxy connection is left once the client is gone. */
async function nothingLeftOpen(t: Test, api: DevApi, upstream: Upstream, proxy: RunningProxy): Promise<void> {
  const inUse = (): number => Object.values(upstream.agent.sockets).reduce((n, l) => n + (l?.length ?? 0), 0);
  t.ok(await eventually(() => inUse() === 0 && api.stats.openWatches === 0 && proxy.openConnections() === 0, 10_000), `nothing left open (upstream ${inUse()}, devapi watches ${api.stats.openWatches}, connections ${proxy.openConnections()})`);
}

t.test("an upgrade pipelined behind requests still being answered takes their upstream requests with it", async (t) => {
  const { api, upstream, proxy } = await proxyOnDevApi(t);
  const list = "GET /api/v1/pods HTTP/1.1\r\nHost: x\r\n\r\n";
  const watch = "GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n";
  const upgrade = "GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
  // Node hands the connection to the upgrade as soon as it parses it: the
  // list is being answered, the watch queued behind it, and both are orphaned.
  await exchange(endpoint(proxy), { writes: [Buffer.from(list + watch + upgrade)], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 3 } });
  await nothingLeftOpen(t, api, upstream, proxy);
});

for (const taker of ["an upgrade", "a CONNECT"] as const) {
  t.test(`a response queued behind another is closed when ${taker} takes the connection`, async (t) => {
    // Node closes a queued response when its connection closes, but not when
    // an upgrade or a CONNECT takes the connection: a handler that had not
    // sent the request upstream yet (the ledger may hold a watch back) would
    // send it later, for a client long gone, and nothing would end it.
    const queued: ServerResponse[] = [];
    let closes = 0;
    let closedDestroyed = false;
    const front = createFront({
      handle: (req, res) => {
        if (req.url === "/api/v1/pods?watch=1") res.writeHead(200).write("{}"); // answering, never done: holds the connection
        else {
          queued.push(res);
          res.on("close", () => {
            closes++;
            closedDestroyed = res.destroyed;
          });
        }
      },
      handleUpgrade: (_req, socket) => socket.destroy(),
      index: indexResources(parseResources("pods")),
      logger: silentLogger(),
      metrics: new ProxyMetrics(new Registry()),
    });
    const server: Server = createServer(front.request);
    server.on("upgrade", front.upgrade);
    server.on("connect", front.connect);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    t.teardown(() => closeServer(server));
    const taking = taker === "a CONNECT" ? "CONNECT /api/v1/pods HTTP/1.1\r\nHost: x\r\n\r\n" : "GET /api/v1/namespaces/ns/pods/p0/exec HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
    await exchange({ host: "127.0.0.1", port: (server.address() as AddressInfo).port }, { writes: [Buffer.from(`GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v1/pods?watch=1&held=1 HTTP/1.1\r\nHost: x\r\n\r\n${taking}`)], gapMs: 0, end: { kind: "read-for", ms: 50 } });
    t.equal(queued.length, 1, "the second request was queued behind the first");
    t.ok(await eventually(() => closedDestroyed, 5_000), "its response is closed and destroyed");
    await new Promise((r) => setTimeout(r, 20));
    t.equal(closes, 1, "once");
  });
}

/** An exec upgrade of pod p0. */
const EXEC = "GET /api/v1/namespaces/ns/pods/p0/exec HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";

/** A front on its own listener, with these handlers; closed at the end of `t`. */
async function frontOn(t: Test, handle: FrontOptions["handle"], handleUpgrade: FrontOptions["handleUpgrade"]): Promise<{ port: number; metrics: ProxyMetrics }> {
  const metrics = new ProxyMetrics(new Registry());
  const front = createFront({ handle, handleUpgrade, index: indexResources(parseResources("pods")), logger: silentLogger(), metrics });
  const server: Server = createServer(front.request);
  server.on("upgrade", front.upgrade);
  server.on("connect", front.connect);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => closeServer(server));
  return { port: (server.address() as AddressInfo).port, metrics };
}

for (const gapMs of [0, 50]) {
  t.test(`an upgrade behind a request not yet answered closes the connection, and is not relayed (${gapMs === 0 ? "in one write" : "the request read first"})`, async (t) => {
    // In one write node parses the exec before the GET's end is emitted, and
    // aborting the GET destroys the socket, which is the upgrade's; read
    // first, the socket lives on. Either way a relayed exec would hold a
    // tunnel on a connection whose GET is still to be answered into it.
    const relayed: boolean[] = [];
    const { port, metrics } = await frontOn(t, (req) => req.resume(), (_req, socket) => relayed.push(socket.destroyed));
    const get = "GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n\r\n";
    const res = await exchange({ host: "127.0.0.1", port }, { writes: gapMs === 0 ? [Buffer.from(get + EXEC)] : [Buffer.from(get), Buffer.from(EXEC)], gapMs, end: { kind: "read", maxMs: 10_000, expect: 2 } });
    t.ok(res.serverClosed, "the connection is closed");
    t.equal(res.received.length, 0, "unanswered");
    t.same(relayed, [], "the upgrade is not relayed");
    t.equal((await metrics.rejectedRequests.get()).values.find((v) => v.labels.reason === "pipelined-upgrade")?.value, 1, "counted");
  });
}

t.test("an upgrade after the requests before it on its connection are answered is relayed", async (t) => {
  const relayed: string[] = [];
  const { port, metrics } = await frontOn(
    t,
    // Answered at once, a body unread (the front reads it on and drops it).
    (_req, res) => res.writeHead(200, { "content-length": "2" }).end("ok"),
    (req, socket) => {
      relayed.push(req.url ?? "");
      socket.end("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    },
  );
  const cases = {
    "a GET answered, then an exec": [Buffer.from("GET /version HTTP/1.1\r\nHost: x\r\n\r\n"), Buffer.from(EXEC)],
    // The body's last bytes share a read with the exec: complete, its end not yet emitted.
    "a POST answered before its body was in, the rest of the body and an exec in one write": [Buffer.from("POST /api/v1/namespaces/ns/configmaps HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345"), Buffer.from(`67890${EXEC}`)],
  };
  for (const [name, writes] of Object.entries(cases)) {
    const res = await exchange({ host: "127.0.0.1", port }, { writes, gapMs: 50, end: { kind: "read", maxMs: 10_000, expect: 2 } });
    t.match(res.received.toString("latin1"), /^HTTP\/1\.1 200 OK[\s\S]*HTTP\/1\.1 101 Switching Protocols/, `${name}: answered, then upgraded`);
  }
  t.equal(relayed.length, 2, "both relayed");
  t.equal((await metrics.rejectedRequests.get()).values.length, 0, "nothing refused");
});

t.test("a CONNECT is answered 405; behind unfinished requests it closes the connection and takes them with it", async (t) => {
  const { api, upstream, proxy } = await proxyOnDevApi(t);
  const alone = await send(proxy, "CONNECT /api/v1/namespaces/ns/pods/p0/portforward HTTP/1.1\r\nHost: x\r\n\r\n");
  t.equal(alone.status, 405, "a CONNECT alone is refused");
  t.equal(status(alone).reason, "MethodNotAllowed", "with the apiserver's reason");
  t.match(status(alone).message, /CONNECT "\/api\/v1\/namespaces\/ns\/pods\/p0\/portforward" asks for a tunnel/, "naming the request");
  t.equal(await counter(proxy, "rejectedRequests"), 1, "and counted");
  // Node hands the connection to the CONNECT as soon as it parses it: the
  // list is being answered, the watch queued behind it, and both are orphaned.
  const list = "GET /api/v1/pods HTTP/1.1\r\nHost: x\r\n\r\n";
  const watch = "GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n";
  const tunnel = "CONNECT /api/v1/pods HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
  const res = await exchange(endpoint(proxy), { writes: [Buffer.from(list + watch + tunnel)], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 3 } });
  t.notMatch(res.received.toString("latin1"), /HTTP\/1\.1 405/, "behind unfinished requests, no 405: the connection is closed");
  t.equal((await proxy.metrics.rejectedRequests.get()).values.find((v) => v.labels.reason === "pipelined-upgrade")?.value, 1, "counted as pipelined-upgrade");
  await nothingLeftOpen(t, api, upstream, proxy);
});

/** An apiserver stand-in that answers everything, upgrades included, with every pod in the keyspace. */
async function everythingUpstream(t: { teardown(fn: () => unknown): void }): Promise<{ url: string; seen: string[] }> {
  const seen: string[] = [];
  const pods = Array.from({ length: 64 }, (_, i) => ({ metadata: { name: `p${i}`, namespace: "ns", uid: `uid-${i}` } }));
  const server = createServer((req: IncomingMessage, res) => {
    seen.push(req.url ?? "");
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ kind: "PodList", apiVersion: "v1", metadata: { resourceVersion: "1" }, items: pods }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => closeServer(server));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

t.test("upgrades the proxy cannot filter are refused; subresource upgrades pass through", async (t) => {
  const up = await everythingUpstream(t);
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream: makeUpstream(up.url), resources: parseResources("pods"), ownership: new StaticOwnership(OWNED), fallback: "filter", logger: silentLogger() });
  t.teardown(() => proxy.close());
  const upgrade = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";
  const sharded = await send(proxy, `GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\n${upgrade}\r\n`);
  t.equal(sharded.status, 400);
  t.match(status(sharded).message, /a sharded pods watch cannot be served over an upgraded connection \(Upgrade: "websocket"\)/);
  t.notOk(sharded.body.toString().includes("uid-"), "no pod reaches the client");
  const other = await send(proxy, `GET /apis/coordination.k8s.io/v1/leases?watch=1 HTTP/1.1\r\nHost: x\r\n${upgrade}\r\n`);
  t.equal(other.status, 400);
  t.match(status(other).message, /upgrades only subresources such as exec/);
  t.same(up.seen, [], "neither reached the apiserver");
  const exec = await send(proxy, `GET /api/v1/namespaces/ns/pods/p0/exec?command=sh HTTP/1.1\r\nHost: x\r\n${upgrade}\r\n`);
  t.equal(exec.status, 200, "exec is passed through (this stand-in does not upgrade)");
  t.same(up.seen, ["/api/v1/namespaces/ns/pods/p0/exec?command=sh"]);
  const unsharded = await send(proxy, `GET /api/v1/namespaces/ns/services/s0/proxy/ws HTTP/1.1\r\nHost: x\r\n${upgrade}\r\n`);
  t.equal(unsharded.status, 200, "a subresource of a resource the proxy does not shard upgrades too");
  t.same(up.seen.slice(1), ["/api/v1/namespaces/ns/services/s0/proxy/ws"]);
  // Without the refusal the stand-in's unfiltered list would have reached the client:
  t.ok(
    JSON.parse(exec.body.toString()).items.some((p: { metadata: { uid: string } }) => !contains(OWNED, fnv1a64(p.metadata.uid))),
    "(the stand-in does answer with pods outside the shard)",
  );
});

t.test("a refused upgrade's connection closes when its client leaves, even with more bytes unread", async (t) => {
  const api = await startDevApi({ gate: "off" });
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream: makeUpstream(api.url), resources: parseResources("pods"), ownership: new StaticOwnership(OWNED), fallback: "filter", logger: silentLogger() });
  t.teardown(async () => {
    await proxy.close();
    await api.close();
  });
  const refused = "GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
  const res = await exchange(endpoint(proxy), { writes: [Buffer.from(refused + "x".repeat(70_000))], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 1 } });
  t.equal(parseResponses(res.received, ["GET"]).responses[0]?.status, 400);
  t.ok(await eventually(() => proxy.openConnections() === 0, 5000), `the connection closed (${proxy.openConnections()} open)`);
});

t.test("refusing an upgrade to a client already gone is not an uncaught error", async (t) => {
  const gone = new Duplex({
    read() {},
    write(_chunk, _encoding, cb) {
      cb(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }));
    },
  });
  endWithStatus(gone, 400, "refused");
  await new Promise((r) => setImmediate(r));
  t.ok(gone.destroyed, "the socket is destroyed, the error handled");
});

t.test("an upgrade relayed without upgrading ends upstream when its client leaves", async (t) => {
  let open = 0;
  const server = createServer((req, res) => {
    open++;
    req.socket.once("close", () => open--);
    res.writeHead(200, { "content-type": "text/plain" });
    res.write("streaming, as a log with follow=true does\n");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => closeServer(server));
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream: makeUpstream(`http://127.0.0.1:${(server.address() as AddressInfo).port}`), resources: parseResources("pods"), ownership: new StaticOwnership(OWNED), fallback: "filter", logger: silentLogger() });
  t.teardown(() => proxy.close());
  await exchange(endpoint(proxy), { writes: [Buffer.from("GET /api/v1/namespaces/ns/pods/p0/log?follow=true HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")], gapMs: 0, end: { kind: "read-for", ms: 200 } });
  t.ok(await eventually(() => open === 0 && proxy.openConnections() === 0, 5000), `the upstream request ended (${open} open) and so did the client's connection (${proxy.openConnections()})`);
});

t.test("an answer given before the client's body was done frees its upstream connection", async (t) => {
  // An apiserver that answers a path it does not serve at once, never reads
  // a body, and keeps a connection for as long as its client does.
  let open = 0;
  const server = createServer((_req, res) => {
    res.writeHead(404, { "content-type": "application/json" });
    res.end('{"kind":"Status","code":404}');
  });
  server.keepAliveTimeout = 600_000;
  server.requestTimeout = 0;
  server.on("connection", (s) => {
    open++;
    s.once("close", () => open--);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => closeServer(server));
  const upstream = makeUpstream(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream, resources: parseResources("pods"), ownership: new StaticOwnership(OWNED), fallback: "filter", logger: silentLogger() });
  t.teardown(() => proxy.close());
  const body = '{"kind":"Lease","metadata":{"name":"demo-lock"}}';
  const head = `POST /apis/coordination.k8s.io/v1/namesp%2Faces/ns-0/leases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
  // The head first, then the body in pieces: the answer comes before the body is done.
  const pieces = [head, body.slice(0, 10), body.slice(10, 30), body.slice(30)].map((p) => Buffer.from(p));
  const res = await exchange(endpoint(proxy), { writes: pieces, gapMs: 20, end: { kind: "read-for", ms: 50 } }, ["POST"]);
  t.equal(parseResponses(res.received, ["POST"]).responses[0]?.status, 404, "the apiserver's answer is relayed");
  t.ok(await eventually(() => open === 0, 10_000), `the upstream connection is closed (${open} open at the apiserver)`);
});

t.test("a client that waits for 100 Continue gets it before it sends its body, and then its answer", async (t) => {
  const api = await startDevApi({ gate: "off" });
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream: makeUpstream(api.url), resources: parseResources("pods"), ownership: new StaticOwnership(OWNED), fallback: "filter", logger: silentLogger() });
  t.teardown(async () => {
    await proxy.close();
    await api.close();
  });
  const body = JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "after-continue", namespace: "default" } });
  const answer = await new Promise<{ continued: boolean; status: number }>((resolve, reject) => {
    let continued = false;
    const req = request(`${proxy.url}/api/v1/namespaces/default/configmaps`, { method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), expect: "100-continue" } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ continued, status: res.statusCode ?? 0 }));
    });
    // The body goes only once the 100 came: without it this request would hang.
    req.on("continue", () => {
      continued = true;
      req.end(body);
    });
    req.on("error", reject);
  });
  t.ok(answer.continued, "the proxy answered Expect: 100-continue with a 100");
  t.equal(answer.status, 201, "and the body sent after it was served");
});

t.test("a watch the proxy passes through answers its head before its first event, as the apiserver does", async (t) => {
  const { api, upstream, proxy } = await proxyOnDevApi(t);
  // Quiet watches: no lease exists, and no pod is named p-none.
  for (const path of ["/apis/coordination.k8s.io/v1/leases?watch=1", "/api/v1/watch/namespaces/ns-0/pods/p-none"]) {
    let status: number | undefined;
    const req = request({ ...endpoint(proxy), path }, (res) => {
      status = res.statusCode;
      res.resume();
    });
    req.on("error", () => undefined);
    req.end();
    t.ok(await eventually(() => status !== undefined, 10_000), `${path}: answered before any event`);
    t.equal(status, 200, path);
    req.destroy();
  }
  await nothingLeftOpen(t, api, upstream, proxy);
});

t.test("a GET sent upstream without its body is sent without its framing: the pooled connection stays in step", async (t) => {
  const { api, upstream, proxy } = await proxyOnDevApi(t);
  // With Expect: 100-continue http-proxy-3 skips its proxyReq hooks, so a
  // Content-Length left on the request went upstream with no body behind it.
  const paths = ["/api/v1/namespaces/ns-0/services/s1", "/api/v1/pods", "/api/v1/namespaces/ns-0/pods/p0/status"];
  for (const path of paths) {
    for (const expect of ["", "Expect: 100-continue\r\n"]) {
      const what = `${path}${expect === "" ? "" : " with Expect"}`;
      const first = await exchange(endpoint(proxy), { writes: [Buffer.from(`GET ${path} HTTP/1.1\r\nHost: x\r\n${expect}Content-Length: 2\r\n\r\n{}`)], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 1 } });
      t.ok(parseResponses(first.received, ["GET"]).responses[0]?.complete, `${what}: answered`);
      // Another client's request, on whichever pooled upstream connection is free.
      const next = await exchange(endpoint(proxy), { writes: [Buffer.from("GET /api/v1/namespaces/ns-0/configmaps HTTP/1.1\r\nHost: x\r\n\r\n")], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 1 } });
      t.equal(parseResponses(next.received, ["GET"]).responses[0]?.status, 200, `after ${what}: the next request on the pool is answered as itself`);
    }
  }
  await nothingLeftOpen(t, api, upstream, proxy);
});

t.test("a followed log with a large GET body ends upstream when its client leaves", async (t) => {
  // An apiserver stand-in that streams a log and never reads a body, as the apiserver does.
  let open = 0;
  const apiserver = createServer((req, res) => {
    open++;
    res.on("close", () => open--);
    res.writeHead(200, { "content-type": "text/plain" });
    res.write("line 1\n");
  });
  await new Promise<void>((r) => apiserver.listen(0, "127.0.0.1", r));
  t.teardown(() => closeServer(apiserver));
  const upstream = makeUpstream(`http://127.0.0.1:${(apiserver.address() as AddressInfo).port}`);
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream, resources: parseResources("pods"), ownership: new StaticOwnership(OWNED), fallback: "filter", logger: silentLogger() });
  t.teardown(() => proxy.close());
  const body = "x".repeat(2_000_000);
  const res = await exchange(endpoint(proxy), { writes: [Buffer.from(`GET /api/v1/namespaces/ns/pods/p0/log?follow=true HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`)], gapMs: 0, end: { kind: "read-for", ms: 300 } });
  t.match(res.received.toString("latin1"), /^HTTP\/1\.1 200/, "the log's head came");
  t.ok(await eventually(() => open === 0, 10_000), `the log's request upstream ended with its client (${open} open)`);
});

const LOCK_PATH = "/apis/coordination.k8s.io/v1/namespaces/ns-0/leases/demo-lock";

/** A proxy with `--leader-election leases/demo-lock` (identity 0) before an apiserver stand-in. */
async function lockProxyBefore(t: Test, apiserver: Server): Promise<RunningProxy> {
  await new Promise<void>((r) => apiserver.listen(0, "127.0.0.1", r));
  t.teardown(() => closeServer(apiserver));
  const upstream = makeUpstream(`http://127.0.0.1:${(apiserver.address() as AddressInfo).port}`);
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream, resources: parseResources("pods"), ownership: new StaticOwnership(OWNED), fallback: "filter", logger: silentLogger(), lock: { spec: parseLockSpec("leases/demo-lock"), identity: "0" } });
  t.teardown(() => proxy.close());
  return proxy;
}

t.test("a leader-election lock GET is sent without its body and framing: the pooled connection stays in step", async (t) => {
  // An apiserver stand-in that answers each request with its own path, and counts what it cannot parse as one.
  let unparsable = 0;
  const apiserver = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ kind: "Lease", apiVersion: "coordination.k8s.io/v1", metadata: { name: "demo-lock-0", namespace: "ns-0", annotations: { path: req.url ?? "" } } }));
  });
  apiserver.on("clientError", (_err, socket) => {
    unparsable++;
    socket.destroy();
  });
  const proxy = await lockProxyBefore(t, apiserver);
  // A body naming the lock grows when renamed; chunked, it went upstream with no framing at all.
  const body = JSON.stringify({ apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: "demo-lock", namespace: "ns-0" } });
  const json = "Content-Type: application/json\r\n";
  const framings = [`${json}Content-Length: ${body.length}\r\n\r\n${body}`, `${json}Transfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`, `${json}Expect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n${body}`];
  for (const framing of framings) {
    const what = framing.split("\r\n")[1] ?? "";
    const first = await exchange(endpoint(proxy), { writes: [Buffer.from(`GET ${LOCK_PATH} HTTP/1.1\r\nHost: x\r\n${framing}`)], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 1 } });
    t.ok(parseResponses(first.received, ["GET"]).responses[0]?.complete, `the lock GET with ${what}: answered`);
    const next = await exchange(endpoint(proxy), { writes: [Buffer.from("GET /api/v1/namespaces/ns-0/configmaps HTTP/1.1\r\nHost: x\r\n\r\n")], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 1 } });
    const answer = parseResponses(next.received, ["GET"]).responses[0];
    t.equal(answer?.status, 200, `after the lock GET with ${what}: the next request on the pool is answered`);
    t.match(next.received.toString("latin1"), /namespaces\/ns-0\/configmaps/, `after the lock GET with ${what}: answered as itself`);
  }
  t.equal(unparsable, 0, "the apiserver read every request it was sent as a request");
});

t.test("a leader-election lock HEAD is answered without a length it cannot know, and the connection stays in step", async (t) => {
  // A HEAD's answer has no body, and its Content-Length would be the GET's,
  // whose renamed body the proxy does not have: neither the empty body's
  // length nor the apiserver's (of the unrenamed body) is right.
  const apiserver = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "application/json", "content-length": "123" });
    res.end(req.method === "HEAD" ? undefined : "x".repeat(123));
  });
  const proxy = await lockProxyBefore(t, apiserver);
  const head = `HEAD ${LOCK_PATH} HTTP/1.1\r\nHost: x\r\n\r\n`;
  const got = await exchange(endpoint(proxy), { writes: [Buffer.from(head + head)], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 2 } });
  const answers = parseResponses(got.received, ["HEAD", "HEAD"]).responses;
  t.same(answers.map((a) => a.status), [200, 200], "both pipelined lock HEADs are answered, each as itself");
  t.notMatch(got.received.toString("latin1"), /content-length/i, "with no Content-Length");
});

t.test("a request line that is not HTTP/1.x is answered 505, as the apiserver does; HTTP/1.0 is served", async (t) => {
  const { api, upstream, proxy } = await proxyOnDevApi(t);
  const upgrade = "Connection: Upgrade\r\nUpgrade: websocket\r\n";
  // A path devapi does not serve: its upgrade is answered 404 without upgrading, and relayed by http-proxy-3.
  const rows: Array<[string, string, RegExp]> = [
    ["a list in HTTP/2.0", "GET /api/v1/pods HTTP/2.0\r\nHost: x\r\n\r\n", /^HTTP\/1\.1 505 /],
    ["an upgrade in HTTP/2.0", `GET /nothing-here HTTP/2.0\r\nHost: x\r\n${upgrade}\r\n`, /^HTTP\/1\.1 505 /],
    ["an upgrade in HTTP/1.0", `GET /nothing-here HTTP/1.0\r\nHost: x\r\n${upgrade}\r\n`, /^HTTP\/1\.0 404 /],
    ["a list in HTTP/1.0", "GET /api/v1/pods HTTP/1.0\r\nHost: x\r\n\r\n", /^HTTP\/1\.1 200 /],
  ];
  for (const [what, bytes, want] of rows) {
    const res = await exchange(endpoint(proxy), { writes: [Buffer.from(bytes)], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 1 } });
    t.match(res.received.toString("latin1"), want, what);
  }
  t.equal((await proxy.metrics.rejectedRequests.get()).values.find((v) => v.labels.reason === "http-version")?.value, 2, "counted as http-version");
  await nothingLeftOpen(t, api, upstream, proxy);
});
