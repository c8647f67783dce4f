/**
 * The sidecar's own API client (src/kube/client.ts): status codes keep their
 * meaning, TLS is verified, the bearer token comes from the file the kubelet
 * rotates, and no error text carries a token.
 */
import t from "tap";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDevApi } from "../../src/devapi/index.ts";
import { ApiClient, ApiError, directConnection, NoAnswerError, TimeoutError, TokenFile, type SetTimer } from "../../src/kube/client.ts";
import { describe, isConflict, isNotFound, LeaseApi, microTime, timeOf } from "../../src/ring/kube.ts";
import { createLocalCa } from "../../src/pki/ca.ts";
import { until } from "../support/wait.ts";

const LEASE = (name: string): Record<string, unknown> => ({
  apiVersion: "coordination.k8s.io/v1",
  kind: "Lease",
  metadata: { name, namespace: "ns" },
  spec: { holderIdentity: "me", leaseDurationSeconds: 15, renewTime: microTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678)) },
});

async function tlsDevApi(token: string) {
  const now = new Date();
  const ca = await createLocalCa("client-test", now, 3600_000);
  const leaf = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1"], now, validityMs: 3600_000 });
  const other = await createLocalCa("someone-else", now, 3600_000);
  const api = await startDevApi({ tls: leaf, requireToken: token });
  return { api, caPem: ca.certPem, otherCaPem: other.certPem };
}

