/**
 * The delivered-object index (src/proxy/handoff/object-index.ts): when it may be
 * trusted, what a snapshot sweeps, and which objects leave a range. The
 * index must stay a superset of every cache of its lineage. Whether a watch
 * is open is the ledger's to say (`WatchPresence`); here a stub says it.
 */
import t from "tap";
import { atOrBefore, DeliveredIndex, KEPT_NARROWED_LINEAGES, KEPT_NARROWINGS, ListSink, WatchSink, type Resend, type WatchPresence } from "../../../src/proxy/handoff/object-index.ts";
import type { DeliveredObject } from "../../../src/proxy/scan/tap.ts";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, FULL_RANGE, shardRange } from "../../../src/shard/range.ts";
import { rng } from "../../support/rng.ts";

/** A delivered pod keyed by `key` (its uid unless given), as a tap reports it. */
function pod(name: string, namespace = "ns", uid = `uid-${name}`, key = uid): DeliveredObject {
  const h = fnv1a64(key);
  return { name, namespace, uid, keyHi: Number(h >> 32n), keyLo: Number(h & 0xffffffffn) };
}

/** A ledger stand-in: `open` watches now, `opened` ever. */
function presence(): WatchPresence & { open: number; opened: number } {
  const p = { open: 0, opened: 0, openWatches: () => p.open, watchesOpened: () => p.opened };
  return p;
}

const names = (index: DeliveredIndex, key = "k"): string[] => (index.find(key)?.leaving([]) ?? []).map((o) => o.name).sort();

t.test("a lineage is trusted only after a complete snapshot of a known kind, which sweeps what it did not deliver", async (t) => {
  const p = presence();
  const index = new DeliveredIndex(p);
  index.of("k").upsert(pod("old"));
  t.notOk(index.trusted("k"), "objects delivered before any snapshot: caches may hold more");
  const list = new ListSink(index, "k", undefined);
  list.upsert(pod("a"));
  list.upsert(pod("b"));
  // A watch of the same lineage delivers during the list: kept by the sweep.
  const w = new WatchSink(index, "k", false);
  w.upsert(pod("c"));
  list.finish();
  t.ok(index.find("k")?.complete, "an unpaginated LIST completes a snapshot");
  t.notOk(index.trusted("k"), "not trusted before the kind is known (a synthetic DELETED needs it)");
  list.typeMeta("v1", "Pod");
  t.ok(index.trusted("k"));
  t.same(names(index), ["a", "b", "c"], "the sweep dropped only what neither the list nor a later event delivered");
  w.remove("ns", "a");
  t.same(names(index), ["b", "c"], "a delivered DELETED removes");
});

t.test("paginated lists: the snapshot completes with the last page of the same chain", async (t) => {
  const index = new DeliveredIndex(presence());
  index.of("k").upsert(pod("stale"));
  const p1 = new ListSink(index, "k", undefined);
  p1.upsert(pod("a"));
  p1.continueToken("t1");
  p1.finish();
  t.notOk(index.find("k")?.complete, "a first page alone is not a snapshot");
  const stray = new ListSink(index, "k", "someone-else");
  stray.upsert(pod("x"));
  stray.finish();
  t.notOk(index.find("k")?.complete, "a page of an unknown chain completes nothing");
  const p2 = new ListSink(index, "k", "t1");
  p2.upsert(pod("b"));
  p2.finish();
  t.ok(index.find("k")?.complete, "the last page completes the chain's snapshot");
  t.same(names(index), ["a", "b", "x"], "swept from the first page's start");
});

t.test("a watch-list is a snapshot; an unreadable stream makes the index untrusted", async (t) => {
  const p = presence();
  const index = new DeliveredIndex(p);
  index.of("k").upsert(pod("stale"));
  const w = new WatchSink(index, "k", true);
  // The ledger records the watch open once its sink exists.
  p.open = 1;
  p.opened = 1;
  w.upsert(pod("a"));
  w.initialEventsEnded();
  t.ok(index.find("k")?.complete);
  t.same(names(index), ["a"]);
  w.unreadable();
  t.notOk(index.find("k")?.complete, "dropped");
  t.equal(index.indexed(), 0);
  w.upsert(pod("b"));
  t.equal(index.indexed(), 0, "an unreadable tap feeds nothing more");
});

