/**
 * Issue 8 (c): requests shaped exactly like a client-go 0.36.4 informer's —
 * path, parameter order, `+` for spaces, `timeout`/`timeoutSeconds`, Accept,
 * User-Agent, as recorded in the `-v=8` logs of
 * `test/fixtures/kube-apiserver/kube-apiserver/observed-client-requests/`
 * (plus the `Accept-Encoding: gzip` Go's transport adds below that log) — go
 * through a proxy that owns shard 1/3 of the real server. The proxy's output is
 * decoded independently (protobufjs from the upstream .proto files, or
 * JSON.parse) and checked against the server's own answer to the same request
 * made directly: the same objects, exactly those in range, byte for byte.
 *
 * Each shape runs as recorded (the informer's own `shardSelector`, which the
 * proxy intersects with its shard) and without a `shardSelector` (an
 * unmodified controller, the usual case).
 */
import t, { type Test } from "tap";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, intersect, shardRange, type Range } from "../../src/shard/range.ts";
import { canonicalSelector, parseSelector } from "../../src/shard/selector.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { decodeList, metaOf } from "../support/proto/k8s.ts";
import { NAMESPACES, pod } from "./support/dataset.ts";
import { observedRequests, withParam } from "./support/observed.ts";
import { startRealProxy } from "./support/proxies.ts";
import { call, callJson, ident, inShard, listAll, realApiEnv, type KubeList, type KubeMeta, type KubeObject, type Reply, type Target } from "./support/realapi.ts";
import { isInitialEventsEnd, isMutation, k8sProto, openWatch, type OpenWatch, type WatchEvent } from "./support/watch.ts";

const env = realApiEnv();
const server: Target = { url: env.url, caPem: env.caPem, token: env.token };
const MINE: Range[] = [shardRange(1, 3)];

const SHAPES = [
  { file: "client-go-0.36.4-informer-pods-protobuf-watchlist.v8.log", mode: "watch-list", encoding: "protobuf" },
  { file: "client-go-0.36.4-informer-pods-json-watchlist.v8.log", mode: "watch-list", encoding: "json" },
  { file: "client-go-0.36.4-informer-pods-protobuf-WatchListClient-false.v8.log", mode: "list+watch", encoding: "protobuf" },
  { file: "client-go-0.36.4-informer-pods-json-WatchListClient-false.v8.log", mode: "list+watch", encoding: "json" },
] as const;

const inRange = (ranges: readonly Range[]) => (m: KubeMeta): boolean => contains(ranges, fnv1a64(m.uid ?? ""));
const evKey = (e: WatchEvent): string => `${e.type}:${e.meta.namespace ?? ""}/${e.meta.name ?? ""}:${e.meta.resourceVersion ?? ""}`;
const metaIdent = (m: KubeMeta): string => `${m.namespace ?? ""}/${m.name ?? ""}@${m.uid ?? ""}`;

interface Written {
  readonly created: KubeObject[];
  readonly sentinel: { uid: string; rv: string };
}

/**
 * Creates `n` pods over the namespaces, label-patches each, deletes each, then
 * patches `sentinel` (an in-range pod): once its MODIFIED arrives, every
 * earlier event has been delivered (a watch is ordered by resourceVersion).
 */
async function scriptedWrites(tag: string, n: number, sentinel: KubeObject, effective: readonly Range[]): Promise<Written> {
  const created: KubeObject[] = [];
  // At least `n`, and on until both sides of `effective` were hit: uids are
  // random, and a narrow effective range (1/3 ∩ the informer's own) misses
  // every one of 24 pods about 2% of the time.
  const keep = inRange(effective);
  const bothSides = (): boolean => created.some((o) => keep(o.metadata ?? {})) && created.some((o) => !keep(o.metadata ?? {}));
  for (let i = 0; i < n || (!bothSides() && i < n + 200); i++) {
    const ns = NAMESPACES[i % NAMESPACES.length] ?? "alpha";
    created.push(await callJson(server, "POST", `/api/v1/namespaces/${ns}/pods`, pod(`cg-${tag}-${i}`, ns, i)));
  }
  for (const o of created) await callJson(server, "PATCH", `/api/v1/namespaces/${o.metadata?.namespace ?? ""}/pods/${o.metadata?.name ?? ""}`, { metadata: { labels: { patched: tag } } }, "application/merge-patch+json");
  for (const o of created) await callJson(server, "DELETE", `/api/v1/namespaces/${o.metadata?.namespace ?? ""}/pods/${o.metadata?.name ?? ""}`);
  const s = await callJson(server, "PATCH", `/api/v1/namespaces/${sentinel.metadata?.namespace ?? ""}/pods/${sentinel.metadata?.name ?? ""}`, { metadata: { labels: { sentinel: tag } } }, "application/merge-patch+json");
  return { created, sentinel: { uid: s.metadata?.uid ?? "", rv: s.metadata?.resourceVersion ?? "" } };
}

const sawSentinel = (s: Written["sentinel"]) => (evs: readonly WatchEvent[]): boolean => evs.some((e) => e.type === "MODIFIED" && e.meta.uid === s.uid && e.meta.resourceVersion === s.rv);

