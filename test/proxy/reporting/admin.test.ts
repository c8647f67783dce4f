/**
 * Who may read the admin listener (src/proxy/reporting/admin.ts): the probes are open;
 * /debug/shardcar, which says what the controller was handed, answers
 * loopback peers only unless opened; /metrics behind --metrics-auth answers
 * only requests the apiserver authenticates (TokenReview) and authorizes
 * (SubjectAccessReview), as controller-runtime's metrics filter does, with
 * its caching. The apiserver is devapi, which answers both reviews.
 */
import t, { type Test } from "tap";
import { request } from "node:https";
import { get } from "node:http";
import type { AddressInfo } from "node:net";
import { networkInterfaces } from "node:os";
import { Counter, Registry } from "prom-client";
import { startDevApi, type DevApi } from "../../../src/devapi/index.ts";
import { ApiClient, directConnection } from "../../../src/kube/client.ts";
import { DelegatedAuth } from "../../../src/kube/access-review.ts";
import { createAdminServer, isLoopbackPeer, type AdminOptions } from "../../../src/proxy/reporting/admin.ts";
import { selfSignedTls } from "../../../src/cli/serving-tls.ts";

const OTHER_IP = Object.values(networkInterfaces())
  .flat()
  .find((i) => i !== undefined && i.family === "IPv4" && !i.internal)?.address;

async function admin(t: Test, opts: Partial<AdminOptions>): Promise<number> {
  const registry = new Registry();
  new Counter({ name: "admin_test_total", help: "a metric", registers: [registry] }).inc();
  const server = createAdminServer({ registry, readiness: [], debug: () => ({ delivered: { pods: true } }), ...opts });
  await new Promise<void>((r) => server.listen(0, "0.0.0.0", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as AddressInfo).port;
}

function httpGet(host: string, port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get({ host, port, path }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    }).on("error", reject);
  });
}