t.test("a snapshot another watch of the lineage overlapped only adds: it may be older than what that watch delivered", async (t) => {
  const p = presence();
  const index = new DeliveredIndex(p);
  new ListSink(index, "k", undefined).finish();
  t.ok(index.find("k")?.complete, "the informer's own first LIST");
  p.open = 1;
  p.opened = 1;
  index.of("k").upsert(pod("z"));
  const oneOff = new ListSink(index, "k", undefined);
  oneOff.upsert(pod("a"));
  oneOff.finish();
  t.same(names(index), ["a", "z"], "z, delivered by the running watch, is not swept");
  // A watch opened and closed during a LIST is just as much a reason not to sweep.
  p.open = 0;
  const during = new ListSink(index, "k", undefined);
  p.opened = 2;
  during.finish();
  t.same(names(index), ["a", "z"], "a watch opened during the LIST: nothing swept");
});

t.test("leaving(): the objects whose delivered key (uid, namespace, owner or slot) is outside the ranges", async (t) => {
  const random = rng(7);
  const hex = (): string => Math.floor(random() * 2 ** 32).toString(16).padStart(8, "0");
  // Uids as random as a server's: sequential strings share FNV-1a's high bits.
  const objs = Array.from({ length: 200 }, (_, i) => ({ name: `p${i}`, namespace: `ns${i % 7}`, uid: `${hex()}-${hex()}` }));
  const r = [shardRange(1, 3)];
  t.ok(objs.some((o) => contains(r, fnv1a64(o.uid))) && objs.some((o) => !contains(r, fnv1a64(o.uid))), "premise: objects on both sides of the ranges");
  // The index never derives a key: it tests the point the tap read, whatever the key.
  for (const [what, keyOf] of [
    ["uid", (o) => o.uid],
    ["namespace", (o) => o.namespace],
  ] as Array<[string, (o: (typeof objs)[number]) => string]>) {
    const index = new DeliveredIndex(presence());
    const list = new ListSink(index, "k", undefined);
    for (const o of objs) list.upsert(pod(o.name, o.namespace, o.uid, keyOf(o)));
    const want = objs.filter((o) => !contains(r, fnv1a64(keyOf(o)))).map((o) => o.name).sort();
    t.same((index.find("k")?.leaving(r) ?? []).map((o) => o.name).sort(), want, `by ${what}`);
    t.same(index.find("k")?.leaving([FULL_RANGE]), [], `nothing leaves the whole keyspace (by ${what})`);
  }
  // An owner key moves with the controller reference: the latest delivery counts.
  const index = new DeliveredIndex(presence());
  const list = new ListSink(index, "k", undefined);
  for (const o of objs) list.upsert(pod(o.name, o.namespace, o.uid));
  const moved = objs.find((o) => contains(r, fnv1a64(o.uid)));
  const away = objs.find((o) => !contains(r, fnv1a64(o.uid)));
  if (moved === undefined || away === undefined) return t.fail("premise: objects on both sides");
  list.upsert(pod(moved.name, moved.namespace, moved.uid, away.uid));
  t.ok(index.find("k")?.leaving(r).some((o) => o.name === moved.name), "re-delivered under a key outside the ranges: it leaves");
});

t.test("drop() forgets a lineage's index; the ledger orders it for idle and evicted lineages", async (t) => {
  const index = new DeliveredIndex(presence());
  const list = new ListSink(index, "k", undefined);
  list.upsert(pod("a"));
  list.typeMeta("v1", "Pod");
  list.finish();
  t.ok(index.trusted("k"));
  index.drop("k");
  t.notOk(index.trusted("k"), "the next narrowing of this lineage relists");
  t.equal(index.indexed(), 0);
});

