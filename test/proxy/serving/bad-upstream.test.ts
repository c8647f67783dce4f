/**
 * Bad input from upstream, through the whole proxy: a list body cut
 * mid-item must fail in the client (never look like a shorter valid list),
 * and an unparsable watch line must end the stream with an ERROR event.
 */
import t from "tap";
import { request, type ServerResponse } from "node:http";
import type { ProxyConfig, RunningProxy } from "../../../src/proxy/run.ts";
import { parseLockSpec } from "../../../src/settings/lock.ts";
import { shardRange } from "../../../src/shard/range.ts";
import { readCase } from "../../support/fixture-io.ts";
import { decodeEvent, loadK8sProto, splitFrames } from "../../support/proto/k8s.ts";
import { syntheticPodList } from "../../support/synthetic-pods.ts";
import { proxyInFrontOf } from "../support/live-proxy.ts";
import { eventually } from "../../support/wait.ts";

const pb = loadK8sProto();

function withUpstream(t: { teardown(fn: () => Promise<void>): void }, handler: (res: ServerResponse, url: string) => void, fallback: "filter" | "fail" = "filter", over: Partial<ProxyConfig> = {}): Promise<RunningProxy> {
  return proxyInFrontOf(t, [shardRange(0, 2)], (req, res) => handler(res, req.url ?? ""), { fallback, ...over });
}

/** Reads a response fully; resolves with how it ended. */
function get(url: string, method = "GET"): Promise<{ status: number; body: Buffer; aborted: boolean }> {
  return new Promise((resolve) => {
    const req = request(url, { method, headers: { authorization: "Bearer x" } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (b: Buffer) => chunks.push(b));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), aborted: false }));
      res.on("error", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), aborted: true }));
      res.on("aborted", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), aborted: true }));
    });
    req.on("error", () => resolve({ status: 0, body: Buffer.alloc(0), aborted: true }));
    req.end();
  });
}

function parses(b: Buffer): boolean {
  try {
    JSON.parse(b.toString("utf8"));
    return true;
  } catch {
    return false;
  }
}

const LIST = syntheticPodList(200_000);

for (const at of [0.1, 0.5, 0.93]) {
  t.test(`an upstream list that ends cleanly but mid-item (cut at ${Math.round(at * 100)}%) fails in the client`, async (t) => {
    const cut = Math.floor(LIST.length * at);
    const proxy = await withUpstream(t, (res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(LIST.subarray(0, cut));
    });
    const r = await get(`${proxy.url}/api/v1/pods`);
    t.ok(r.aborted, "the client's response ended with an error");
    t.notOk(parses(r.body), "what arrived is not a valid (shorter) list");
  });
}

t.test("an upstream connection reset mid-list fails in the client", async (t) => {
  const proxy = await withUpstream(t, (res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.write(LIST.subarray(0, LIST.length >> 1));
    setTimeout(() => res.socket?.destroy(), 20);
  });
  const r = await get(`${proxy.url}/api/v1/pods`);
  t.ok(r.aborted);
  t.notOk(parses(r.body));
});

t.test("the same list, whole, arrives valid: the failure above is the cut's", async (t) => {
  const proxy = await withUpstream(t, (res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(LIST);
  });
  const r = await get(`${proxy.url}/api/v1/pods`);
  t.notOk(r.aborted);
  t.ok(parses(r.body));
});

t.test("an unparsable upstream watch line ends the stream with an ERROR event, and nothing after it passes", async (t) => {
  const good = (uid: string, rv: number): string => JSON.stringify({ type: "ADDED", object: { kind: "Pod", apiVersion: "v1", metadata: { name: `p${rv}`, namespace: "a", uid, resourceVersion: String(rv) } } });
  // Both uids below hash into the low half (shard 0 of 2).
  const lowUid = "00000000-0000-0000-0000-000000000001";
  const proxy = await withUpstream(t, (res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.write(good(lowUid, 10) + "\n");
    res.write('{"type":"ADDED","object":{"metadata":{"uid": tru\n');
    res.write(good(lowUid, 12) + "\n");
    res.end();
  });
  const r = await get(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=5`);
  const lines = r.body.toString("utf8").trim().split("\n").map((l) => JSON.parse(l) as { type: string; object: { code?: number; metadata?: { resourceVersion?: string } } });
  t.same(lines.map((l) => l.type), ["ADDED", "ERROR"], "the good event, then ERROR, then nothing");
  t.equal(lines[1]?.object.code, 500);
});

t.test("an unknown watch event type fails closed", async (t) => {
  const proxy = await withUpstream(t, (res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ type: "TELEPORTED", object: { kind: "Pod", metadata: { uid: "x", resourceVersion: "3" } } }) + "\n");
  });
  const r = await get(`${proxy.url}/api/v1/pods?watch=1&resourceVersion=1`);
  const types = r.body.toString("utf8").trim().split("\n").map((l) => (JSON.parse(l) as { type: string }).type);
  t.same(types, ["ERROR"]);
});

t.test("a body in an encoding the proxy cannot read is refused, not passed unfiltered", async (t) => {
  const proxy = await withUpstream(t, (res) => {
    res.writeHead(200, { "content-type": "application/yaml" });
    res.end("kind: PodList\nitems: []\n");
  });
  const r = await get(`${proxy.url}/api/v1/pods`);
  t.equal(r.status, 502);
  t.match(r.body.toString(), /refusing to pass it unfiltered/);
});

t.test("fallback=fail: an unfiltered list becomes 503; a server-filtered one streams", async (t) => {
  const filtered = syntheticPodList(50_000, { selector: "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')" });
  let serveFiltered = false;
  const proxy = await withUpstream(
    t,
    (res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(serveFiltered ? filtered : LIST);
    },
    "fail",
  );
  const refused = await get(`${proxy.url}/api/v1/pods`);
  t.equal(refused.status, 503);
  t.match(refused.body.toString(), /did not apply the shard selector/);
  serveFiltered = true;
  const ok = await get(`${proxy.url}/api/v1/pods`);
  t.equal(ok.status, 200);
  t.ok(ok.body.equals(filtered), "the confirmed list passes byte for byte");
});

const PB = "application/vnd.kubernetes.protobuf";

t.test("protobuf: a list cut mid-item fails in the client, never a shorter valid list", async (t) => {
  const pbList = readCase("kube-apiserver/gate-off/pods", "pb-list-uid-low").response.body;
  for (const at of [0.3, 0.7]) {
    const proxy = await withUpstream(t, (res) => {
      res.writeHead(200, { "content-type": PB });
      res.end(pbList.subarray(0, Math.floor(pbList.length * at)));
    });
    const r = await get(`${proxy.url}/api/v1/pods`);
    t.ok(r.aborted, `cut at ${at}: the client's response ended with an error`);
  }
});

