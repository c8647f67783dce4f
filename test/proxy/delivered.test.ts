/**
 * The delivered-object index (src/proxy/delivered.ts): when it may be
 * trusted, what a snapshot sweeps, and which objects leave a range. The
 * index must stay a superset of every cache of its lineage.
 */
import t from "tap";
import { IDLE_INDEX_MS, Lineage, Lineages, lineageKey, ListSink, WatchSink } from "../../src/proxy/delivered.ts";
import type { DeliveredObject } from "../../src/proxy/scan/tap.ts";
import { rng } from "../support/rng.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, FULL_RANGE, shardRange } from "../../src/shard/range.ts";

/** A delivered pod keyed by `key` (its uid unless given), as a tap reports it. */
function pod(name: string, namespace = "ns", uid = `uid-${name}`, key = uid): DeliveredObject {
  const h = fnv1a64(key);
  return { name, namespace, uid, keyHi: Number(h >> 32n), keyLo: Number(h & 0xffffffffn) };
}

t.test("a lineage is trusted only after a complete snapshot, which sweeps what it did not deliver", async (t) => {
  const l = new Lineage("k", "pods", 0);
  l.upsert(pod("old"));
  t.notOk(l.complete, "objects delivered before any snapshot: caches may hold more");
  const list = new ListSink(l, undefined);
  list.upsert(pod("a"));
  list.upsert(pod("b"));
  // A watch of the same lineage delivers during the list: kept by the sweep.
  const w = new WatchSink(l, false);
  w.upsert(pod("c"));
  list.finish();
  t.ok(l.complete, "an unpaginated LIST completes a snapshot");
  t.same(l.leaving([]).map((o) => o.name).sort(), ["a", "b", "c"], "the sweep dropped only what neither the list nor a later event delivered");
  w.remove("ns", "a");
  t.same(l.leaving([]).map((o) => o.name).sort(), ["b", "c"], "a delivered DELETED removes");
});

t.test("paginated lists: the snapshot completes with the last page of the same chain", async (t) => {
  const l = new Lineage("k", "pods", 0);
  l.upsert(pod("stale"));
  const p1 = new ListSink(l, undefined);
  p1.upsert(pod("a"));
  p1.continueToken("t1");
  p1.finish();
  t.notOk(l.complete, "a first page alone is not a snapshot");
  const stray = new ListSink(l, "someone-else");
  stray.upsert(pod("x"));
  stray.finish();
  t.notOk(l.complete, "a page of an unknown chain completes nothing");
  const p2 = new ListSink(l, "t1");
  p2.upsert(pod("b"));
  p2.finish();
  t.ok(l.complete, "the last page completes the chain's snapshot");
  t.same(l.leaving([]).map((o) => o.name).sort(), ["a", "b", "x"], "swept from the first page's start");
});

t.test("a watch-list is a snapshot; an unreadable stream makes the index untrusted", async (t) => {
  const l = new Lineage("k", "pods", 0);
  l.upsert(pod("stale"));
  const w = new WatchSink(l, true);
  // The proxy counts the watch open right after making its sink.
  l.openWatches++;
  l.watchOpens++;
  w.upsert(pod("a"));
  w.initialEventsEnded();
  t.ok(l.complete);
  t.same(l.leaving([]).map((o) => o.name), ["a"]);
  w.unreadable();
  t.notOk(l.complete, "dropped");
  t.equal(l.size, 0);
  w.upsert(pod("b"));
  t.equal(l.size, 0, "an unreadable tap feeds nothing more");
});

