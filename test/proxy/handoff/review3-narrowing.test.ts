/**
 * Third review: the fixes of 9d7b45b ("fix the second review's nine cases").
 * Same scripted upstream as review-narrowing.test.ts and
 * review2-narrowing.test.ts. Every test asserts the CORRECT behaviour and
 * failed on the code as reviewed, and passes since the fix that followed:
 *
 *   R1  #releaseIdle releases a client-go informer that is backing off after
 *       the widening's 410 (reflector backoff: 0.8 s doubling, jitter up to
 *       x2, reset only after 2 min without a return; the 4th 410 within 2 min
 *       waits 6.4-12.8 s, past the default 5 s window): the generation is
 *       applied while its cache still holds the old ranges
 *   R2  same, client-node: ListWatch waits between its LIST and its WATCH
 *       (1 s doubling up to 30 s after watches that saw no events); a change
 *       during that wait is released 5 s after the LIST, though the cache is
 *       of the old ranges and its WATCH then gets 410 (rewritten after the
 *       fix to model the real sequence: the wait follows a 410'd watch; a
 *       lineage that never watched is a one-off lister and gets the short
 *       bound)
 *   R3  S6 fix, incomplete: after two narrowings in place with no event since
 *       the LIST, the resume from the RV the synthetic DELETEDs carried gets
 *       410 (the first narrowing's entry is never used up), a relist the
 *       narrowing was meant to avoid
 *   R4  S2 fix, incomplete: once the informer resumed from its LIST (entry
 *       used), a one-off LIST at the same RV after a change is the "oldest
 *       unused" entry; the informer's stale resume after a reconnect gap is
 *       accepted and the generation applied
 *   R5  S7 fix: the once-per-lineage refusal of an unplaceable resume is
 *       spent by the first cache of a lineage; after a sidecar restart a
 *       second cache of the same lineage is let through and counted as
 *       relisted, so the generation is applied with neither cache relisted
 *
 * The ledger's side of each case is also a row of test/proxy/handoff/ledger.test.ts
 * (docs/testing.md maps them); these keep the shell's wiring honest. No test
 * sleeps: the proxy runs on a ManualClock (R1 and R2 pass their 6-7 s of
 * backoff in no time), and tests wait for conditions.
 */
import t from "tap";
import { MutableOwnership } from "../../../src/shard/ownership.ts";
import { FULL_RANGE, shardRange } from "../../../src/shard/range.ts";
import { uidIn, pod, listBody, get, watch, until, setup, LOW, HIGH } from "../support/scripted-upstream.ts";

const QUARTER = [shardRange(0, 4)];

