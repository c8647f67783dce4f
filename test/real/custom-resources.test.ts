/**
 * Issue 8 (d): custom resources through the proxy. The real apiextensions
 * server filters custom-resource lists and watches by `shardSelector` when the
 * gate is on, but their lists carry no `shardInfo` (unstructured lists), so it
 * filters without saying so. The proxy must then scan, find nothing to drop,
 * and deliver exactly the shard; with the gate off it must drop the rest.
 */
import t from "tap";
import { StaticOwnership } from "../../src/shard/ownership.ts";
import { shardRange, split, type Range } from "../../src/shard/range.ts";
import { canonicalSelector } from "../../src/shard/selector.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { NAMESPACES, WIDGET, widget, WIDGETS_PATH } from "./support/dataset.ts";
import { cacheIdents, startRealProxy, startReplica, type Replica } from "./support/proxies.ts";
import { call, callJson, eventually, expectedShard, ident, inShard, listAll, realApiEnv, setDiff, setsEqual, type KubeList, type KubeObject, type Target } from "./support/realapi.ts";
import { isMutation, openWatch, type WatchEvent } from "./support/watch.ts";

const env = realApiEnv();
const server: Target = { url: env.url, caPem: env.caPem, token: env.token };
const MINE: Range[] = [shardRange(1, 3)];
const SELECTOR = canonicalSelector("uid", MINE) ?? "";
const RESOURCES = parseResources(`${WIDGET.plural}.${WIDGET.group}`);
const nsPath = (ns: string): string => `/apis/${WIDGET.group}/${WIDGET.version}/namespaces/${ns}/${WIDGET.plural}`;
const JSON_HEADERS = { accept: "application/json", "user-agent": "informer/v0.0.0 (linux/amd64) kubernetes/$Format" };

t.test(`gate ${env.gate}: a custom-resource list through the proxy holds exactly the in-range widgets, and no shardInfo`, async (t) => {
  const lane = await startRealProxy(env, { resources: RESOURCES, ranges: MINE });
  t.teardown(() => lane.proxy.close());
  const want = await expectedShard(server, WIDGETS_PATH, MINE, "uid");
  const via = await call(lane.target, WIDGETS_PATH, { headers: JSON_HEADERS });
  t.equal(via.status, 200, "200");
  const body = JSON.parse(via.body.toString("utf8")) as KubeList;
  t.equal(body.kind, "WidgetList", "a WidgetList");
  t.same(setDiff(new Set((body.items ?? []).map(ident)), want), { missing: [], extra: [] }, `exactly the ${want.size} in-range widgets`);
  t.equal(body.metadata?.shardInfo, undefined, "no shardInfo (custom-resource lists never carry it)");
  t.ok(via.body.indexOf('"items"') < via.body.indexOf('"metadata":{"continue"'), "list metadata after the items (sorted keys), as the server wrote it");
  const direct = await call(server, `${WIDGETS_PATH}?shardSelector=${encodeURIComponent(SELECTOR)}`, { headers: JSON_HEADERS });
  const d = JSON.parse(direct.body.toString("utf8")) as KubeList;
  if (env.gate === "on") {
    t.same((body.items ?? []).map(ident), (d.items ?? []).map(ident), "gate on: the same items as the server's own filtered answer, in order");
    t.equal(d.metadata?.shardInfo, undefined, "gate on: the server filtered without saying so");
    t.equal((d.items ?? []).length, want.size, "gate on: the server's own answer is already exactly the shard");
  } else {
    t.same((body.items ?? []).map(ident), (d.items ?? []).filter((o) => inShard(o, MINE, "uid")).map(ident), "gate off: the server's whole list minus the out-of-range items, in order");
  }
  const st = lane.proxy.proxy.stats().get(`${WIDGET.plural}.${WIDGET.group}`);
  t.equal(st?.lastVerdict, env.gate === "on" ? "inferred" : "no", `verdict: ${env.gate === "on" ? "inferred (nothing to drop, no shardInfo)" : "no (had to drop)"}`);
  t.equal(st?.itemsDropped, env.gate === "on" ? 0 : (d.items ?? []).length - want.size, "items dropped by the proxy");
});

t.test(`gate ${env.gate}: custom-resource pages through the proxy (limit=40, selector resent with each continue) add up to exactly the shard`, async (t) => {
  const lane = await startRealProxy(env, { resources: RESOURCES, ranges: MINE });
  t.teardown(() => lane.proxy.close());
  const want = await expectedShard(server, WIDGETS_PATH, MINE, "uid");
  const got: string[] = [];
  const sizes: number[] = [];
  let cont = "";
  for (let page = 0; page < 50; page++) {
    const q = new URLSearchParams({ limit: "40" });
    if (cont !== "") q.set("continue", cont);
    const r = await call(lane.target, `${WIDGETS_PATH}?${q.toString()}`, { headers: JSON_HEADERS });
    t.equal(r.status, 200, `page ${page}: 200`);
    const l = JSON.parse(r.body.toString("utf8")) as KubeList;
    sizes.push((l.items ?? []).length);
    got.push(...(l.items ?? []).map(ident));
    cont = l.metadata?.continue ?? "";
    if (cont === "") break;
  }
  t.equal(got.length, new Set(got).size, "no widget on two pages");
  t.same(setDiff(new Set(got), want), { missing: [], extra: [] }, `the pages hold exactly the ${want.size} in-range widgets (page sizes ${sizes.join(",")})`);
  t.ok(sizes.every((n) => n <= 40), "no page over the limit");
  if (env.gate === "on") t.ok(sizes.slice(0, -1).every((n) => n === 40), "gate on: every page but the last is full (the server's limit counts filtered items)");
});