/** The checks every watch through the proxy must pass, against the same watch made directly. */
function checkWatch(t: Test, via: OpenWatch, direct: OpenWatch, effective: readonly Range[], written: Written, from: number, directFrom: number): void {
  const keep = inRange(effective);
  t.equal(via.error, undefined, "every event the proxy wrote decodes");
  t.notOk(via.events.some((e) => e.type === "ERROR"), "no ERROR events");
  const viaMut = via.events.slice(from).filter(isMutation);
  const directMut = direct.events.slice(directFrom).filter((e) => isMutation(e) && keep(e.meta));
  t.same(viaMut.map(evKey), directMut.map(evKey), `the proxy delivered exactly the server's in-range events, in order (${viaMut.length})`);
  t.ok(viaMut.length === directMut.length && viaMut.every((e, i) => e.bytes.equals(directMut[i]?.bytes ?? Buffer.alloc(0))), "each of them byte for byte");
  t.same(via.events.filter((e) => isMutation(e) && !keep(e.meta)).map(evKey), [], "no event for an out-of-range object");
  const ins = written.created.filter((o) => inShard(o, effective, "uid"));
  const outs = written.created.filter((o) => !inShard(o, effective, "uid"));
  t.ok(ins.length > 0 && outs.length > 0, `the scripted writes hit both sides (${ins.length} in range, ${outs.length} out)`);
  const seq = (uid: string): string[] => viaMut.filter((e) => e.meta.uid === uid).map((e) => e.type);
  t.same(
    ins.map((o) => ({ pod: o.metadata?.name, events: seq(o.metadata?.uid ?? "") })),
    ins.map((o) => ({ pod: o.metadata?.name, events: ["ADDED", "MODIFIED", "DELETED"] })),
    "every in-range pod: ADDED, MODIFIED (label patch), DELETED",
  );
  const bookmarks = via.events.filter((e) => e.type === "BOOKMARK");
  t.ok(bookmarks.every((e) => e.kind === "Pod" && (e.meta.uid ?? "") === "" && (e.meta.name ?? "") === "" && (e.meta.resourceVersion ?? "") !== ""), `bookmarks carry only a resourceVersion (${bookmarks.length}; protobuf writes empty strings)`);
}

function decodeListReply(r: Reply, encoding: "protobuf" | "json"): { meta: KubeMeta; items: KubeMeta[]; kind: string } {
  if (encoding === "protobuf") {
    const l = decodeList(k8sProto(), r.body);
    return { kind: l.kind, meta: metaOf(l.object), items: l.items.map((i) => metaOf(i) as KubeMeta) };
  }
  const l = JSON.parse(r.body.toString("utf8")) as KubeList;
  return { kind: l.kind ?? "", meta: l.metadata ?? {}, items: (l.items ?? []).map((i) => i.metadata ?? {}) };
}