/** A loopback server whose answers the test scripts; records each request's Authorization header. */
async function scripted(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; auth: string[]; close: () => Promise<void> }> {
  const auth: string[] = [];
  const server = createServer((req, res) => {
    auth.push(req.headers.authorization ?? "");
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    auth,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

t.test("Lease calls over verified TLS with the bearer token: create, get, 409 on a stale PUT, 404 as undefined", async (t) => {
  const { api, caPem } = await tlsDevApi("secret-token-1");
  t.teardown(() => api.close());
  const client = new ApiClient(directConnection({ server: api.url, ca: caPem, token: "secret-token-1" }));
  const leases = new LeaseApi(client, 5_000);
  const created = await leases.create("ns", LEASE("a"));
  t.equal(created.metadata?.name, "a");
  t.equal(typeof created.spec?.renewTime, "string", "times stay text");
  t.equal(timeOf(created.spec?.renewTime), Date.UTC(2026, 0, 2, 3, 4, 5, 678), "a MicroTime round-trips to the millisecond");
  const got = await leases.get("ns", "a");
  t.equal(got?.metadata?.resourceVersion, created.metadata?.resourceVersion);
  t.equal(await leases.get("ns", "nope"), undefined, "404 on read is undefined");

  await leases.replace("ns", { ...created, spec: { ...created.spec, holderIdentity: "other" } });
  const stale = await leases.replace("ns", created).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(stale instanceof ApiError, "a stale PUT rejects with ApiError");
  t.ok(isConflict(stale), "and it is a conflict (409), which the member retries");
  t.notOk(isNotFound(stale));
  t.match(describe(stale), /^HTTP 409: /, "described with its status");

  await leases.delete("ns", "a");
  await t.resolves(leases.delete("ns", "a"), "deleting a missing Lease is not an error");
  const created2 = await client.request("POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", { body: LEASE("b"), timeoutMs: 5_000 });
  t.ok(created2, "raw request works too");
});

t.test("the apiserver certificate is verified: a different CA, or the system roots, fail before any request is sent", async (t) => {
  const { api, otherCaPem } = await tlsDevApi("secret-token-2");
  t.teardown(() => api.close());
  for (const [what, ca] of [
    ["another CA", otherCaPem],
    ["the system roots", undefined],
  ] as const) {
    const client = new ApiClient(directConnection({ server: api.url, ca, token: "secret-token-2" }));
    const err = await new LeaseApi(client, 5_000).get("ns", "a").then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(err instanceof NoAnswerError && !(err instanceof ApiError), `${what}: a TLS failure, not an answer`);
    t.match(String(err), /certificate|self.signed|issuer/i, `${what}: says why`);
    t.notMatch(String(err), /secret-token-2/, `${what}: the error does not carry the token`);
  }
  t.equal(api.stats.requests.filter((r) => r.url.includes("leases")).length, 0, "devapi never saw a request");
});

t.test("plain HTTP is refused unless the server is loopback", async (t) => {
  t.throws(() => directConnection({ server: "http://10.0.0.1:8080", token: "x" }), /plain-HTTP/);
  t.throws(() => directConnection({ server: "ftp://127.0.0.1", token: "x" }), /scheme/);
  t.throws(() => directConnection({ server: "not a url" }), /not a URL/);
  t.doesNotThrow(() => directConnection({ server: "http://127.0.0.1:8080" }));
});

t.test("a wrong token is a 401 whose error says nothing of the token", async (t) => {
  const { api, caPem } = await tlsDevApi("right-token");
  t.teardown(() => api.close());
  const client = new ApiClient(directConnection({ server: api.url, ca: caPem, token: "wrong-token-value" }));
  const err = await new LeaseApi(client, 5_000).get("ns", "a").then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof ApiError && err.statusCode === 401);
  t.notMatch(`${String(err)} ${describe(err)} ${JSON.stringify(err)}`, /wrong-token-value|right-token/);
});

t.test("a body that echoes the request is never copied into the error; a Status message is", async (t) => {
  const s = await scripted((req, res) => {
    if (req.url?.startsWith("/status")) {
      res.writeHead(403, { "content-type": "application/json" });
      res.end(JSON.stringify({ kind: "Status", status: "Failure", reason: "Forbidden", message: 'leases.coordination.k8s.io "x" is forbidden', code: 403 }));
      return;
    }
    res.writeHead(500, { "content-type": "text/plain" });
    res.end(`upstream said: ${req.headers.authorization ?? ""}`);
  });
  t.teardown(() => s.close());
  const client = new ApiClient(directConnection({ server: s.url, token: "echoed-token" }));
  const echo = await client.request("GET", "/echo", { timeoutMs: 2_000 }).catch((e: unknown) => e);
  t.ok(echo instanceof ApiError && echo.statusCode === 500);
  t.notMatch(String(echo), /echoed-token/, "the echoed token is not in the error");
  const forbidden = await client.request("GET", "/status", { timeoutMs: 2_000 }).catch((e: unknown) => e);
  t.ok(forbidden instanceof ApiError && forbidden.reason === "Forbidden");
  t.match(describe(forbidden), /HTTP 403: leases.coordination.k8s.io "x" is forbidden/);
});

/** A timer the test fires by hand: what the client armed, and a way to make it expire. */
function handTimer(): { timer: SetTimer; armed: number[]; fire: () => void; pending: () => number } {
  const armed: number[] = [];
  const live = new Set<() => void>();
  return {
    timer: (ms, fn) => {
      armed.push(ms);
      live.add(fn);
      return () => live.delete(fn);
    },
    armed,
    fire: () => {
      for (const fn of [...live]) fn();
    },
    pending: () => live.size,
  };
}

t.test("a call that gets no answer is aborted when its timeout expires, on the timer the client was given", async (t) => {
  let arrived = 0;
  const s = await scripted(() => {
    arrived++; /* never answers */
  });
  t.teardown(() => s.close());
  const hand = handTimer();
  const client = new ApiClient(directConnection({ server: s.url, token: "t" }), hand.timer);
  const call = client.request("GET", "/hang", { timeoutMs: 200 }).catch((e: unknown) => e);
  await until("the request to reach the server", () => arrived === 1);
  t.same(hand.armed, [200], "the call armed its timeout for 200 ms");
  hand.fire();
  const err = await call;
  t.ok(err instanceof TimeoutError && err instanceof NoAnswerError, "a TimeoutError, which is a NoAnswerError");
  t.match(String(err), /GET \/hang: no answer within 200 ms/, "naming the call and its timeout");
});

t.test("an answered call and a watch that hears from the server disarm their timeouts", async (t) => {
  const s = await scripted((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    if (req.url?.includes("watch=true")) res.write(`${JSON.stringify({ type: "ADDED", object: { metadata: { name: "a", resourceVersion: "1" } } })}\n`);
    else res.end("{}");
  });
  t.teardown(() => s.close());
  const hand = handTimer();
  const client = new ApiClient(directConnection({ server: s.url, token: "t" }), hand.timer);
  t.same(await client.request("GET", "/ok", { timeoutMs: 200 }), {});
  t.equal(hand.pending(), 0, "nothing armed once answered");
  const seen: string[] = [];
  const w = client.watch("/x", {}, (type) => seen.push(type), 150);
  await until("the first event", () => seen.length === 1);
  t.same(hand.armed.slice(1), [150, 150], "the watch re-armed its inactivity timeout on the event");
  hand.fire();
  t.equal((await w.done)?.name, "TimeoutError", "and ends when it expires");
});

t.test("raw calls resolve with every answer, whatever its status, and reject only when there is none", async (t) => {
  const s = await scripted((req, res) => {
    if (req.url === "/missing") res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ kind: "Status", code: 404, reason: "NotFound" }));
    else if (req.url === "/text") res.writeHead(500, { "content-type": "text/plain" }).end("oops");
    else res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ made: req.method }));
  });
  t.teardown(() => s.close());
  const client = new ApiClient(directConnection({ server: s.url, token: "t" }));
  t.same(await client.raw("POST", "/things", { body: { a: 1 } }), { status: 201, body: { made: "POST" }, bytes: JSON.stringify({ made: "POST" }).length });
  t.match(await client.get("/missing"), { status: 404, body: { reason: "NotFound" } }, "a 404 is an answer, not an error");
  t.same(await client.get("/text"), { status: 500, body: undefined, bytes: 4 }, "a body that is not JSON reads as undefined");
  // Port 9 (discard) has no listener on a test machine.
  const refused = await new ApiClient(directConnection({ server: "http://127.0.0.1:9" })).get("/things").catch((e: unknown) => e);
  t.ok(refused instanceof NoAnswerError, "no server: a NoAnswerError");
  t.match(String(refused), /GET http:\/\/127\.0\.0\.1:9\/things: connect ECONNREFUSED/, "naming the call and the server");
});

