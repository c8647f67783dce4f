import t, { type Test } from "tap";
import { connect } from "node:net";
import { fnv1a64 } from "../../src/shard/hash.ts";
import type { DevApi } from "../../src/devapi/index.ts";
import { call, HIGH, LOW, meta, pod, withApi, type Json } from "./helpers.ts";
import { eventually } from "../support/wait.ts";
import { WatchClient } from "./transcript.ts";

const isLow = (uid: unknown): boolean => typeof uid === "string" && fnv1a64(uid) < 1n << 63n;

function ev(e: unknown): { type: string; object: Json } {
  const o = e as { type: string; object: Json };
  return { type: o.type, object: o.object };
}

function watch(t: Test, api: DevApi, path: string, headers: Record<string, string> = {}): WatchClient {
  const w = new WatchClient(api.url, path, headers);
  t.teardown(() => w.abort());
  return w;
}

/** Asserts that `pred` comes to hold on `w`'s stream; the 30 s is a hang guard, not a bound. */
async function until(t: Test, w: WatchClient, pred: () => boolean, what: string, ms = 30_000): Promise<void> {
  t.ok(await w.waitFor(pred, ms), what);
}

/**
 * Writes a last pod that the watches under test must see (its uid chosen so
 * that it `fits` their selectors) and waits until each of them has. Events
 * arrive in order, so every event of an earlier write has arrived by then:
 * "nothing more came" needs no fixed wait. Returns each watch's events
 * before the sentinel.
 */
async function afterSentinel(t: Test, api: DevApi, ws: readonly WatchClient[], namespace: string, fits: (uid: string) => boolean, labels: Record<string, string> = {}): Promise<unknown[][]> {
  let uid = "";
  for (let i = 0; uid === "" || !fits(uid); i++) uid = `5e000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`;
  const sentinel = pod(namespace, "sentinel", labels);
  api.store.create("pods", { ...sentinel, metadata: { ...(sentinel.metadata as Json), uid } });
  const isSentinel = (e: unknown): boolean => meta(ev(e).object).uid === uid;
  for (const w of ws) await until(t, w, () => w.events.some(isSentinel), `the sentinel ${namespace}/sentinel arrived`);
  return ws.map((w) => w.events.slice(0, w.events.findIndex(isSentinel)));
}

const types = (w: WatchClient): string[] => w.events.map((e) => ev(e).type);

t.test("a watch from a resourceVersion older than the history gets a 410 Expired ERROR event, then the stream ends", async (t) => {
  const api = await withApi(t, { watchHistory: 5 });
  for (let i = 0; i < 12; i++) api.store.create("pods", pod("a", `p${i}`));
  const w = watch(t, api, "/api/v1/pods?watch=1&resourceVersion=2");
  t.equal(await w.ready, 200, "the watch itself starts (the error is an event)");
  await until(t, w, () => w.ended, "the stream ends");
  t.equal(w.events.length, 1);
  t.match(ev(w.events[0]).object, { kind: "Status", status: "Failure", reason: "Expired", code: 410, message: /^too old resource version: 2 \(\d+\)$/ });
  t.equal(ev(w.events[0]).type, "ERROR");
  t.equal(api.stats.openWatches, 0);
});

t.test("a watch resumed from a resourceVersion in the history replays what it missed, in order, then goes live", async (t) => {
  const api = await withApi(t);
  api.store.create("pods", pod("a", "p1"));
  const from = api.store.resourceVersion;
  api.store.create("pods", pod("a", "p2"));
  api.store.patch("pods", "a", "p1", { metadata: { labels: { x: "1" } } });
  api.store.delete("pods", "a", "p2");
  const w = watch(t, api, `/api/v1/pods?watch=true&resourceVersion=${from}`);
  await until(t, w, () => w.events.length >= 4, "replayed events");
  api.store.create("pods", pod("a", "p3"));
  await until(t, w, () => w.events.length >= 5, "live event");
  t.same(
    w.events.map((e) => `${ev(e).type} ${String(meta(ev(e).object).name)}`),
    ["ADDED p2", "MODIFIED p1", "MODIFIED p2", "DELETED p2", "ADDED p3"],
  );
  const rvs = w.events.map((e) => Number(meta(ev(e).object).resourceVersion));
  t.same(rvs, [...rvs].sort((a, b) => a - b), "increasing resourceVersions");
});