t.test(`gate ${env.gate}: a custom-resource watch through the proxy delivers exactly the in-range widgets' events`, async (t) => {
  const lane = await startRealProxy(env, { resources: RESOURCES, ranges: MINE });
  const { items, resourceVersion } = await listAll(server, WIDGETS_PATH);
  const w = await openWatch(lane.target, `${WIDGETS_PATH}?allowWatchBookmarks=true&resourceVersion=${resourceVersion}&watch=true`, JSON_HEADERS);
  t.teardown(async () => {
    w.close();
    await lane.proxy.close();
  });
  t.equal(w.status, 200, "200");
  const tag = Date.now().toString(36);
  const created: KubeObject[] = [];
  for (let i = 0; i < 24; i++) {
    const ns = NAMESPACES[i % NAMESPACES.length] ?? "alpha";
    created.push(await callJson(server, "POST", nsPath(ns), widget(`w-${tag}-${i}`, ns, i)));
  }
  for (const o of created) await callJson(server, "PATCH", `${nsPath(o.metadata?.namespace ?? "")}/${o.metadata?.name ?? ""}`, { spec: { size: 1000 } }, "application/merge-patch+json");
  for (const o of created) await callJson(server, "DELETE", `${nsPath(o.metadata?.namespace ?? "")}/${o.metadata?.name ?? ""}`);
  const sentinel = items.find((o) => inShard(o, MINE, "uid"));
  if (sentinel === undefined) throw new Error("no seeded widget in range");
  const s = await callJson(server, "PATCH", `${nsPath(sentinel.metadata?.namespace ?? "")}/${sentinel.metadata?.name ?? ""}`, { metadata: { labels: { sentinel: tag } } }, "application/merge-patch+json");
  const seen = (evs: readonly WatchEvent[]): boolean => evs.some((e) => e.type === "MODIFIED" && e.meta.resourceVersion === s.metadata?.resourceVersion);
  t.ok(await w.waitFor(seen, 15_000), "the sentinel write arrived (every earlier event has been delivered)");
  t.equal(w.error, undefined, "every event decodes");
  const mutations = w.events.filter(isMutation);
  t.same(mutations.filter((e) => !inShard({ metadata: e.meta }, MINE, "uid")).map((e) => `${e.type} ${e.meta.name ?? ""}`), [], "no event for an out-of-range widget");
  const ins = created.filter((o) => inShard(o, MINE, "uid"));
  t.ok(ins.length > 0 && ins.length < created.length, `the writes hit both sides (${ins.length}/${created.length} in range)`);
  const seq = (uid: string | undefined): string[] => mutations.filter((e) => e.meta.uid === uid).map((e) => e.type);
  t.same(
    ins.map((o) => ({ widget: o.metadata?.name, events: seq(o.metadata?.uid) })),
    ins.map((o) => ({ widget: o.metadata?.name, events: ["ADDED", "MODIFIED", "DELETED"] })),
    "every in-range widget: ADDED, MODIFIED, DELETED",
  );
});

t.test(`gate ${env.gate}: three widget informers behind static-shard proxies each cache exactly their shard`, async (t) => {
  const ranges = split(3).map((r) => [r]);
  const replicas: Replica[] = [];
  t.teardown(() => Promise.all(replicas.map((r) => r.stop())).then(() => undefined));
  for (let i = 0; i < 3; i++) replicas.push(await startReplica(env, `w${i}`, "widgets", { resources: RESOURCES, ranges: ranges[i] ?? [] }));
  // Changes while the informers watch.
  const tag = Date.now().toString(36);
  for (let i = 0; i < 12; i++) {
    const ns = NAMESPACES[i % NAMESPACES.length] ?? "alpha";
    await callJson(server, "POST", nsPath(ns), widget(`inf-${tag}-${i}`, ns, i));
    if (i % 3 === 0) await callJson(server, "DELETE", `${nsPath(ns)}/inf-${tag}-${i}`);
  }
  const want = await Promise.all(ranges.map((r) => expectedShard(server, WIDGETS_PATH, r, "uid")));
  t.ok(await eventually(() => replicas.every((r, i) => setsEqual(cacheIdents(r), want[i] ?? new Set())), 15_000), "caches converged");
  replicas.forEach((r, i) => t.same(setDiff(cacheIdents(r), want[i] ?? new Set()), { missing: [], extra: [] }, `replica ${i}: exactly its ${want[i]?.size} widgets`));
  const all = (await listAll(server, WIDGETS_PATH)).items.length;
  t.equal(want.reduce((n, s) => n + s.size, 0), all, "the shards together are the whole collection");
  t.same(replicas.map((r) => r.errors.length), [0, 0, 0], "no informer saw an error");
});

t.test(`gate ${env.gate}: with fallback=fail, a custom-resource list is ${env.gate === "on" ? "served (the server filtered, silently)" : "refused with 503 (the server did not filter)"}`, async (t) => {
  const lane = await startRealProxy(env, { resources: RESOURCES, ownership: new StaticOwnership(MINE), fallback: "fail" });
  t.teardown(() => lane.proxy.close());
  const r = await call(lane.target, WIDGETS_PATH, { headers: JSON_HEADERS });
  if (env.gate === "on") {
    t.equal(r.status, 200, "200");
    const want = await expectedShard(server, WIDGETS_PATH, MINE, "uid");
    t.same(setDiff(new Set(((JSON.parse(r.body.toString("utf8")) as KubeList).items ?? []).map(ident)), want), { missing: [], extra: [] }, "exactly the shard");
  } else {
    t.equal(r.status, 503, "503");
    t.match(r.body.toString("utf8"), /did not apply the shard selector/, "the Status says why");
  }
});