t.test("leaving(): the objects whose delivered key (uid, namespace, owner or slot) is outside the ranges", async (t) => {
  const byUid = new Lineage("k", "pods", 0);
  const byNs = new Lineage("k", "pods", 0);
  const random = rng(7);
  const hex = (): string => Math.floor(random() * 2 ** 32).toString(16).padStart(8, "0");
  // Uids as random as a server's: sequential strings share FNV-1a's high bits.
  const objs = Array.from({ length: 200 }, (_, i) => ({ name: `p${i}`, namespace: `ns${i % 7}`, uid: `${hex()}-${hex()}` }));
  for (const o of objs) {
    byUid.upsert(pod(o.name, o.namespace, o.uid));
    byNs.upsert(pod(o.name, o.namespace, o.uid, o.namespace));
  }
  const r = [shardRange(1, 3)];
  t.ok(objs.some((o) => contains(r, fnv1a64(o.uid))) && objs.some((o) => !contains(r, fnv1a64(o.uid))), "premise: objects on both sides of the ranges");
  t.same(byUid.leaving(r).map((o) => o.name).sort(), objs.filter((o) => !contains(r, fnv1a64(o.uid))).map((o) => o.name).sort());
  t.same(byNs.leaving(r).map((o) => o.name).sort(), objs.filter((o) => !contains(r, fnv1a64(o.namespace))).map((o) => o.name).sort());
  t.same(byUid.leaving([FULL_RANGE]), [], "nothing leaves the whole keyspace");
  // An owner key moves with the controller reference: the latest delivery counts.
  const moved = objs.find((o) => contains(r, fnv1a64(o.uid)));
  const away = objs.find((o) => !contains(r, fnv1a64(o.uid)));
  if (moved === undefined || away === undefined) return t.fail("premise: objects on both sides");
  byUid.upsert(pod(moved.name, moved.namespace, moved.uid, away.uid));
  t.ok(byUid.leaving(r).some((o) => o.name === moved.name), "re-delivered under a key outside the ranges: it leaves");
});

t.test("lineage keys: path, selectors and the as= transform; idle indexes are dropped", async (t) => {
  const q = (s: string) => new URLSearchParams(s);
  t.equal(lineageKey("/api/v1/pods", q("watch=1&resourceVersion=5"), "application/json"), lineageKey("/api/v1/pods", q("limit=500"), undefined), "watch, RV and paging parameters do not matter");
  t.not(lineageKey("/api/v1/pods", q("labelSelector=a%3Db"), undefined), lineageKey("/api/v1/pods", q(""), undefined), "label selectors do");
  t.not(lineageKey("/api/v1/pods", q(""), "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"), lineageKey("/api/v1/pods", q(""), "application/json"), "a metadata-only informer is another cache");
  let now = 0;
  const ls = new Lineages(() => now);
  const l = ls.get("a", "pods");
  new ListSink(l, undefined).finish();
  l.upsert(pod("x"));
  t.ok(l.complete);
  now = IDLE_INDEX_MS + 120_000;
  ls.get("b", "pods");
  t.notOk(l.complete, "idle for too long: dropped, so the next narrowing relists");
  t.equal(ls.indexed(), 0);
});

t.test("a snapshot another watch of the lineage overlapped only adds: it may be older than what that watch delivered", async (t) => {
  const l = new Lineage("k", "pods", 0);
  new ListSink(l, undefined).finish();
  t.ok(l.complete, "the informer's own first LIST");
  l.openWatches = 1;
  l.watchOpens = 1;
  l.upsert(pod("z"));
  const oneOff = new ListSink(l, undefined);
  oneOff.upsert(pod("a"));
  oneOff.finish();
  t.same(l.leaving([]).map((o) => o.name).sort(), ["a", "z"], "z, delivered by the running watch, is not swept");
  l.rememberList("10", 1);
  l.rememberList("10", 2);
  l.listEpoch = 2;
  t.equal(l.consumeResume("10").epoch, 1, "a resume from a remembered LIST gets the oldest unused LIST's epoch at that resourceVersion");
  t.equal(l.consumeResume("10").epoch, 2, "the next resume, the next LIST's");
  t.equal(l.consumeResume("10").epoch, 2, "all used: the newest");
  t.equal(l.consumeResume("99").epoch, 2, "any other resume, the lineage's newest");
  l.advance(1);
  t.equal(l.listEpoch, 2, "the lineage's epoch never goes back");
});
