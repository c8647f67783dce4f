/**
 * What the proxy does when its ranges change (ring handoffs): open watches
 * end with 410 only when the ranges really change; a watch resuming from a
 * LIST made under older ranges gets 410; and a generation is reported
 * applied only once each watched resource has relisted and resumed watching.
 * End to end against devapi; the ledger's rules themselves are rows of
 * test/proxy/handoff/ledger.test.ts (the RelistTracker case that was here is the
 * rows "I1: a generation with nothing to relist is applied at once" and "I1:
 * obligations carry into a later generation…"). Bounds pass on a
 * ManualClock, never in real time.
 */
import t from "tap";
import { request } from "node:http";
import { seedPods, startDevApi } from "../../../src/devapi/index.ts";
import { silentLogger } from "../../../src/log.ts";
import { DEFAULT_POLICY } from "../../../src/proxy/handoff/ledger/types.ts";
import { MutableOwnership } from "../../../src/shard/ownership.ts";
import { startProxy } from "../../../src/proxy/run.ts";
import { makeUpstream } from "../../../src/proxy/serving/upstream.ts";
import { shardRange } from "../../../src/shard/range.ts";
import { parseResources } from "../../../src/shard/spec.ts";
import { eventually } from "../../support/cluster.ts";
import { ManualClock } from "../support/manual-clock.ts";

async function setup(t: { teardown(fn: () => Promise<void>): void }, betweenListAndWatchMs?: number) {
  const api = await startDevApi({ gate: "on" });
  seedPods(api, { count: 300, namespaces: ["alpha", "beta"] });
  const own = new MutableOwnership({ generation: 1, ranges: [shardRange(0, 2)] });
  const clock = new ManualClock();
  const proxy = await startProxy({
    clock,
    listen: { host: "127.0.0.1", port: 0 },
    upstream: makeUpstream(api.url),
    resources: parseResources("pods"),
    ownership: own,
    fallback: "filter",
    logger: silentLogger(),
    ...(betweenListAndWatchMs === undefined ? {} : { betweenListAndWatchMs }),
  });
  t.teardown(async () => {
    await proxy.close();
    await api.close();
  });
  return { api, own, proxy, clock };
}

function get(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request(url, { headers: { authorization: "Bearer x" } }, (res) => {
      let body = "";
      res.on("data", (b: Buffer) => (body += b.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    })
      .on("error", reject)
      .end();
  });
}

function openWatch(url: string): { lines: string[]; ended: Promise<void> } {
  const lines: string[] = [];
  const ended = new Promise<void>((resolve) => {
    request(url, { headers: { authorization: "Bearer x" } }, (res) => {
      let buf = "";
      res.on("data", (b: Buffer) => {
        buf += b.toString();
        const parts = buf.split("\n");
        buf = parts.pop() ?? "";
        lines.push(...parts.filter((l) => l !== ""));
      });
      res.on("end", () => resolve());
      res.on("close", () => resolve());
    })
      .on("error", () => resolve())
      .end();
  });
  return { lines, ended };
}

t.test("a new generation with the same ranges keeps watches open and is applied at once", async (t) => {
  const { api, own, proxy } = await setup(t);
  const list = JSON.parse((await get(`${proxy.url}/api/v1/pods`)).body) as { metadata: { resourceVersion: string } };
  const w = openWatch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=${list.metadata.resourceVersion}`);
  await eventually(() => api.stats.openWatches === 1, 3000);
  own.set({ generation: 2, ranges: [shardRange(0, 2)] });
  t.same(own.applied, [2], "generation 2 applied with no relist");
  await new Promise((r) => setTimeout(r, 200));
  t.equal(api.stats.openWatches, 1, "the watch stays open");
  t.notOk(w.lines.some((l) => l.includes('"ERROR"')), "no ERROR event");
});

t.test("changed ranges end open watches with 410; the generation is applied once the controller relisted and resumed", async (t) => {
  const { api, own, proxy } = await setup(t);
  const list = JSON.parse((await get(`${proxy.url}/api/v1/pods`)).body) as { metadata: { resourceVersion: string } };
  const w = openWatch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=${list.metadata.resourceVersion}`);
  await eventually(() => api.stats.openWatches === 1, 3000);
  own.set({ generation: 2, ranges: [shardRange(0, 4)] });
  await w.ended;
  const last = JSON.parse(w.lines[w.lines.length - 1] ?? "{}") as { type?: string; object?: { code?: number } };
  t.equal(last.type, "ERROR");
  t.equal(last.object?.code, 410, "the watch ended with 410 Expired");
  t.same(own.applied, [], "not applied before the relist");
  // The controller relists, then resumes watching from the new list.
  const relist = JSON.parse((await get(`${proxy.url}/api/v1/pods`)).body) as { metadata: { resourceVersion: string } };
  t.same(own.applied, [], "a finished LIST alone does not apply it");
  const w2 = openWatch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=${relist.metadata.resourceVersion}`);
  t.ok(await eventually(() => own.applied.includes(2), 3000), "applied once the watch resumed under the new ranges");
  t.teardown(() => proxy.close().then(() => w2.ended));
});

t.test("a watch resuming from a LIST made under older ranges gets 410", async (t) => {
  const { own, proxy } = await setup(t);
  const list = JSON.parse((await get(`${proxy.url}/api/v1/pods`)).body) as { metadata: { resourceVersion: string } };
  own.set({ generation: 2, ranges: [shardRange(1, 2)] });
  const r = await get(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=${list.metadata.resourceVersion}`);
  t.equal(r.status, 410);
  t.match(r.body, /relist required/);
});

