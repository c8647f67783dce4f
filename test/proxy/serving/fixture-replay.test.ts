/**
 * Every recorded list and watch that carried a valid selector is pushed
 * through the whole proxy, with the recording serving as the apiserver:
 * JSON and protobuf, gate on and gate off, every server. The controller's
 * view must hold exactly the in-range objects, and gate-on typed lists must
 * come through byte for byte (the fast path).
 */
import t from "tap";
import { createServer, request, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { silentLogger } from "../../../src/log.ts";
import { StaticOwnership } from "../../../src/shard/ownership.ts";
import { startProxy } from "../../../src/proxy/run.ts";
import { makeUpstream } from "../../../src/proxy/serving/upstream.ts";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains } from "../../../src/shard/range.ts";
import { canonicalSelector, parseSelector, type ShardSelector } from "../../../src/shard/selector.ts";
import { listCases, readCase, type RecordedCase } from "../../support/fixture-io.ts";
import { decodeEvent, decodeList, loadK8sProto, metaOf, splitFrames, type PlainObject } from "../../support/proto/k8s.ts";

const pb = loadK8sProto();

interface Meta {
  uid?: string;
  namespace?: string;
  resourceVersion?: string;
}

function selectorOf(c: RecordedCase): ShardSelector | undefined {
  const v = c.request.query.get("shardSelector");
  if (v === null || v.trim() === "") return undefined;
  try {
    return parseSelector(v);
  } catch {
    return undefined;
  }
}

function resourceOf(path: string): { resource: string; group: string } {
  const parts = path.split("/").filter((p) => p !== "");
  const group = parts[0] === "apis" ? (parts[1] ?? "") : "";
  return { resource: parts[parts.length - 1] ?? "", group };
}

/** The objects a list body holds, whatever its shape. */
function jsonListMetas(body: Buffer): Meta[] {
  const doc = JSON.parse(body.toString("utf8")) as { items?: Array<{ metadata?: Meta }>; rows?: Array<{ object?: { metadata?: Meta } }> };
  if (Array.isArray(doc.rows)) return doc.rows.map((r) => r.object?.metadata ?? {});
  return (doc.items ?? []).map((i) => i.metadata ?? {});
}

interface Ev {
  type: string;
  meta: Meta;
}

function jsonWatchEvents(body: Buffer): Ev[] {
  return body
    .toString("utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => {
      const e = JSON.parse(l) as { type: string; object?: { metadata?: Meta; rows?: Array<{ object?: { metadata?: Meta } }> } };
      const rowMeta = e.object?.rows?.[0]?.object?.metadata;
      return { type: e.type, meta: rowMeta ?? e.object?.metadata ?? {} };
    });
}

function protoWatchEvents(body: Buffer): Ev[] {
  return splitFrames(body).map((f) => {
    const d = decodeEvent(pb, f);
    return { type: d.type, meta: metaOf(d.object) };
  });
}

function isProto(ct: string | undefined): boolean {
  return (ct ?? "").startsWith("application/vnd.kubernetes.protobuf");
}

