/**
 * Compression on every path: a client that sends Accept-Encoding: gzip gets
 * correct responses; bodies the proxy must read are fetched uncompressed
 * (and read anyway if a server compresses regardless); pass-through keeps
 * its encoding.
 */
import t from "tap";
import { request, type IncomingHttpHeaders } from "node:http";
import { gunzipSync, gzipSync } from "node:zlib";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, shardRange } from "../../../src/shard/range.ts";
import { syntheticPodList } from "../../support/synthetic-pods.ts";
import { proxyInFrontOf } from "../support/live-proxy.ts";

const LIST = syntheticPodList(100_000);
const MINE = [shardRange(0, 2)];
const inRange = (uid: string): boolean => contains(MINE, fnv1a64(uid));

async function setup(t: { teardown(fn: () => Promise<void>): void }, mode: "honest" | "always-gzip" | "brotli") {
  const seen: Array<{ url: string; acceptEncoding: string | undefined }> = [];
  const proxy = await proxyInFrontOf(t, MINE, (req, res) => {
    seen.push({ url: req.url ?? "", acceptEncoding: req.headers["accept-encoding"] });
    const wantsGzip = /gzip/.test(req.headers["accept-encoding"] ?? "");
    const body = (req.url ?? "").includes("watch=") ? Buffer.from(JSON.stringify({ type: "ADDED", object: { kind: "Pod", metadata: { uid: "00000000-0000-0000-0000-000000000001", resourceVersion: "9" } } }) + "\n") : LIST;
    if (mode === "brotli") {
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "br" });
      res.end(body);
    } else if (mode === "always-gzip" || wantsGzip) {
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" });
      res.end(gzipSync(body));
    } else {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(body);
    }
  });
  return { proxy, seen };
}

function get(url: string): Promise<{ status: number; headers: IncomingHttpHeaders; raw: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { "accept-encoding": "gzip", authorization: "Bearer x" } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (b: Buffer) => chunks.push(b));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, raw: Buffer.concat(chunks) }));
    });
    req.on("error", reject);
    req.end();
  });
}

t.test("pass-through keeps the server's gzip encoding", async (t) => {
  const { proxy, seen } = await setup(t, "honest");
  const r = await get(`${proxy.url}/api/v1/namespaces/a/pods/p1`);
  t.equal(r.headers["content-encoding"], "gzip");
  t.ok(gunzipSync(r.raw).equals(LIST), "the body decodes to what the server sent");
  t.equal(seen[0]?.acceptEncoding, "gzip", "the client's Accept-Encoding went upstream");
});

t.test("a sharded list is fetched uncompressed and served correctly to a gzip-accepting client", async (t) => {
  const { proxy, seen } = await setup(t, "honest");
  const r = await get(`${proxy.url}/api/v1/pods`);
  t.equal(seen[0]?.acceptEncoding, undefined, "no Accept-Encoding upstream");
  const body = r.headers["content-encoding"] === "gzip" ? gunzipSync(r.raw) : r.raw;
  const doc = JSON.parse(body.toString()) as { items: Array<{ metadata: { uid: string } }> };
  t.ok(doc.items.length > 0 && doc.items.every((i) => inRange(i.metadata.uid)), `${doc.items.length} items, all in range`);
});

t.test("a server that gzips a sharded list anyway is still read and filtered", async (t) => {
  const { proxy } = await setup(t, "always-gzip");
  const r = await get(`${proxy.url}/api/v1/pods`);
  t.equal(r.headers["content-encoding"], undefined, "the proxy serves it decoded");
  const doc = JSON.parse(r.raw.toString()) as { items: Array<{ metadata: { uid: string } }> };
  const all = (JSON.parse(LIST.toString()) as { items: Array<{ metadata: { uid: string } }> }).items;
  t.same(doc.items.map((i) => i.metadata.uid), all.filter((i) => inRange(i.metadata.uid)).map((i) => i.metadata.uid));
  const w = await get(`${proxy.url}/api/v1/pods?watch=1&resourceVersion=3`);
  t.match(w.raw.toString(), /"type":"ADDED"/, "a gzipped watch is read too");
});

t.test("an encoding the proxy cannot read is refused, never passed unfiltered", async (t) => {
  const { proxy } = await setup(t, "brotli");
  const r = await get(`${proxy.url}/api/v1/pods`);
  t.equal(r.status, 502);
  t.match((JSON.parse(r.raw.toString()) as { message: string }).message, /cannot read a "br"-encoded response/);
});