t.test("a member without ranges yet holds sharded requests until its first non-empty ranges, and is applied once the held LIST is through", async (t) => {
  const api = await startDevApi({ gate: "off" });
  seedPods(api, { count: 200, namespaces: ["alpha"] });
  const own = new MutableOwnership({ generation: 0, ranges: [] });
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream: makeUpstream(api.url), resources: parseResources("pods"), ownership: own, fallback: "filter", logger: silentLogger(), waitForRangesMs: 20_000, clock: new ManualClock() });
  t.teardown(async () => {
    await proxy.close();
    await api.close();
  });
  let answered: { status: number; body: string } | undefined;
  void get(`${proxy.url}/api/v1/pods`).then((r) => (answered = r));
  t.ok(await eventually(() => proxy.proxy.handoff().held === 1, 3000), "held: no ranges yet");
  t.equal(api.stats.lists.get("pods") ?? 0, 0, "nothing reached the apiserver");
  own.set({ generation: 1, ranges: [] });
  t.equal(proxy.proxy.handoff().held, 1, "still held under an empty first table");
  t.equal(answered, undefined);
  own.set({ generation: 2, ranges: [shardRange(0, 2)] });
  t.ok(await eventually(() => answered !== undefined, 5000), "released by the first non-empty ranges");
  const items = (JSON.parse(answered?.body ?? "{}") as { items?: Array<{ metadata: { uid: string } }> }).items ?? [];
  t.ok(items.length > 50 && items.length < 150, `served under those ranges (${items.length} of 200)`);
  t.equal(api.stats.lists.get("pods"), 1, "one LIST in all");
  t.ok(await eventually(() => own.applied.includes(2), 2000), "generation 2 applied once the held LIST completed");
});

t.test("held requests are served (for an empty shard) when the wait runs out", async (t) => {
  const api = await startDevApi({ gate: "on" });
  seedPods(api, { count: 50, namespaces: ["alpha"] });
  const own = new MutableOwnership({ generation: 0, ranges: [] });
  const clock = new ManualClock();
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream: makeUpstream(api.url), resources: parseResources("pods"), ownership: own, fallback: "filter", logger: silentLogger(), waitForRangesMs: 400, clock });
  t.teardown(async () => {
    await proxy.close();
    await api.close();
  });
  const answer = get(`${proxy.url}/api/v1/pods`);
  t.ok(await eventually(() => proxy.proxy.handoff().held === 1, 3000), "held");
  clock.advance(399);
  t.equal(proxy.proxy.handoff().held, 1, "still held a millisecond before the wait is over");
  clock.advance(1);
  t.equal(proxy.proxy.handoff().held, 0, "served when it is");
  const r = await answer;
  t.equal(r.status, 200);
  t.same((JSON.parse(r.body) as { items: unknown[] }).items, [], "owning nothing, it lists nothing");
});

t.test("ranges that change between an informer's LIST and its WATCH: the generation waits for the relist that follows", async (t) => {
  const { own, proxy } = await setup(t);
  const list = JSON.parse((await get(`${proxy.url}/api/v1/pods`)).body) as { metadata: { resourceVersion: string } };
  // No watch open yet: nothing to end, but this cache is of the old ranges.
  own.set({ generation: 2, ranges: [shardRange(0, 4)] });
  t.same(own.applied, [], "not applied at once");
  const resumed = await get(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=${list.metadata.resourceVersion}`);
  t.equal(resumed.status, 410, "the resume gets 410");
  const relist = JSON.parse((await get(`${proxy.url}/api/v1/pods`)).body) as { metadata: { resourceVersion: string } };
  const w = openWatch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=${relist.metadata.resourceVersion}`);
  t.ok(await eventually(() => own.applied.includes(2), 3000), "applied once the relisted watch resumed");
  t.teardown(() => proxy.close().then(() => w.ended));
});

t.test("a one-off LIST (no watch follows) holds a generation back only for a bounded time: the reflector bound, as an informer still reading its list would", async (t) => {
  const { own, proxy, clock } = await setup(t, 400);
  await get(`${proxy.url}/api/v1/pods`);
  own.set({ generation: 2, ranges: [shardRange(1, 2)] });
  t.same(own.applied, [], "held back: it might be an informer still reading its list");
  clock.advance(DEFAULT_POLICY.watcherQuietMs - 1);
  t.same(own.applied, [], "not before the bound (betweenListAndWatchMs long past)");
  clock.advance(1);
  t.same(own.applied, [2], "applied at the bound");
});
