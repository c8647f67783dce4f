/**
 * Second review of the narrowing fixes (commit c27c805). Same scripted
 * upstream as review-narrowing.test.ts. Every test asserts the CORRECT
 * behaviour and fails on the code as reviewed:
 *
 *   S1  a lineage owed for real (its watch got 410) whose client never comes
 *       back holds markApplied back for good, for every later generation too
 *   S2  B, variant: a one-off LIST answering at the same resourceVersion as
 *       the informer's LIST overwrites its epoch; the stale resume is accepted
 *   S3  B, variant: with --synthetic-deletes=false no LIST RV is remembered;
 *       the one-off LIST's listEpoch stands in for the informer's relist
 *   S4  D, regression: the held bound releases "under the epoch of now", so a
 *       held watch-list's leftover entry clears a LATER widening's obligation
 *   S5  A, variant: a LIST in flight at a widening is released 5 s (window)
 *       after the change, even while it is still listing the old ranges
 *   S6  B fix, regression: after a narrowing in place with no event since the
 *       LIST, the resume from that LIST's RV (the RV the synthetic DELETEDs
 *       carried) gets 410 - the relist the narrowing was meant to avoid
 *   S7  E, regression: in ring mode a client that watches from an RV it did
 *       not get from a LIST (GET, then WATCH) is refused with 410 forever
 *   S8  listEpoch goes backwards when a LIST sent under an older epoch lands
 *       after a narrowing in place: the informer's next resume gets 410
 *   S9  with MAX_LINEAGES lineages busy, a new lineage is evicted the moment
 *       it is created: its LIST's epoch is lost, so in ring mode each of its
 *       resumes gets 410 (E) and its informer relists in a loop (a unit case
 *       of the lineage table: now the row "lineages: a new lineage is never
 *       the one evicted" of test/proxy/handoff/ledger.test.ts)
 *
 * The ledger's side of each case is also a row of test/proxy/handoff/ledger.test.ts
 * (docs/testing.md maps them); these keep the shell's wiring honest. No test
 * sleeps: the proxy runs on a ManualClock, and tests wait for conditions.
 */
import t from "tap";
import { MutableOwnership } from "../../../src/shard/ownership.ts";
import { FULL_RANGE } from "../../../src/shard/range.ts";
import { uidIn, pod, listBody, event, get, watch, until, setup, LOW, HIGH } from "../support/scripted-upstream.ts";

function initialEnd(rv: string): string {
  return event("BOOKMARK", { kind: "Pod", apiVersion: "v1", metadata: { resourceVersion: rv, annotations: { "k8s.io/initial-events-end": "true" } } });
}