for (const shape of SHAPES) {
  for (const keepSelector of [true, false]) {
    const variant = keepSelector ? "as recorded (the informer's own shardSelector, intersected with the proxy's shard)" : "without a shardSelector (an unmodified controller)";
    t.test(`gate ${env.gate}: client-go ${shape.encoding} ${shape.mode}, ${variant}: exactly the in-range pods, decoded, byte for byte the server's`, async (t) => {
      const reqs = observedRequests(shape.file);
      t.equal(reqs.length, shape.mode === "watch-list" ? 1 : 2, `the log holds the informer's ${shape.mode === "watch-list" ? "watch-list" : "list and watch"}`);
      const first = reqs[0];
      if (first === undefined) return;
      const recordedSel = new URLSearchParams(first.pathAndQuery.split("?")[1]).get("shardSelector") ?? "";
      const effective = keepSelector ? intersect(parseSelector(recordedSel).ranges, MINE) : MINE;
      const effectiveSel = canonicalSelector("uid", effective) ?? "";
      const shaped = (pq: string): string => (keepSelector ? pq : withParam(pq, "shardSelector", undefined));
      const direct = (pq: string): string => withParam(pq, "shardSelector", effectiveSel);
      const headers = { ...first.headers, "accept-encoding": "gzip" };
      const lane = await startRealProxy(env, { resources: parseResources("pods"), ranges: MINE });
      const watches: OpenWatch[] = [];
      t.teardown(async () => {
        for (const w of watches) w.close();
        await lane.proxy.close();
      });
      const { items } = await listAll(server, "/api/v1/pods");
      const expected = new Set(items.filter((o) => inShard(o, effective, "uid")).map(ident));
      t.ok(expected.size > 20 && expected.size < items.length, `${expected.size} of ${items.length} pods are in ${effectiveSel}`);
      const sentinel = items.find((o) => inShard(o, effective, "uid") && (o.metadata?.name ?? "").startsWith("pod-"));
      if (sentinel === undefined) throw new Error("no seeded pod in range");
      const wantCt = shape.encoding === "protobuf" ? "application/vnd.kubernetes.protobuf" : "application/json";
      let watchPath: string;
      let directWatchPath: string;
      if (shape.mode === "list+watch") {
        const second = reqs[1];
        if (second === undefined) return;
        const viaList = await call(lane.target, shaped(first.pathAndQuery), { headers });
        const directList = await call(server, direct(first.pathAndQuery), { headers });
        t.equal(viaList.status, 200, "list: 200");
        t.equal(viaList.headers["content-type"], wantCt, `list: ${wantCt}`);
        t.equal(viaList.headers["content-encoding"], undefined, "list: not compressed (the proxy asked for identity)");
        const got = decodeListReply(viaList, shape.encoding);
        t.equal(got.kind, "PodList", "list: a PodList");
        t.same(setOf(got.items.map(metaIdent)), setOf([...expected]), `list: exactly the ${expected.size} in-range pods`);
        if (env.gate === "on") {
          t.equal(got.meta.shardInfo?.selector, effectiveSel, "list: the server's shardInfo echoes the effective selector");
          t.ok(viaList.body.equals(directList.body), "list: byte for byte the server's answer (fast path)");
        } else {
          t.equal(got.meta.shardInfo, undefined, "list: no shardInfo (the gate is off)");
          const d = decodeListReply(directList, shape.encoding);
          t.same(got.items.map(metaIdent), d.items.filter(inRange(effective)).map(metaIdent), "list: the server's list with the out-of-range items removed, order kept");
        }
        const rv = got.meta.resourceVersion ?? "";
        t.not(rv, "", "list: has a resourceVersion");
        watchPath = shaped(withParam(second.pathAndQuery, "resourceVersion", rv));
        directWatchPath = direct(withParam(second.pathAndQuery, "resourceVersion", rv));
        t.match(watchPath, /^\/api\/v1\/pods\?allowWatchBookmarks=true&resourceVersion=\d+&/, "watch: the recorded parameter order");
      } else {
        watchPath = shaped(first.pathAndQuery);
        directWatchPath = direct(first.pathAndQuery);
        t.match(watchPath, /^\/api\/v1\/pods\?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&/, "watch-list: the recorded parameter order");
      }
      const via = await openWatch(lane.target, watchPath, headers);
      watches.push(via);
      const dir = await openWatch(server, directWatchPath, headers);
      watches.push(dir);
      t.equal(via.status, 200, "watch: 200");
      t.equal(via.headers["content-type"], shape.encoding === "protobuf" ? "application/vnd.kubernetes.protobuf;stream=watch" : "application/json", "watch: the server's Content-Type");
      let from = 0;
      let directFrom = 0;
      if (shape.mode === "watch-list") {
        t.ok(await via.waitFor((evs) => evs.some(isInitialEventsEnd), 15_000), "watch-list: the initial-events-end bookmark arrived through the proxy");
        t.ok(await dir.waitFor((evs) => evs.some(isInitialEventsEnd), 15_000), "watch-list: and directly");
        from = via.events.findIndex(isInitialEventsEnd) + 1;
        directFrom = dir.events.findIndex(isInitialEventsEnd) + 1;
        const initial = via.events.slice(0, from - 1);
        t.same(
          initial.filter((e) => e.type !== "BOOKMARK").map((e) => e.type),
          initial.filter((e) => e.type !== "BOOKMARK").map(() => "ADDED"),
          "watch-list: the initial events are ADDED",
        );
        const initialSet = initial.filter((e) => e.type === "ADDED").map((e) => metaIdent(e.meta));
        t.equal(initialSet.length, new Set(initialSet).size, "watch-list: no object twice");
        t.same(setOf(initialSet), setOf([...expected]), `watch-list: the initial events are exactly the ${expected.size} in-range pods`);
        const dInitial = dir.events.slice(0, directFrom - 1).filter((e) => e.type === "ADDED" && inRange(effective)(e.meta));
        const vInitial = initial.filter((e) => e.type === "ADDED");
        t.ok(vInitial.length === dInitial.length && vInitial.every((e, i) => e.bytes.equals(dInitial[i]?.bytes ?? Buffer.alloc(0))), "watch-list: each initial event byte for byte the server's");
        const end = via.events[from - 1];
        t.same(end?.meta.annotations, { "k8s.io/initial-events-end": "true" }, "watch-list: the bookmark carries only the initial-events-end annotation");
      }
      const written = await scriptedWrites(`${shape.encoding[0] ?? "x"}${shape.mode === "watch-list" ? "w" : "l"}${keepSelector ? "k" : "n"}${Date.now().toString(36)}`, 24, sentinel, effective);
      t.ok(await via.waitFor(sawSentinel(written.sentinel), 15_000), "the sentinel write arrived through the proxy");
      t.ok(await dir.waitFor(sawSentinel(written.sentinel), 15_000), "and directly");
      checkWatch(t, via, dir, effective, written, from, directFrom);
      t.notOk(via.ended, "the proxy kept the watch open (the client decides when to stop)");
    });
  }
}

function setOf(xs: readonly string[]): string[] {
  return [...new Set(xs)].sort();
}