t.test("R1: a client-go reflector in its post-410 backoff (> 5 s) is released as idle; the widening is applied before it relists", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy, clock } = await setup(t, own); // default betweenListAndWatchMs (5 s)
  const x = pod("x", uidIn(LOW, HIGH, "x"), "5");
  const y = pod("y", uidIn(HIGH, LOW, "y"), "6");
  f.lists = [{ body: listBody([x], "10") }, { body: listBody([x, y], "12") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "informer LIST under LOW (cache: x)");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.ok(await until(() => f.watches.length === 1), "informer watching");
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  await w.ended;
  t.ok(w.events.some((e) => e.type === "ERROR" && e.object.code === 410), "the widening ended the informer's watch with 410");
  // ListAndWatch returned; Reflector.Run waits backoffManager.Backoff()
  // before the next ListAndWatch: NewExponentialBackoffManager(800ms, 30s,
  // 2min, 2.0, jitter 1.0). A member that gains in its 4th handoff (or takes
  // its 4th 410 of any kind) within 2 minutes waits 6.4-12.8 s here, with
  // nothing open and nothing in flight.
  clock.advance(7000);
  t.same(own.applied, [], `generation 2 is not applied while the informer has not relisted (its cache lacks y) (applied: ${JSON.stringify(own.applied)})`);
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "the reflector relists after its backoff");
  const w2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=12`);
  t.equal(await w2.status, 200, "and resumes");
  t.same(own.applied, [2], "generation 2 is applied then");
  w2.abort();
});

t.test("R2: client-node waits between its LIST and its WATCH; a change in that wait is released 5 s after the LIST, though the cache is of the old ranges", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy, clock } = await setup(t, own); // default windows
  const x = pod("x", uidIn(LOW, HIGH, "x"), "5");
  const y = pod("y", uidIn(HIGH, LOW, "y"), "6");
  f.lists = [{ body: listBody([x], "10") }, { body: listBody([x, y], "12") }];
  // client-node's ListWatch: LIST, WATCH; a widening ends the watch with 410;
  // doneHandler LISTs again at once, then `await delayFn(reconnectDelayMs)`
  // before the WATCH (1 s doubling up to 30 s while its watches see no
  // events). A second change lands during that wait.
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "client-node LIST under LOW (cache: x)");
  const w1 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.ok(await until(() => f.watches.length === 1), "watching");
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  await w1.ended;
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "re-LIST under FULL (cache: x, y); now waits 8 s before its WATCH");
  t.same(own.applied, [], "generation 2 waits for the WATCH that follows the re-LIST: a LIST alone is no relist (the client may wait 8 s before it)");
  clock.advance(500);
  own.set({ generation: 3, ranges: LOW });
  clock.advance(6000);
  t.notOk(own.applied.includes(3), `generation 3 is not applied while the informer's cache is of FULL and it has not watched again (applied: ${JSON.stringify(own.applied)})`);
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=12`);
  t.equal(await w.status, 410, "its WATCH from the FULL list is refused: the cache was stale all along");
  w.abort();
});

t.test("R3: after two narrowings in place with no event since the LIST, the resume from the RV the synthetic DELETEDs carried is served", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const { f, proxy } = await setup(t, own);
  const x = pod("x", uidIn(QUARTER, HIGH, "x"), "5");
  const y = pod("y", uidIn(LOW, QUARTER, "y"), "6");
  const z = pod("z", uidIn(HIGH, LOW, "z"), "7");
  f.lists = [{ body: listBody([x, y, z], "10") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "informer LIST");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.ok(await until(() => f.watches.length === 1), "informer watching");
  // Narrowing in place is for a watch being served: one still on its way
  // back from the apiserver when the ranges change is ended instead (the
  // ledger's rule), which a loaded machine made happen here once in ten.
  t.equal(await w.status, 200, "and its watch is served");
  // A ring scaling out 2 -> 3 -> 4: this member only loses, twice.
  own.set({ generation: 2, ranges: LOW });
  t.ok(await until(() => w.events.filter((e) => e.type === "DELETED").length === 1), "z's synthetic DELETED");
  own.set({ generation: 3, ranges: QUARTER });
  t.ok(await until(() => w.events.filter((e) => e.type === "DELETED").length === 2), "y's synthetic DELETED");
  t.same(own.applied, [2, 3], "both narrowed in place");
  const resumeAt = w.events.at(-1)?.object.metadata?.resourceVersion;
  t.equal(resumeAt, "10", "the informer's resume point is still the LIST's RV");
  f.watches[0]?.end(); // the server's watch timeout
  await w.ended;
  const w2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=${resumeAt}`);
  t.equal(await w2.status, 200, "the twice-narrowed cache resumes without a relist");
  w2.abort();
});

t.test("R4: a one-off LIST at the informer's RV, after the informer used its own LIST's entry, lets its stale resume through", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy } = await setup(t, own);
  const x = pod("x", uidIn(LOW, HIGH, "x"), "5");
  const y = pod("y", uidIn(HIGH, LOW, "y"), "6");
  // A quiet resource: every LIST answers at RV 10 (the premise of S2).
  f.lists = [{ body: listBody([x], "10") }, { body: listBody([x, y], "10") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "the informer lists under LOW (its cache: x)");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.ok(await until(() => f.watches.length === 1), "the informer watches from its LIST (its entry is used)");
  // The server ends the event-less watch; client-node waits (1 s, doubling)
  // before it re-watches from the same RV.
  f.watches[0]?.end();
  await w.ended;
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "a one-off LIST (same path and selectors) under the new ranges, at the same RV");
  const w2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.equal(await w2.status, 410, "the informer's re-watch continues its LOW cache: 410");
  t.same(own.applied, [], `generation 2 is not applied: the informer's cache still lacks y (applied: ${JSON.stringify(own.applied)})`);
  w2.abort();
});

t.test("R5: after a sidecar restart, a second cache of the same lineage resuming from an unplaceable RV is let through (the once-per-lineage refusal was spent) and counts as relisted", async (t) => {
  const own = new MutableOwnership({ generation: 0, ranges: [] });
  const { proxy } = await setup(t, own, { waitForRangesMs: 3000 });
  // Two caches of pods with the same path and selectors in one controller
  // (say a controller-runtime cache and a client-go informer factory), both
  // built through the previous proxy process, reconnect after the restart.
  const w1 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10&allowWatchBookmarks=true`);
  const w2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=14&allowWatchBookmarks=true`);
  t.ok(await until(() => proxy.proxy.handoff().held === 2), "both resumes are held");
  own.set({ generation: 5, ranges: LOW });
  t.equal(await w1.status, 410, "the first unplaceable resume is refused");
  t.equal(await w2.status, 410, "so is the second: its cache is just as unknown to this proxy");
  t.same(own.applied, [], `generation 5 is not applied before either cache relisted (applied: ${JSON.stringify(own.applied)})`);
  w1.abort();
  w2.abort();
});