t.test("protobuf: a frame longer than the bytes left, or over the size limit, ends the watch with an ERROR frame", async (t) => {
  const frames = readCase("kube-apiserver/gate-off/pods", "pb-watch-uid-low").response.body;
  const firstLen = frames.readUInt32BE(0);
  const truncated = frames.subarray(0, 4 + firstLen + 4 + 10);
  const huge = Buffer.concat([frames.subarray(0, 4 + firstLen), Buffer.from([0x7f, 0xff, 0xff, 0xff])]);
  for (const [name, body] of [["truncated", truncated], ["oversized", huge]] as const) {
    const proxy = await withUpstream(t, (res) => {
      res.writeHead(200, { "content-type": `${PB};stream=watch` });
      res.end(body);
    });
    const r = await get(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=1`);
    const types = splitFrames(r.body).map((f) => decodeEvent(pb, f).type);
    t.equal(types[types.length - 1], "ERROR", `${name}: the stream ends with ERROR (${types.join(",")})`);
    t.ok(types.slice(0, -1).every((x) => x === "ADDED" || x === "MODIFIED" || x === "DELETED" || x === "BOOKMARK"), `${name}: nothing unreadable before it`);
  }
});

t.test("a pass-through answer the apiserver cuts ends for the client too", async (t) => {
  // An unsharded watch and a followed log: the stream's head and one event, then the connection drops.
  for (const path of ["/api/v1/services?watch=1", "/api/v1/namespaces/ns/pods/p0/log?follow=true"]) {
    const proxy = await withUpstream(t, (res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"type":"ADDED","object":{"kind":"Service","metadata":{"name":"s0"}}}\n', () => res.socket?.destroy());
    });
    let ended: { status: number; body: Buffer; aborted: boolean } | undefined;
    void get(`${proxy.url}${path}`).then((r) => (ended = r));
    t.ok(await eventually(() => ended !== undefined, 10_000), `${path}: the client's answer ended`);
    t.equal(ended?.status, 200, `${path}: its head came`);
    t.ok(ended?.aborted, `${path}: it ended with an error, not as a whole answer`);
  }
});

t.test("an answer head node cannot write (a status below 100) fails that request, on every route, and the proxy serves on", async (t) => {
  const proxy = await withUpstream(
    t,
    (res, url) => {
      if (url === "/version") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end('{"major":"1"}');
        return;
      }
      // Written raw: node's server will not send such a status itself. Streamed, and with a length.
      const framing = url.includes("streamed") || url.includes("watch") ? "Transfer-Encoding: chunked\r\n\r\n" : "Content-Length: 2\r\n\r\n{}";
      res.socket?.write(`HTTP/1.1 099 Odd\r\nContent-Type: application/json\r\n${framing}`);
    },
    "filter",
    { lock: { spec: parseLockSpec("leases/demo-lock"), identity: "0" } },
  );
  const requests: Array<[string, string]> = [
    ["GET", "/api/v1/services?watch=1"],
    ["GET", "/api/v1/services"],
    ["POST", "/api/v1/namespaces/ns/services"],
    ["GET", "/api/v1/namespaces/ns/pods/p0/proxy/streamed"],
    ["GET", "/api/v1/pods"],
    ["GET", "/api/v1/pods?watch=1"],
    ["GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/demo-lock"],
  ];
  for (const [method, path] of requests) {
    const odd = await get(`${proxy.url}${path}`, method);
    t.ok(odd.aborted || odd.status === 502, `${method} ${path}: the odd answer is not relayed (status ${odd.status})`);
    const next = await get(`${proxy.url}/version`);
    t.equal(next.status, 200, `after ${method} ${path}: the next request is served`);
  }
});