t.test("a watch whose client disconnects is cleaned up: no open stream, no listener left", async (t) => {
  const api = await withApi(t);
  api.store.create("pods", pod("a", "p1"));
  const ws = [0, 1, 2].map(() => watch(t, api, "/api/v1/pods?watch=1&allowWatchBookmarks=true"));
  await Promise.all(ws.map((w) => w.ready));
  for (const w of ws) await until(t, w, () => w.events.length >= 1, "the first event");
  t.equal(api.stats.openWatches, 3);
  for (const w of ws) w.abort();
  t.ok(await eventually(() => api.stats.openWatches === 0), "every session closed");
  // Writes after the disconnect reach no one and break nothing.
  for (let i = 0; i < 50; i++) api.store.create("pods", pod("a", `after-${i}`));
  const events: string[] = [];
  const stop = api.store.watch("pods", (e) => events.push(e.type));
  api.store.create("pods", pod("a", "last"));
  stop();
  t.same(events, ["ADDED"], "the store still delivers to live subscribers");
});

t.test("a client that vanishes mid-stream (socket destroyed, no FIN handshake) is cleaned up too", async (t) => {
  const api = await withApi(t);
  for (let i = 0; i < 200; i++) api.store.create("pods", pod("a", `p${i}`, { pad: "x".repeat(60) }));
  const u = new URL(api.url);
  const sock = connect(Number(u.port), u.hostname);
  await new Promise<void>((resolve) => sock.once("connect", () => resolve()));
  sock.write("GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  await new Promise<void>((resolve) => sock.once("data", () => resolve()));
  t.equal(api.stats.openWatches, 1);
  sock.destroy();
  t.ok(await eventually(() => api.stats.openWatches === 0), "the session closed");
});

t.test("close() ends open watches and is idempotent under concurrent calls", async (t) => {
  const api = await withApi(t);
  const w = watch(t, api, "/api/v1/pods?watch=1");
  await w.ready;
  const [a, b, c] = [api.close(), api.close(), api.close()];
  t.equal(a, b);
  t.equal(b, c);
  await a;
  await until(t, w, () => w.ended, "the client sees the stream end");
  t.equal(api.stats.openWatches, 0);
  await api.close();
});

t.test("bookmarks carry only a resourceVersion, and only when asked for", async (t) => {
  const api = await withApi(t, { bookmarkIntervalMs: 50 });
  api.store.create("pods", pod("a", "p1"));
  const from = api.store.resourceVersion;
  const w = watch(t, api, `/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=${from}`);
  await until(t, w, () => types(w).includes("BOOKMARK"), "a periodic bookmark");
  const b = ev(w.events.find((e) => ev(e).type === "BOOKMARK"));
  t.same(b.object, { kind: "Pod", apiVersion: "v1", metadata: { resourceVersion: from }, spec: { containers: null }, status: {} });
  const quiet = watch(t, api, `/api/v1/pods?watch=1&resourceVersion=${from}`);
  await quiet.ready;
  const bookmarks = (): number => types(w).filter((x) => x === "BOOKMARK").length;
  const had = bookmarks();
  await until(t, w, () => bookmarks() >= had + 2, "two more periodic bookmarks on the watch that asked");
  t.same(types(quiet), [], "meanwhile none on the one that did not");
});

t.test("watch-list: the in-shard state as ADDED, the initial-events-end bookmark, then only in-shard live events", async (t) => {
  const api = await withApi(t);
  for (let i = 0; i < 40; i++) api.store.create("pods", pod("a", `p${i}`));
  const w = watch(t, api, `/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&shardSelector=${LOW}`);
  const isEnd = (e: unknown): boolean => ev(e).type === "BOOKMARK" && (meta(ev(e).object).annotations as Json | undefined)?.["k8s.io/initial-events-end"] === "true";
  await until(t, w, () => w.events.some(isEnd), "initial-events-end");
  const end = w.events.findIndex(isEnd);
  const initial = w.events.slice(0, end).map(ev);
  const all = api.store.list("pods");
  t.equal(initial.length, all.filter((p) => isLow(p.metadata?.uid)).length, "exactly the low half");
  t.ok(initial.every((e) => e.type === "ADDED" && isLow(meta(e.object).uid)));
  t.same(ev(w.events[end]).object, { kind: "Pod", apiVersion: "v1", metadata: { resourceVersion: api.store.resourceVersion, annotations: { "k8s.io/initial-events-end": "true" } }, spec: { containers: null }, status: {} });
  for (let i = 0; i < 30; i++) api.store.create("pods", pod("b", `n${i}`));
  const wantLive = api.store.list("pods", { namespace: "b" }).filter((p) => isLow(p.metadata?.uid)).length;
  const [before = []] = await afterSentinel(t, api, [w], "b", isLow);
  const live = before.map(ev).filter((e) => e.type !== "BOOKMARK").slice(initial.length);
  t.equal(live.length, wantLive);
  t.ok(live.every((e) => e.type === "ADDED" && isLow(meta(e.object).uid)), "no out-of-range event");
});

t.test("resourceVersion=0 sends the state first, then live events", async (t) => {
  const api = await withApi(t);
  api.store.create("pods", pod("a", "p1"));
  const w = watch(t, api, "/api/v1/pods?watch=1&resourceVersion=0&allowWatchBookmarks=true");
  await until(t, w, () => w.events.length >= 2, "state and end marker");
  t.equal(ev(w.events[0]).type, "ADDED");
  t.equal((meta(ev(w.events[1]).object).annotations as Json)["k8s.io/initial-events-end"], "true");
  api.store.patch("pods", "a", "p1", { metadata: { labels: { v: "2" } } });
  await until(t, w, () => types(w).includes("MODIFIED"), "live MODIFIED");
});

t.test("an object entering or leaving a label selector is ADDED or DELETED for that watch", async (t) => {
  const api = await withApi(t);
  api.store.create("pods", pod("a", "p1", { role: "x" }));
  const w = watch(t, api, `/api/v1/pods?watch=1&resourceVersion=${api.store.resourceVersion}&labelSelector=role%3Dy`);
  await w.ready;
  api.store.patch("pods", "a", "p1", { metadata: { labels: { role: "y" } } });
  api.store.patch("pods", "a", "p1", { metadata: { labels: { role: "y", more: "1" } } });
  api.store.patch("pods", "a", "p1", { metadata: { labels: { role: "z" } } });
  api.store.patch("pods", "a", "p1", { metadata: { labels: { role: "w" } } });
  const [before = []] = await afterSentinel(t, api, [w], "a", () => true, { role: "y" });
  t.same(before.map((e) => ev(e).type), ["ADDED", "MODIFIED", "DELETED"]);
  t.same(meta(ev(w.events[2]).object).labels, { more: "1", role: "y" }, "DELETED carries the last state that matched");
});

t.test("timeoutSeconds ends the stream, with a bookmark just before when bookmarks are allowed", async (t) => {
  const api = await withApi(t);
  api.store.create("pods", pod("a", "p1"));
  const started = Date.now();
  const w = watch(t, api, `/api/v1/pods?watch=1&timeoutSeconds=3&allowWatchBookmarks=true&resourceVersion=${api.store.resourceVersion}`);
  await until(t, w, () => w.ended, "it ends on its own");
  // Only the lower bound: a timer never fires early, but a loaded machine
  // may run it late.
  const took = Date.now() - started;
  t.ok(took >= 2900, `not before its timeout (ended after ${took} ms)`);
  t.same(types(w), ["BOOKMARK"], "the pre-timeout bookmark (2 s before the deadline)");
  t.equal(api.stats.openWatches, 0);
});

t.test("gate bug-1.36.0: watches without a label or field selector are not filtered; with one they are; lists are", async (t) => {
  const api = await withApi(t, { gate: "bug-1.36.0" });
  const from = api.store.resourceVersion;
  const bare = watch(t, api, `/api/v1/pods?watch=1&resourceVersion=${from}&shardSelector=${LOW}`);
  const labelled = watch(t, api, `/api/v1/pods?watch=1&resourceVersion=${from}&shardSelector=${LOW}&labelSelector=w`);
  const namespaced = watch(t, api, `/api/v1/namespaces/a/pods?watch=1&resourceVersion=${from}&shardSelector=${LOW}`);
  await Promise.all([bare.ready, labelled.ready, namespaced.ready]);
  for (let i = 0; i < 40; i++) api.store.create("pods", pod("a", `p${i}`, { w: "1" }));
  const low = api.store.list("pods").filter((p) => isLow(p.metadata?.uid)).length;
  const [b = [], l = [], n = []] = await afterSentinel(t, api, [bare, labelled, namespaced], "a", isLow, { w: "1" });
  t.equal(b.length, 40, "bare watch: all 40");
  t.equal(l.length, low, "labelled watch: the low half");
  t.equal(n.length, 40, "a namespaced URL is no field selector: all 40");
  t.ok(low < 40 && low > 0);
  const list = await call(api, "GET", `/api/v1/pods?shardSelector=${LOW}`);
  t.equal((list.body.items as unknown[]).length, api.store.list("pods").filter((p) => isLow(p.metadata?.uid)).length, "lists are filtered");
  t.ok(meta(list.body).shardInfo);
  const bad = await call(api, "GET", "/api/v1/pods?watch=1&shardSelector=nope(");
  t.equal(bad.status, 500, "the gate is on: bad selectors still fail");
});

t.test("an invalid shard selector fails a watch with 500 before streaming; with the gate off it is ignored", async (t) => {
  const api = await withApi(t);
  const sel = encodeURIComponent("shardRange(object.metadata.uid, '0xZZZZ000000000000', '0x8000000000000000')");
  const r = await call(api, "GET", `/api/v1/pods?watch=1&timeoutSeconds=2&shardSelector=${sel}`);
  t.equal(r.status, 500);
  t.same(r.body, {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: 'invalid shard selector: hexStart: invalid hex character "Z" in "0xZZZZ000000000000"',
    code: 500,
  });
  t.equal(api.stats.openWatches, 0);
  api.gate = "off";
  const w = watch(t, api, `/api/v1/pods?watch=1&shardSelector=${sel}`);
  t.equal(await w.ready, 200);
  api.store.create("pods", pod("a", "p1"));
  await until(t, w, () => w.events.length >= 1, "events flow, unfiltered");
});

t.test("an empty shardSelector= is no selector, for watches too", async (t) => {
  const api = await withApi(t);
  const w = watch(t, api, `/api/v1/pods?watch=1&resourceVersion=${api.store.resourceVersion}&shardSelector=`);
  await w.ready;
  for (let i = 0; i < 20; i++) api.store.create("pods", pod("a", `p${i}`));
  await until(t, w, () => w.events.length >= 20, "every event");
});

t.test("gate mixed: consecutive watches alternate between filtered and unfiltered", async (t) => {
  const api = await withApi(t, { gate: "mixed" });
  const from = api.store.resourceVersion;
  const first = watch(t, api, `/api/v1/pods?watch=1&resourceVersion=${from}&shardSelector=${HIGH}`);
  await first.ready;
  const second = watch(t, api, `/api/v1/pods?watch=1&resourceVersion=${from}&shardSelector=${HIGH}`);
  await second.ready;
  for (let i = 0; i < 30; i++) api.store.create("pods", pod("a", `p${i}`));
  const high = api.store.list("pods").filter((p) => !isLow(p.metadata?.uid)).length;
  const [f = [], s = []] = await afterSentinel(t, api, [first, second], "a", (uid) => !isLow(uid));
  t.equal(s.length, 30, "the second (off) sees all");
  t.equal(f.length, high, "the first (on) sees its shard");
  t.equal(api.stats.watches.get("pods"), 2);
});

t.test("Table watch: one row per event, columnDefinitions only on the first", async (t) => {
  const api = await withApi(t);
  const accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
  const w = watch(t, api, `/api/v1/pods?resourceVersion=${api.store.resourceVersion}&watch=true`, { accept });
  await w.ready;
  api.store.create("pods", pod("a", "p1"));
  api.store.patch("pods", "a", "p1", { metadata: { labels: { a: "b" } } });
  api.store.delete("pods", "a", "p1");
  await until(t, w, () => w.events.length >= 4, "ADDED, MODIFIED, MODIFIED, DELETED");
  const tables = w.events.map((e) => ev(e).object);
  t.same(types(w), ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]);
  t.ok(tables.every((x) => x.kind === "Table" && (x.rows as unknown[]).length === 1));
  t.ok(Array.isArray(tables[0]?.columnDefinitions));
  t.ok(tables.slice(1).every((x) => x.columnDefinitions === null));
  const cells = (tables[2]?.rows as Json[])[0]?.cells as unknown[];
  t.equal(cells[0], "p1");
  t.equal(cells[2], "Terminating");
  t.equal(((tables[0]?.rows as Json[])[0]?.object as Json).kind, "PartialObjectMetadata");
});