t.test("atOrBefore(): a resume point at or before a narrowing's resourceVersion; only equality for a form that is not a decimal integer", async (t) => {
  t.ok(atOrBefore("10", "10"));
  t.ok(atOrBefore("9", "10"), "by number, not by string: 9 < 10");
  t.notOk(atOrBefore("11", "10"));
  t.notOk(atOrBefore("100", "99"));
  t.ok(atOrBefore("abc", "abc"));
  t.notOk(atOrBefore("abc", "abd"), "an opaque form is never ordered");
  t.notOk(atOrBefore("", "10"));
});

t.test("leftSince(): what a cache resuming at or before a narrowing may still hold, outside the ranges, and nothing the index holds again", async (t) => {
  const index = new DeliveredIndex(presence());
  const list = new ListSink(index, "k", undefined);
  const random = rng(11);
  const hex = (): string => Math.floor(random() * 2 ** 32).toString(16).padStart(8, "0");
  const objs = Array.from({ length: 40 }, (_, i) => pod(`p${i}`, "ns", `${hex()}-${hex()}`));
  for (const o of objs) list.upsert(o);
  list.typeMeta("v1", "Pod");
  list.finish();
  const l = index.find("k");
  if (l === undefined) return t.fail("premise: indexed");
  const POD = { apiVersion: "v1", kind: "Pod" };
  const low = [shardRange(0, 2)];
  const leaving = l.leaving(low);
  t.ok(leaving.length > 0 && leaving.length < objs.length, "premise: objects on both sides");
  for (const o of leaving) l.remove(o.namespace, o.name);
  index.recordNarrowing("k", "20", POD, leaving);
  const names = (r: Resend | undefined): string[] => (r?.objects ?? []).map((o) => o.name).sort();
  t.same(names(index.leftSince("k", "20", low)), names({ type: POD, objects: leaving }), "a resume from the narrowing's own resourceVersion: all of them");
  t.same(index.leftSince("k", "20", low)?.type, POD, "with the kind their DELETEDs name");
  t.same(names(index.leftSince("k", "15", low)), names({ type: POD, objects: leaving }), "from an earlier one: all of them");
  t.equal(index.leftSince("k", "21", low), undefined, "from a later one: its cache saw the narrowing");
  t.equal(index.leftSince("other", "20", low), undefined, "another lineage's caches were never narrowed");
  t.equal(index.leftSince("k", "20", [FULL_RANGE]), undefined, "nothing the ranges hold again (its cache may hold them rightly)");
  const back = leaving[0] as DeliveredObject;
  l.upsert(back);
  t.notOk(names(index.leftSince("k", "20", low)).includes(back.name), "nor an object delivered again since");
  l.remove(back.namespace, back.name);
  // Another cache of the lineage relists alone: the cut cache still resumes from 20.
  const relist = new ListSink(index, "k", undefined);
  relist.finish();
  t.same(names(index.leftSince("k", "20", low)), names({ type: POD, objects: leaving }), "a snapshot (maybe another cache's) keeps them");
  index.drop("k");
  t.same(names(index.leftSince("k", "20", low)), names({ type: POD, objects: leaving }), "so does a dropped index (idle, unreadable): the ledger may still place the resume");
  for (let i = 0; i < KEPT_NARROWINGS; i++) index.recordNarrowing("k", String(30 + i), POD, [pod(`late${i}`)]);
  t.notOk(names(index.leftSince("k", "20", low)).some((n) => leaving.some((x) => x.name === n)), `only the newest ${KEPT_NARROWINGS} narrowings of a lineage are kept`);
  t.not(index.leftSince("k", "0", []), undefined, "premise: the lineage's narrowings are kept");
  for (let i = 0; i < KEPT_NARROWED_LINEAGES; i++) index.recordNarrowing(`l${i}`, "40", POD, [pod("gone")]);
  t.equal(index.leftSince("k", "0", []), undefined, `and only the ${KEPT_NARROWED_LINEAGES} lineages narrowed last`);
});