t.test("S1: a lineage whose watch was ended by a widening and whose client never returns stalls markApplied for good", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  // watcherQuietMs: the bound for a lineage that has watched (a reflector may
  // wait up to a minute before relisting; 65 s by default), short here.
  const { f, proxy, clock } = await setup(t, own, { betweenListAndWatchMs: 200, watcherQuietMs: 400 });
  f.lists = [{ body: listBody([pod("x", uidIn(LOW, HIGH, "x"), "5")], "10") }];
  // The controller's informer (all pods), and a one-shot watcher of the same
  // resource with a selector (kubectl get -l app=web -w -o json, a
  // watchtools.UntilWithSync that is done, an informer that was stopped).
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "informer LIST");
  t.equal((await get(`${proxy.url}/api/v1/pods?labelSelector=app%3Dweb`)).status, 200, "one-shot LIST");
  const wa = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  const wb = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10&labelSelector=app%3Dweb`);
  t.ok(await until(() => f.watches.length === 2), "both watching");
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  await Promise.all([wa.ended, wb.ended]);
  // The informer relists and resumes; the one-shot watcher exits on the 410.
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "informer reLIST");
  const wa2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.equal(await wa2.status, 200, "informer resumes");
  t.same(own.applied, [], "the one-shot watcher's lineage is still owed");
  clock.advance(400);
  t.same(own.applied, [2], "generation 2 is applied once every lineage that still has a client relisted; one that never came back within a bound must not hold it forever");
  // The stale obligation is carried into every later generation: even a
  // narrowing the informer takes in place (no relist owed) is never applied.
  t.ok(await until(() => f.watches.length === 3), "informer's new upstream watch open");
  own.set({ generation: 3, ranges: LOW });
  t.same(own.applied, [2, 3], "generation 3 (narrowed in place) is applied");
  wa2.abort();
});

t.test("S2: a one-off LIST answered at the informer's LIST resourceVersion makes the informer's stale resume look relisted", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy } = await setup(t, own);
  const x = pod("x", uidIn(LOW, HIGH, "x"), "5");
  const y = pod("y", uidIn(HIGH, LOW, "y"), "6");
  // A quiet resource: both LISTs answer at RV 10 (watch-cache LISTs of a type
  // without writes in between return the same resourceVersion).
  f.lists = [{ body: listBody([x], "10") }, { body: listBody([x, y], "10") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "the informer lists under LOW (its cache: x)");
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "a one-off LIST under the new ranges, at the same RV");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.equal(await w.status, 410, "the informer's watch resuming from its LIST of the old ranges gets 410");
  t.same(own.applied, [], "generation 2 is not applied: the informer's cache still lacks y");
  w.abort();
});

t.test("S3: with --synthetic-deletes=false (ring mode), a one-off LIST still stands in for the informer's relist", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy } = await setup(t, own, { syntheticDeletes: false });
  const x = pod("x", uidIn(LOW, HIGH, "x"), "5");
  const y = pod("y", uidIn(HIGH, LOW, "y"), "6");
  f.lists = [{ body: listBody([x], "10") }, { body: listBody([x, y], "12") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "the informer lists under LOW (its cache: x)");
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "a one-off LIST under the new ranges");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.equal(await w.status, 410, "the informer's watch resuming from its LIST of the old ranges gets 410");
  t.same(own.applied, [], "generation 2 is not applied: the informer's cache still lacks y");
  w.abort();
});

t.test("S4: the held requests' bound, run under the epoch of now, clears a later widening's obligation before the relist is through", async (t) => {
  const own = new MutableOwnership({ generation: 0, ranges: [] });
  // Bound of the held obligation: max(betweenListAndWatchMs, waitForRangesMs) = 800 ms.
  const { f, proxy, clock } = await setup(t, own, { waitForRangesMs: 800, betweenListAndWatchMs: 100 });
  const xUid = uidIn(LOW, HIGH, "x");
  const wl = "/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";
  // A client-go watch-list informer starts while the member has no slots: held.
  const w1 = watch(`${proxy.url}${wl}`);
  t.ok(await until(() => proxy.proxy.handoff().held === 1), "held");
  own.set({ generation: 1, ranges: LOW });
  t.ok(await until(() => f.watches.length === 1), "the held watch-list went upstream");
  f.watches[0]?.write(event("ADDED", pod("x", xUid, "5")) + initialEnd("10"));
  t.ok(await until(() => own.applied.includes(1)), "generation 1 applied at initial-events-end");
  // A widening soon after: the watch-list ends with 410 and the informer
  // starts another one, whose initial events take a while.
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  await w1.ended;
  const w2 = watch(`${proxy.url}${wl}`);
  t.ok(await until(() => f.watches.length === 2), "the informer's new watch-list is open");
  f.watches[1]?.write(event("ADDED", pod("x", xUid, "5")));
  clock.advance(1000); // past the held bound
  t.same(own.applied, [1], `generation 2 waits for the new watch-list's initial-events-end (applied: ${JSON.stringify(own.applied)})`);
  f.watches[1]?.write(initialEnd("12"));
  t.ok(await until(() => own.applied.includes(2)), "and is applied then");
  w2.abort();
});

t.test("S5: a LIST still in flight under the old ranges does not let a widening be applied when the window runs out", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy, clock } = await setup(t, own, { betweenListAndWatchMs: 200 });
  let release: () => void = () => {};
  f.lists = [{ body: listBody([pod("x", uidIn(LOW, HIGH, "x"), "5")], "10"), delay: new Promise<void>((r) => (release = r)) }];
  // The informer's (large) LIST, e.g. the controller container just restarted.
  const l = get(`${proxy.url}/api/v1/pods`);
  t.ok(await until(() => f.listRequests === 1), "the informer's LIST reached upstream");
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  clock.advance(600); // three windows; the LIST is still running
  t.same(own.applied, [], `generation 2 is not applied while the informer's LIST of the old ranges is still in flight (applied: ${JSON.stringify(own.applied)})`);
  release();
  await l;
});