t.test("the token file is re-read after a minute, and at once after a 401; a failed re-read keeps the last token", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "shardcar-token-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, "token");
  writeFileSync(path, "first\n");
  let now = 0;
  const f = new TokenFile(path, () => now);
  t.equal(await f.get(), "first", "read and trimmed");
  writeFileSync(path, "second");
  now = 30_000;
  t.equal(await f.get(), "first", "cached within the minute");
  now = 51_000;
  t.equal(await f.get(), "second", "re-read after 50 s (a minute, refreshed 10 s early, as client-go)");
  writeFileSync(path, "third");
  f.invalidate();
  t.equal(await f.get(), "third", "re-read at once after invalidate (a 401)");
  rmSync(path);
  now = 200_000;
  t.equal(await f.get(), "third", "an unreadable file keeps the last token");
  await t.rejects(new TokenFile(join(dir, "missing")).get(), /cannot read the token file/, "no token at all is an error");
  writeFileSync(path, "  \n");
  await t.rejects(new TokenFile(path).get(), /empty/, "an empty file is not a token");
});

t.test("a rotated token is picked up after the server's 401, on the next call", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "shardcar-token-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, "token");
  writeFileSync(path, "old");
  let valid = "old";
  const s = await scripted((req, res) => {
    const ok = req.headers.authorization === `Bearer ${valid}`;
    res.writeHead(ok ? 200 : 401, { "content-type": "application/json" });
    res.end(JSON.stringify(ok ? { kind: "Lease" } : { kind: "Status", reason: "Unauthorized", message: "Unauthorized", code: 401 }));
  });
  t.teardown(() => s.close());
  const client = new ApiClient(directConnection({ server: s.url, tokenFile: path }));
  await client.request("GET", "/x", { timeoutMs: 2_000 });
  // The kubelet rotates the projected token; the old one stops working.
  writeFileSync(path, "new");
  valid = "new";
  const first = await client.request("GET", "/x", { timeoutMs: 2_000 }).catch((e: unknown) => e);
  t.ok(first instanceof ApiError && first.statusCode === 401, "the cached token is refused once");
  t.ok(await client.request("GET", "/x", { timeoutMs: 2_000 }), "the next call reads the new token");
  t.same(s.auth, ["Bearer old", "Bearer old", "Bearer new"]);
  t.equal(readFileSync(path, "utf8"), "new");
});