t.test("legacy /watch/ paths, and a single-object watch, deliver only what they name", async (t) => {
  const api = await withApi(t);
  const from = api.store.resourceVersion;
  const ns = watch(t, api, `/api/v1/watch/namespaces/b/pods?resourceVersion=${from}`);
  const one = watch(t, api, `/api/v1/watch/namespaces/a/pods/p1?resourceVersion=${from}`);
  await Promise.all([ns.ready, one.ready]);
  for (const [n, name] of [["a", "p1"], ["a", "p2"], ["b", "p1"], ["b", "p3"]] as const) api.store.create("pods", pod(n, name));
  // Last writes each watch must see: a pod in b, and a change of a/p1.
  const [nsBefore = []] = await afterSentinel(t, api, [ns], "b", () => true);
  api.store.patch("pods", "a", "p1", { metadata: { labels: { last: "1" } } });
  await until(t, one, () => types(one).includes("MODIFIED"), "a/p1's change");
  const named = (es: unknown[]): string[] => es.map((e) => `${String(meta(ev(e).object).namespace)}/${String(meta(ev(e).object).name)}`);
  t.same(named(nsBefore), ["b/p1", "b/p3"]);
  t.same(named(one.events.slice(0, one.events.findIndex((e) => ev(e).type === "MODIFIED"))), ["a/p1"]);
});

t.test("PartialObjectMetadata watch (the metadata informer's Accept)", async (t) => {
  const api = await withApi(t);
  const w = watch(t, api, `/api/v1/pods?watch=1&resourceVersion=${api.store.resourceVersion}`, { accept: "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json" });
  await w.ready;
  api.store.create("pods", pod("a", "p1"));
  await until(t, w, () => w.events.length >= 1, "event");
  t.same(Object.keys(ev(w.events[0]).object), ["kind", "apiVersion", "metadata"]);
  t.equal(ev(w.events[0]).object.kind, "PartialObjectMetadata");
});

t.test("a slow watcher is fed with backpressure: nothing lost, memory bounded by the socket", async (t) => {
  const api = await withApi(t);
  for (let i = 0; i < 3000; i++) api.store.create("pods", pod(`n${i % 7}`, `p${i}`, { pad: "x".repeat(60) }));
  const w = watch(t, api, "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=0");
  await until(t, w, () => types(w).includes("BOOKMARK"), "all initial events and the marker");
  t.equal(types(w).filter((x) => x === "ADDED").length, 3000);
});