function httpsGet(port: number, path: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, rejectUnauthorized: false, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }, (res) => {
      let body = "";
      res.on("data", (b: Buffer) => (body += b.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

t.test("loopback peers are told apart from others, IPv4, IPv6 and mapped", async (t) => {
  for (const a of ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"]) t.ok(isLoopbackPeer(a), a);
  for (const a of ["10.0.0.7", "::ffff:10.0.0.7", "fd00::1", "1270.0.0.1", undefined]) t.notOk(isLoopbackPeer(a), String(a));
});

t.test("/debug/shardcar answers loopback peers only, unless opened; the probes answer anyone", { skip: OTHER_IP === undefined ? "no non-loopback address to connect from" : false }, async (t) => {
  const closed = await admin(t, {});
  t.equal(await httpGet("127.0.0.1", closed, "/debug/shardcar?key=x"), 200, "loopback: 200");
  t.equal(await httpGet(OTHER_IP ?? "", closed, "/debug/shardcar?key=x"), 403, `from ${OTHER_IP}: 403`);
  t.equal(await httpGet(OTHER_IP ?? "", closed, "/healthz"), 200, "the kubelet's probe still answers");
  t.equal(await httpGet(OTHER_IP ?? "", closed, "/metrics"), 200, "metrics without --metrics-auth stay open");
  const open = await admin(t, { debugFrom: "anyone" });
  t.equal(await httpGet(OTHER_IP ?? "", open, "/debug/shardcar?key=x"), 200, "--debug-remote: 200 from anywhere");
});

async function reviewingApi(t: Test): Promise<DevApi> {
  const api = await startDevApi({
    gate: "off",
    requireToken: true,
    auth: {
      users: { "prometheus-token": { username: "system:serviceaccount:monitoring:prometheus" }, "nosy-token": { username: "nosy" }, "group-token": { username: "g", groups: ["metrics-readers"] } },
      grants: [
        { subject: "system:serviceaccount:monitoring:prometheus", verb: "get", path: "/metrics" },
        { subject: "metrics-readers", verb: "get", path: "/metrics" },
      ],
    },
  });
  t.teardown(() => api.close());
  return api;
}

t.test("/metrics behind --metrics-auth: 401 without a token the apiserver knows, 403 without the grant, the metrics with it, over TLS", async (t) => {
  const api = await reviewingApi(t);
  const client = new ApiClient(directConnection({ server: api.url, token: "sidecar-token" }));
  const { tls } = await selfSignedTls("admin test CA", ["localhost", "127.0.0.1"]);
  const port = await admin(t, { metricsAuth: new DelegatedAuth(client), tls });
  t.match(await httpsGet(port, "/metrics"), { status: 401 }, "no token");
  t.match(await httpsGet(port, "/metrics", "forged-token"), { status: 401 }, "a token TokenReview does not authenticate");
  t.match(await httpsGet(port, "/metrics", "nosy-token"), { status: 403, body: /denied for user nosy/ }, "an authenticated user without get /metrics");
  t.match(await httpsGet(port, "/metrics", "prometheus-token"), { status: 200, body: /admin_test_total/ }, "the scraper granted get /metrics");
  t.match(await httpsGet(port, "/metrics", "group-token"), { status: 200 }, "a grant to one of the user's groups");
  t.match(await httpsGet(port, "/healthz"), { status: 200 }, "the probes need no token");
  const reviews = api.stats.requests.filter((q) => q.url.includes("reviews"));
  t.ok(reviews.length > 0 && reviews.every((q) => q.authorization === "Bearer sidecar-token"), "the reviews were asked with the sidecar's own credentials");
});

t.test("the answers are cached as client-go caches them: tokens a minute, an allow five, a deny thirty seconds", async (t) => {
  const api = await reviewingApi(t);
  let now = 0;
  const auth = new DelegatedAuth(new ApiClient(directConnection({ server: api.url, token: "sidecar-token" })), () => now);
  const calls = (kind: string): number => api.stats.requests.filter((q) => q.url.endsWith(kind)).length;
  t.same(await auth.authorize("Bearer prometheus-token", "GET", "/metrics"), { allowed: true });
  t.match(await auth.authorize("Bearer nosy-token", "GET", "/metrics"), { allowed: false, status: 403 });
  t.same([calls("tokenreviews"), calls("subjectaccessreviews")], [2, 2], "one review of each per user");
  now = 29_000;
  await auth.authorize("Bearer prometheus-token", "GET", "/metrics");
  await auth.authorize("Bearer nosy-token", "GET", "/metrics");
  t.same([calls("tokenreviews"), calls("subjectaccessreviews")], [2, 2], "within 30 s: all from the cache");
  now = 31_000;
  await auth.authorize("Bearer nosy-token", "GET", "/metrics");
  t.same([calls("tokenreviews"), calls("subjectaccessreviews")], [2, 3], "after 30 s the deny is asked again, the token not yet");
  now = 61_000;
  await auth.authorize("Bearer prometheus-token", "GET", "/metrics");
  t.same([calls("tokenreviews"), calls("subjectaccessreviews")], [3, 3], "after a minute the token is reviewed again, the allow still cached");
  now = 301_000;
  await auth.authorize("Bearer prometheus-token", "GET", "/metrics");
  t.same([calls("tokenreviews"), calls("subjectaccessreviews")], [4, 4], "after five minutes the allow is asked again");
});

t.test("no answer from the apiserver is a 500, never an allow, and is not cached", async (t) => {
  const auth = new DelegatedAuth(new ApiClient(directConnection({ server: "http://127.0.0.1:9", token: "x" })), () => 0);
  t.match(await auth.authorize("Bearer prometheus-token", "GET", "/metrics"), { allowed: false, status: 500 });
  t.match(await auth.authorize("Bearer prometheus-token", "GET", "/metrics"), { allowed: false, status: 500 }, "asked again");
});

t.test("/shardcar/prestop answers only once the hand-on it runs is done, so the kubelet stops the controller after its slots moved", async (t) => {
  let finish: (line: string) => void = () => {};
  let calls = 0;
  const port = await admin(t, {
    preStop: () => {
      calls++;
      return new Promise<string>((resolve) => (finish = resolve));
    },
  });
  let answered: number | undefined;
  const reply = httpGet("127.0.0.1", port, "/shardcar/prestop").then((s) => (answered = s));
  await until(() => calls === 1);
  // Still waiting: the readiness probe (another request) is answered meanwhile.
  t.equal(await httpGet("127.0.0.1", port, "/readyz"), 200);
  t.equal(answered, undefined, "no answer while the slots are still being handed on");
  finish("slots handed on");
  t.equal(await reply, 200);

  const none = await admin(t, {});
  t.equal(await httpGet("127.0.0.1", none, "/shardcar/prestop"), 200, "without a ring there is nothing to wait for");
});

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setImmediate(r));
}
