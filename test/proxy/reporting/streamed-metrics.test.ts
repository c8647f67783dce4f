/**
 * The proxy's byte and event counters count a response while it streams,
 * not when it ends. A watch-list (client-go's default) or any watch may stay
 * open for the pod's whole life, and a large list takes seconds: a scrape
 * must read what has crossed the proxy so far, and the stream's end must add
 * only what the scrapes have not counted yet.
 *
 * A live proxy in front of a stand-in apiserver that writes part of a body
 * and holds the rest; the test reads the metrics the way Prometheus does
 * (the registry's text) while the stream is open, then after it ended.
 */
import t from "tap";
import { request, type ClientRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, shardRange } from "../../../src/shard/range.ts";
import type { RunningProxy } from "../../../src/proxy/run.ts";
import { makeRandom, syntheticUid } from "../../support/synthetic-pods.ts";
import { until } from "../../support/wait.ts";
import { proxyInFrontOf } from "../support/live-proxy.ts";

const OWNED = [shardRange(0, 2)];
const rnd = makeRandom(25);
const UIDS = Array.from({ length: 40 }, () => syntheticUid(rnd));
const IN = UIDS.filter((u) => contains(OWNED, fnv1a64(u)));
const OUT = UIDS.filter((u) => !contains(OWNED, fnv1a64(u)));
const pod = (uid: string, i: number): Record<string, unknown> => ({ kind: "Pod", apiVersion: "v1", metadata: { name: `p${i}`, namespace: "ns", uid, resourceVersion: String(100 + i) } });
const event = (uid: string, i: number): Buffer => Buffer.from(`${JSON.stringify({ type: "ADDED", object: pod(uid, i) })}\n`);

/** One sample of a counter family as a scrape reads it, by its labels (`class="watch"`, `outcome="passed"`). */
async function scraped(proxy: RunningProxy, name: string, labels: Readonly<Record<string, string>>): Promise<number> {
  const text = await proxy.metrics.registry.metrics();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    const inner = line.slice(name.length + 1, line.indexOf("}"));
    if (Object.entries(labels).every(([k, v]) => inner.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}

/** The stand-in apiserver's side of one response: what it wrote, and a way to write more or end. */
interface Held {
  res: ServerResponse;
  written: number;
}

function heldUpstream(contentType: string): { answer: (req: IncomingMessage, res: ServerResponse) => void; held: Promise<Held> } {
  let resolve!: (h: Held) => void;
  const held = new Promise<Held>((r) => (resolve = r));
  return {
    held,
    answer: (_req, res) => {
      res.writeHead(200, { "content-type": contentType });
      res.flushHeaders();
      resolve({ res, written: 0 });
    },
  };
}

function send(h: Held, b: Buffer): void {
  h.written += b.length;
  h.res.write(b);
}

/** A client through the proxy that counts the body bytes it has read. */
function client(proxy: RunningProxy, path: string): { req: ClientRequest; read: () => number; ended: Promise<void> } {
  let read = 0;
  let endedResolve!: () => void;
  const ended = new Promise<void>((r) => (endedResolve = r));
  const req = request(`${proxy.url}${path}`, { headers: { accept: "application/json" } }, (res) => {
    res.on("data", (b: Buffer) => (read += b.length));
    res.on("end", () => endedResolve());
    res.on("error", () => endedResolve());
  });
  req.on("error", () => endedResolve());
  req.end();
  return { req, read: () => read, ended };
}

t.test("a watch-list's bytes and events are counted while the watch is open, and its end adds only the rest", async (t) => {
  const up = heldUpstream("application/json");
  const proxy = await proxyInFrontOf(t, OWNED, up.answer);
  const path = "/api/v1/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&resourceVersion=";
  const c = client(proxy, path);
  const h = await up.held;
  const first = [event(IN[0] ?? "", 0), event(OUT[0] ?? "", 1), event(IN[1] ?? "", 2)];
  for (const e of first) send(h, e);
  const passedBytes = (first[0]?.length ?? 0) + (first[2]?.length ?? 0);
  await until("the client read the two in-shard events", () => c.read() === passedBytes);

  const labels = { resource: "pods", class: "watch" };
  t.equal(await scraped(proxy, "shardcar_proxy_upstream_bytes_total", labels), h.written, "upstream bytes of the open watch: every byte the apiserver sent");
  t.equal(await scraped(proxy, "shardcar_proxy_client_bytes_total", labels), c.read(), "client bytes of the open watch: every byte the controller read");
  t.equal(await scraped(proxy, "shardcar_proxy_watch_events_total", { resource: "pods", outcome: "passed" }), 2, "events passed so far");
  t.equal(await scraped(proxy, "shardcar_proxy_watch_events_total", { resource: "pods", outcome: "dropped" }), 1, "events dropped so far");
  t.equal(proxy.proxy.stats().get("pods")?.upstreamBytes, h.written, "the debug tallies agree");

  const more = event(IN[2] ?? "", 3);
  send(h, more);
  await until("the client read the next event", () => c.read() === passedBytes + more.length);
  t.equal(await scraped(proxy, "shardcar_proxy_upstream_bytes_total", labels), h.written, "a later scrape adds what streamed since the last one");
  t.equal(await scraped(proxy, "shardcar_proxy_watch_events_total", { resource: "pods", outcome: "passed" }), 3);

  h.res.end();
  await c.ended;
  await until("the proxy saw the watch end", async () => (await scraped(proxy, "shardcar_proxy_active_watches", { resource: "pods" })) === 0);
  t.equal(await scraped(proxy, "shardcar_proxy_upstream_bytes_total", labels), h.written, "after the end: nothing counted twice, nothing lost");
  t.equal(await scraped(proxy, "shardcar_proxy_client_bytes_total", labels), c.read());
  t.equal(await scraped(proxy, "shardcar_proxy_watch_events_total", { resource: "pods", outcome: "passed" }), 3);
});

t.test("a list's bytes are counted while it streams, and its end adds only the rest", async (t) => {
  const up = heldUpstream("application/json");
  const proxy = await proxyInFrontOf(t, OWNED, up.answer);
  const c = client(proxy, "/api/v1/pods");
  const h = await up.held;
  const items = [...IN.slice(0, 4), ...OUT.slice(0, 4)].map((u, i) => JSON.stringify(pod(u, i)));
  const head = Buffer.from(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"200"},"items":[${items.slice(0, 6).join(",")},`);
  send(h, head);
  // The first four items are in the shard: the client has them before the list ends.
  await until("the client read the list's first items", () => c.read() > 0);
  const labels = { resource: "pods", class: "list" };
  await until("upstream bytes of the open list: every byte the apiserver sent so far", async () => (await scraped(proxy, "shardcar_proxy_upstream_bytes_total", labels)) === h.written);
  const tail = Buffer.from(`${items.slice(6).join(",")}]}`);
  send(h, tail);
  h.res.end();
  await c.ended;
  await until("the list ended", async () => (await scraped(proxy, "shardcar_proxy_list_items_total", { resource: "pods", outcome: "kept" })) === 4);
  t.equal(await scraped(proxy, "shardcar_proxy_upstream_bytes_total", labels), h.written, "after the end: nothing counted twice, nothing lost");
  t.equal(await scraped(proxy, "shardcar_proxy_client_bytes_total", labels), c.read());
});
