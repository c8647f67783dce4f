/**
 * A cache that has its LIST but not yet the WATCH resuming from it when its
 * ranges shrink: it narrows on that watch, as an open watch does, instead of
 * being sent back to LIST (P7: a scale-out costs one LIST, the joiner's);
 * and the narrowing is not reported applied until that watch has come,
 * however long its client takes to read its list.
 *
 * Seen in test/ring/proxy-exclusive.test.ts under load, where steps follow
 * each other closely and client-node parses a 5,000-pod list for seconds
 * before it watches: a scale-out by one cost 2 LISTs (the loser's lineage
 * had no open watch to narrow, owed a relist, and its resume got 410), and
 * once, at a load of ~15, web-0 acknowledged 1→2 with no LIST while its
 * informer still held the whole keyspace (the quiet bound of a lineage that
 * never watched, 5 s, had let it go), and web-1 listed its half: 2,557
 * informer ADDs of objects another cache held.
 *
 * Driven against the scripted upstream, so the order is fixed: LIST, narrow,
 * then WATCH. The first test is the same cache with its watch already open.
 * The proxy's bounds pass on its ManualClock.
 */
import t, { type Test } from "tap";
import { MutableOwnership } from "../../../src/shard/ownership.ts";
import { SYNTHETIC_DELETE_ANNOTATION } from "../../../src/proxy/handoff/synthetic-delete.ts";
import { DEFAULT_POLICY } from "../../../src/proxy/handoff/ledger/types.ts";
import { FULL_RANGE, shardRange } from "../../../src/shard/range.ts";
import { event, get, HIGH, listBody, LOW, pod, setup, uidIn, until, watch } from "../support/scripted-upstream.ts";

const KEEP_UID = uidIn(LOW, HIGH, "keep-0");
const KEEP = [pod("keep-0", KEEP_UID, "5"), pod("keep-1", uidIn(LOW, HIGH, "keep-1"), "6")];
const LEAVE = [pod("leave-0", uidIn(HIGH, LOW, "leave-0"), "7"), pod("leave-1", uidIn(HIGH, LOW, "leave-1"), "8")];
const LIST = listBody([...KEEP, ...LEAVE], "10");

/** A ring-mode proxy (generation 1: the whole keyspace) whose client has just been served its LIST at resourceVersion 10. */
async function listedCache(t: Test, extra: Record<string, unknown> = {}) {
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const { f, proxy, clock } = await setup(t, own, extra);
  f.lists.push({ body: LIST });
  const list = await get(`${proxy.url}/api/v1/pods`);
  t.equal(list.status, 200, "the informer's LIST is served");
  t.same(own.applied, [], "nothing applied yet (generation 1 was the first)");
  return { own, f, proxy, clock };
}

const deleted = (w: ReturnType<typeof watch>): string[] =>
  w.events.filter((e) => e.type === "DELETED" && e.object.metadata?.annotations?.[SYNTHETIC_DELETE_ANNOTATION] !== undefined).map((e) => e.object.metadata?.name ?? "");

t.test("a cache whose resuming watch is open when its ranges shrink gets DELETED events on it, and no relist", async (t) => {
  const { own, f, proxy } = await listedCache(t);
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.teardown(() => w.abort());
  t.equal(await w.status, 200);
  t.ok(await until(() => f.watches.length === 1), "the upstream watch");
  // An event first: a watch narrows between events, past its initial ones.
  f.watches[0]?.write(event("MODIFIED", pod("keep-0", KEEP_UID, "11")));
  t.ok(await until(() => w.events.length === 1), "the first event through");
  own.set({ generation: 2, ranges: LOW });
  t.ok(await until(() => deleted(w).length === 2), "the DELETEDs");
  t.same(deleted(w).sort(), ["leave-0", "leave-1"], "one synthetic DELETED per object that left");
  t.same(own.applied, [2], "generation 2 applied without a relist");
  t.equal(f.listRequests, 1, "no second LIST");
});

t.test("a cache between its LIST and the WATCH resuming from it when its ranges shrink is narrowed on that watch, not sent back to LIST", async (t) => {
  const { own, f, proxy } = await listedCache(t);
  own.set({ generation: 2, ranges: LOW });
  t.same(own.applied, [], "not applied while the cache of the whole keyspace has not come back");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.teardown(() => w.abort());
  t.equal(await w.status, 200, "the resume is served, not refused with 410");
  t.ok(await until(() => deleted(w).length === 2), "the DELETEDs");
  t.same(deleted(w).sort(), ["leave-0", "leave-1"], "one synthetic DELETED per object that left");
  t.same(
    w.events.slice(0, 2).map((e) => [e.type, e.object.metadata?.resourceVersion]),
    [
      ["DELETED", "10"],
      ["DELETED", "10"],
    ],
    "first on the stream, at the resourceVersion the watch resumes from",
  );
  t.same(own.applied, [2], "generation 2 applied once they were handed over");
  // The stream filters with the new ranges: an event of an object that left is not passed on.
  f.watches[0]?.write(event("MODIFIED", pod("leave-0", uidIn(HIGH, LOW, "leave-0"), "11")));
  f.watches[0]?.write(event("MODIFIED", pod("keep-0", KEEP_UID, "12")));
  t.ok(await until(() => w.events.length === 3), "the kept object's event");
  t.same(w.events[2]?.object.metadata?.name, "keep-0", "and only that one");
  t.equal(f.listRequests, 1, "no second LIST");
});

t.test("a cache between its LIST and its WATCH relists when the ranges grow past what it holds", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy } = await setup(t, own);
  f.lists.push({ body: listBody(KEEP, "10") });
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200);
  // LOW to the lower quarter (a narrowing), then to HIGH (not inside LOW).
  own.set({ generation: 2, ranges: [shardRange(0, 4)] });
  own.set({ generation: 3, ranges: HIGH });
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.teardown(() => w.abort());
  t.equal(await w.status, 410, "the resume gets 410: DELETEDs cannot add what the cache lacks");
  t.same(own.applied, [], "nothing applied: it must relist");
});

t.test("a narrowing is not acknowledged while a cache that listed under the old ranges has not come back, however slowly it reads its list", async (t) => {
  // A short one-off bound: the long one applies all the same.
  const { own, proxy, clock } = await listedCache(t, { betweenListAndWatchMs: 300 });
  own.set({ generation: 2, ranges: LOW });
  // The informer is still parsing its list: it has neither relisted nor watched.
  clock.advance(DEFAULT_POLICY.watcherQuietMs - 1);
  t.same(own.applied, [], "generation 2 is not reported applied meanwhile");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.teardown(() => w.abort());
  t.equal(await w.status, 200, "its late resume is served");
  t.ok(await until(() => deleted(w).length === 2), "with the DELETEDs first");
  t.same(own.applied, [2], "and then generation 2 is applied");
});

t.test("a cache that listed under the old ranges and never comes back is let go after the reflector bound", async (t) => {
  const { own, clock } = await listedCache(t, { betweenListAndWatchMs: 300 });
  own.set({ generation: 2, ranges: LOW });
  clock.advance(DEFAULT_POLICY.watcherQuietMs - 1);
  t.same(own.applied, [], "not a millisecond before");
  clock.advance(1);
  t.same(own.applied, [2], "released: a one-off LIST must not hold the ring up for good");
});