async function fetchThrough(c: RecordedCase, sel: ShardSelector): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer; upstreamQuery: URLSearchParams }> {
  let upstreamQuery = new URLSearchParams();
  const upstream = createServer((req, res) => {
    upstreamQuery = new URLSearchParams((req.url ?? "").split("?")[1] ?? "");
    const headers: Record<string, string> = { "content-type": c.response.headers["content-type"] ?? "application/json" };
    res.writeHead(c.response.status, headers);
    res.end(c.response.body);
  });
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  const { resource, group } = resourceOf(c.request.path);
  const proxy = await startProxy({
    listen: { host: "127.0.0.1", port: 0 },
    upstream: makeUpstream(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`),
    resources: [{ resource, group, key: sel.key }],
    ownership: new StaticOwnership(sel.ranges),
    fallback: "filter",
    logger: silentLogger(),
    bookmarkIntervalMs: 0,
  });
  try {
    const url = new URL(`${c.request.path}?${c.request.query.toString()}`, proxy.url);
    return await new Promise((resolve, reject) => {
      const headers: Record<string, string> = { authorization: "Bearer replay" };
      if (c.request.headers.accept !== undefined) headers.accept = c.request.headers.accept;
      if (c.request.headers["user-agent"] !== undefined) headers["user-agent"] = c.request.headers["user-agent"];
      const req = request(url, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (b: Buffer) => chunks.push(b));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), upstreamQuery }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end();
    });
  } finally {
    await proxy.close();
    await new Promise<void>((r) => upstream.close(() => r()));
  }
}

const cases = listCases("**/gate-{on,off}/*/*")
  .filter(({ name }) => !name.startsWith("invalid-") && !name.startsWith("pb-invalid") && !name.startsWith("get-single") && name !== "version" && name !== "uid-hash-vectors")
  .map(({ dir, name }) => readCase(dir, name))
  .filter((c) => c.request.method === "GET" && selectorOf(c) !== undefined);

t.test("the recordings give enough cases to mean something", async (t) => {
  t.ok(cases.length > 150, `${cases.length} cases`);
  t.ok(cases.filter((c) => isProto(c.response.headers["content-type"])).length > 20, "including protobuf ones");
});

for (const c of cases) {
  const sel = selectorOf(c) as ShardSelector;
  const watch = c.request.query.get("watch") === "true" || c.request.query.get("watch") === "1";
  t.test(`${c.dir}/${c.name}: the controller sees exactly the in-range objects`, async (t) => {
    const out = await fetchThrough(c, sel);
    t.equal(out.upstreamQuery.get("shardSelector"), canonicalSelector(sel.key, sel.ranges), "the canonical selector went upstream");
    t.equal(out.status, c.response.status, "status passes through");
    if (c.response.status !== 200) {
      t.same(out.body, c.response.body, "error bodies pass unchanged");
      return;
    }
    const proto = isProto(c.response.headers["content-type"]);
    t.equal(isProto(out.headers["content-type"]), proto, "Content-Type matches the body's encoding");
    const inRange = (m: Meta): boolean => contains(sel.ranges, fnv1a64((sel.key === "uid" ? m.uid : m.namespace) ?? ""));
    if (!watch) {
      const inMetas = proto ? decodeList(pb, c.response.body).items.map((i) => metaOf(i) as Meta) : jsonListMetas(c.response.body);
      const outMetas = proto ? decodeList(pb, out.body).items.map((i: PlainObject) => metaOf(i) as Meta) : jsonListMetas(out.body);
      t.same(outMetas.map((m) => m.uid), inMetas.filter(inRange).map((m) => m.uid), "exactly the in-range items, in order");
      const shardInfo = c.dir.includes("gate-on") && /shardInfo/.test(proto ? c.response.body.toString("latin1") : c.response.body.toString("utf8"));
      if (shardInfo) t.ok(out.body.equals(c.response.body), "gate-on typed list: byte-identical (fast path)");
      return;
    }
    const inEvents = proto ? protoWatchEvents(c.response.body) : jsonWatchEvents(c.response.body);
    const outEvents = proto ? protoWatchEvents(out.body) : jsonWatchEvents(out.body);
    const mutations = (evs: Ev[]): string[] => evs.filter((e) => ["ADDED", "MODIFIED", "DELETED"].includes(e.type)).map((e) => `${e.type}:${e.meta.uid}:${e.meta.resourceVersion}`);
    t.same(mutations(outEvents), mutations(inEvents.filter((e) => !["ADDED", "MODIFIED", "DELETED"].includes(e.type) || inRange(e.meta))), "exactly the in-range mutations, in order");
    t.notOk(outEvents.some((e) => e.type === "ERROR"), "no error events");
    const realBookmarks = inEvents.filter((e) => e.type === "BOOKMARK").length;
    t.ok(outEvents.filter((e) => e.type === "BOOKMARK").length >= realBookmarks, "every upstream bookmark passed");
  });
}
