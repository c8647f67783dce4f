/**
 * devapi reads a request as the apiserver does: the path decoded whole and
 * then split, a malformed escape refused; ListOptions booleans converted as
 * apimachinery converts them. And it records what it served each request as.
 */
import t from "tap";
import { get } from "node:http";
import { seedPods } from "../../src/devapi/index.ts";
import { exchange, parseResponses } from "../support/fuzz/raw-http.ts";
import { call, items, meta, withApi } from "./helpers.ts";

t.test("the path is decoded whole, then split; a malformed escape is a 400 naming it", async (t) => {
  const api = await withApi(t);
  seedPods(api, { count: 10, namespaces: ["a", "b"] });
  const r = await call(api, "GET", "/api/v1/namespaces%2Fa%2F%70ods");
  t.equal(r.status, 200);
  t.same([...new Set(items(r.body).map((i) => meta(i).namespace))], ["a"], "a list of namespace a's pods");
  const bad = await call(api, "GET", "/api/v1/namespaces/%zz/pods");
  t.equal(bad.status, 400);
  t.equal(bad.body.message, 'invalid URL escape "%zz"');
});

t.test("a ListOptions boolean is false only for 0 or false (any case); anything else present is true", async (t) => {
  const api = await withApi(t);
  seedPods(api, { count: 2 });
  const rows = [
    ["watch=yes", true],
    ["watch=True", true],
    ["watch=", true],
    ["watch=0", false],
    ["watch=FALSE", false],
    ["watch=false&watch=1", false],
  ] as const;
  const replies = await Promise.all(rows.map(([q]) => call(api, "GET", `/api/v1/pods?${q}&timeoutSeconds=1`)));
  for (const [i, [q, watch]] of rows.entries()) {
    const r = replies[i];
    t.equal(r?.status, 200, q);
    t.equal(r?.text.startsWith('{"type"'), watch, `${q}: ${watch ? "a watch" : "a list"}`);
  }
});

t.test("each request records what it was served as: a LIST or WATCH of a collection, or nothing", async (t) => {
  const api = await withApi(t);
  seedPods(api, { count: 2, namespaces: ["a"] });
  const name = api.store.list("pods")[0]?.metadata?.name ?? "";
  await call(api, "GET", "/api/v1/namespaces/a/pods");
  await call(api, "GET", "/api/v1/pods?watch=1&timeoutSeconds=1");
  await call(api, "GET", `/api/v1/namespaces/a/pods/${name}`);
  await call(api, "GET", `/api/v1/watch/namespaces/a/pods/${name}?timeoutSeconds=1`);
  await call(api, "GET", "/apis/coordination.k8s.io/v1/leases");
  t.same(
    api.stats.requests.map((r) => r.served),
    [{ verb: "list", resource: "pods" }, { verb: "watch", resource: "pods" }, undefined, undefined, { verb: "list", resource: "leases.coordination.k8s.io" }],
  );
});

t.test("a target that starts with // is a path, as Go's net/http reads it, not a host and a path", async (t) => {
  const api = await withApi(t);
  seedPods(api, { count: 2 });
  const port = Number(new URL(api.url).port);
  for (const target of ["//x@y/api/v1/pods", "//api/v1/pods"]) {
    // Raw: every HTTP client here would read the target as a host and a path too.
    const res = await exchange({ host: "127.0.0.1", port }, { writes: [Buffer.from(`GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n`)], gapMs: 0, end: { kind: "read", maxMs: 10_000, expect: 1 } }, ["GET"]);
    t.equal(parseResponses(res.received, ["GET"]).responses[0]?.status, 404, `${target}: no such path (the apiserver's answer too)`);
  }
  t.same(api.stats.requests.map((r) => r.served), [undefined, undefined], "neither served as a list");
});

t.test("an integer option is read as ParseInt reads an int64: beyond its range a 400; a deadline beyond node's timers never fires", async (t) => {
  const api = await withApi(t);
  seedPods(api, { count: 1 });
  const over = await call(api, "GET", "/api/v1/pods?watch=1&timeoutSeconds=99999999999999999999");
  t.equal(over.status, 400);
  t.equal(over.body.message, 'strconv.ParseInt: parsing "99999999999999999999": value out of range');
  // The largest int64: a watch that lasts; node would fire its timer after 1 ms and end it.
  const seen = await new Promise<string>((resolve, reject) => {
    const req = get(`${api.url}/api/v1/pods?watch=1&timeoutSeconds=9223372036854775807`, { headers: { authorization: "Bearer t" } }, (res) => {
      let text = "";
      res.on("data", (b: Buffer) => {
        text += b.toString("utf8");
        if (text.includes("written-after-it-opened")) {
          req.destroy();
          resolve(text);
        }
      });
      res.on("end", () => resolve(text));
      // Once the watch is open, and another request later (a 1 ms timer has fired by then).
      void call(api, "GET", "/version").then(() => api.store.create("pods", { metadata: { name: "written-after-it-opened", namespace: "default" } }));
    });
    req.on("error", reject);
  });
  t.match(seen, /"type":"ADDED".*written-after-it-opened/, "the event written after the watch opened reached the client");
});

t.test("every answer carries the Audit-Id of the request it answers, as its record names it", async (t) => {
  const api = await withApi(t);
  seedPods(api, { count: 2, namespaces: ["a"] });
  const replies = [await call(api, "GET", "/api/v1/pods"), await call(api, "GET", "/api/v1/namespaces/a/pods/nothing"), await call(api, "GET", "/api/v1/namespaces/%zz/pods"), await call(api, "GET", "/api/v1/pods?watch=1&timeoutSeconds=1")];
  t.same(replies.map((r) => r.status), [200, 404, 400, 200]);
  t.same(replies.map((r) => r.headers["audit-id"]), api.stats.requests.map((r) => r.auditId), "one id per request, on its answer, errors included");
  t.equal(new Set(api.stats.requests.map((r) => r.auditId)).size, 4, "and no two alike");
});