t.test("S6: after a narrowing in place with no event since the LIST, resuming from the RV the synthetic DELETEDs carried is served", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const { f, proxy } = await setup(t, own);
  f.lists = [{ body: listBody([pod("x", uidIn(LOW, HIGH, "x"), "5"), pod("y", uidIn(HIGH, LOW, "y"), "6")], "10") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "informer LIST");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.ok(await until(() => f.watches.length === 1), "informer watching");
  own.set({ generation: 2, ranges: LOW });
  t.same(own.applied, [2], "narrowed in place");
  t.ok(await until(() => w.events.some((e) => e.type === "DELETED")), "y's synthetic DELETED arrived");
  const resumeAt = w.events.at(-1)?.object.metadata?.resourceVersion;
  t.equal(resumeAt, "10", "the informer's resume point is the LIST's RV");
  // The server ends the watch (its timeout); the reflector resumes.
  f.watches[0]?.end();
  await w.ended;
  const w2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=${resumeAt}`);
  t.equal(await w2.status, 200, "the narrowed cache resumes without a relist");
  w2.abort();
});

t.test("S7: ring mode: a client that watches from an RV it did not LIST (GET, then WATCH) is refused every time", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { proxy, clock } = await setup(t, own);
  // e.g. a RetryWatcher / UntilWithoutRetry on one object, from a GET's RV
  // (the GET itself passes through). On 410 it GETs again and re-watches.
  const url = `${proxy.url}/api/v1/namespaces/ns/pods?watch=true&fieldSelector=metadata.name%3Dweb-0&resourceVersion=7`;
  const attempts = async (n: number): Promise<number[]> => {
    const codes: number[] = [];
    for (let i = 0; i < n; i++) {
      const w = watch(url);
      codes.push(await w.status);
      w.abort();
    }
    return codes;
  };
  // A proxy that starts with ranges opens the restart window: this cache may be a previous process's.
  t.same(await attempts(2), [410, 410], "inside the restart window every unplaceable resume is refused");
  clock.advance(60_000);
  const codes = await attempts(3);
  t.not(codes.filter((c) => c === 410).length, codes.length, `after it, a client that never lists is not refused forever (statuses: ${JSON.stringify(codes)})`);
});

t.test("S8: a one-off LIST sent before a narrowing and answered after it sets the lineage's epoch back; the narrowed informer's resume gets 410", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const { f, proxy } = await setup(t, own);
  const xUid = uidIn(LOW, HIGH, "x");
  const body = listBody([pod("x", xUid, "5"), pod("y", uidIn(HIGH, LOW, "y"), "6")], "10");
  let release: () => void = () => {};
  f.lists = [{ body }, { body, delay: new Promise<void>((r) => (release = r)) }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "informer LIST");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.ok(await until(() => f.watches.length === 1), "informer watching");
  // The controller's uncached client lists the same collection (slow answer).
  const oneOff = get(`${proxy.url}/api/v1/pods`);
  t.ok(await until(() => f.listRequests === 2), "one-off LIST upstream");
  own.set({ generation: 2, ranges: LOW });
  t.same(own.applied, [], "the informer narrowed in place, but not applied while the one-off LIST of the old ranges is in flight");
  f.watches[0]?.write(event("MODIFIED", pod("x", xUid, "11")));
  t.ok(await until(() => w.events.some((e) => e.type === "MODIFIED")), "an event at RV 11 reached the informer");
  release();
  t.equal((await oneOff).status, 200, "the one-off LIST lands after the narrowing");
  f.watches[0]?.end(); // the server's watch timeout
  await w.ended;
  const w2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=11`);
  t.equal(await w2.status, 200, "the informer (narrowed, current) resumes from its last event without a relist");
  t.ok(await until(() => own.applied.includes(2)), "applied once the lineage watches under the new ranges");
  w2.abort();
});