t.test("watch: events in order across chunk boundaries, a 410 answer, a broken line, silence", async (t) => {
  let mode = "events";
  const s = await scripted((req, res) => {
    t.match(req.url ?? "", /watch=true/, "asks for a watch");
    if (mode === "gone") {
      res.writeHead(410, { "content-type": "application/json" });
      res.end(JSON.stringify({ kind: "Status", reason: "Expired", message: "too old resource version", code: 410 }));
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    if (mode === "silent") return;
    const text = [
      JSON.stringify({ type: "ADDED", object: { metadata: { name: "a", resourceVersion: "1" } } }),
      JSON.stringify({ type: "MODIFIED", object: { metadata: { name: "a", resourceVersion: "2" } } }),
      mode === "broken" ? "{not json" : JSON.stringify({ type: "BOOKMARK", object: { metadata: { resourceVersion: "3" } } }),
      "",
    ].join("\n");
    // Split mid-line, so events span chunks.
    res.write(text.slice(0, 17));
    setTimeout(() => res.end(text.slice(17)), 20);
  });
  t.teardown(() => s.close());
  const client = new ApiClient(directConnection({ server: s.url, token: "t" }));
  const seen: string[] = [];
  const clean = client.watch("/apis/coordination.k8s.io/v1/leases", { resourceVersion: "0" }, (type, o) => seen.push(`${type}:${String((o as { metadata: { resourceVersion: string } }).metadata.resourceVersion)}`));
  t.equal(await clean.done, undefined, "the server ending the stream is a clean end");
  t.same(seen, ["ADDED:1", "MODIFIED:2", "BOOKMARK:3"]);

  mode = "gone";
  const gone = await client.watch("/x", {}, () => {}).done;
  t.ok(gone instanceof ApiError && gone.statusCode === 410, "a 410 answer is an ApiError with its status");

  mode = "broken";
  seen.length = 0;
  const broken = await client.watch("/x", {}, (type) => seen.push(type)).done;
  t.match(String(broken), /not JSON/, "a line that is not JSON ends the stream with an error (the caller relists)");
  t.same(seen, ["ADDED", "MODIFIED"]);

  mode = "silent";
  const silent = await client.watch("/x", {}, () => {}, 150).done;
  t.equal(silent?.name, "TimeoutError", "silence ends the stream as a TimeoutError (the caller resumes)");

  const aborted = client.watch("/x", {}, () => {});
  aborted.abort();
  t.equal(await aborted.done, undefined, "abort ends it");
});

t.test("a connection from a client-node KubeConfig keeps its connections alive, over HTTPS as over loopback HTTP", async (t) => {
  const { KubeConfig } = await import("@kubernetes/client-node");
  const { createServer: createHttpsServer } = await import("node:https");
  const now = new Date();
  const ca = await createLocalCa("keep-alive-test", now, 3600_000);
  const leaf = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1"], now, validityMs: 3600_000 });
  for (const scheme of ["https", "http"] as const) {
    let connections = 0;
    const handler = (_req: IncomingMessage, res: ServerResponse): void => {
      res.setHeader("content-type", "application/json");
      res.end("{}");
    };
    const server = scheme === "https" ? createHttpsServer({ cert: leaf.cert, key: leaf.key }, handler) : createServer(handler);
    server.on("connection", () => connections++);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    t.teardown(() => new Promise<void>((r) => server.close(() => r())));
    server.keepAliveTimeout = 30_000;
    const url = `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: url, ...(scheme === "https" ? { caData: Buffer.from(ca.certPem).toString("base64") } : { skipTLSVerify: true }) }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const { kubeConfigConnection } = await import("../../src/kube/client.ts");
    const api = new ApiClient(kubeConfigConnection(kc));
    for (let i = 0; i < 5; i++) await api.request("GET", "/api/v1/namespaces/ns/configmaps/x", { timeoutMs: 5_000 });
    t.equal(connections, 1, `${scheme}: five sequential calls share one connection (no handshake per call)`);
    server.closeAllConnections();
  }
});

t.test("a call on a kept-alive connection the server closed unread is sent again once on a new one; a call on a new connection is not", async (t) => {
  let n = 0;
  const s = await scripted((req, res) => {
    n++;
    // The second request meets the server's idle close: the socket is
    // destroyed before the request is answered (or read).
    if (n === 2 || req.url === "/always-closed") {
      req.socket.destroy();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ n }));
  });
  t.teardown(() => s.close());
  const client = new ApiClient(directConnection({ server: s.url, token: "t" }));
  t.same(await client.request("GET", "/first", { timeoutMs: 5_000 }), { n: 1 });
  t.same(await client.request("PUT", "/lease", { body: { a: 1 }, timeoutMs: 5_000 }), { n: 3 }, "the PUT that met the close went again on a new connection");
  t.equal(n, 3);
  // Every connection closed unread: one resend, then the error.
  const fresh = new ApiClient(directConnection({ server: s.url, token: "t" }));
  const err = await fresh.request("GET", "/always-closed", { timeoutMs: 5_000 }).catch((e: unknown) => e);
  t.ok(err instanceof NoAnswerError, "a new connection closed unread is an error at once");
  t.equal(n, 4, "not sent again: it was not a kept-alive connection");
});
