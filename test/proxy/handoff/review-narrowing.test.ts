/**
 * Review findings (narrowing without a relist, lineage bookkeeping, held
 * requests). Each test drives the real ShardProxy against a hand-written
 * upstream whose LIST/WATCH answers and timing the test controls, so each
 * race is deterministic. Every test here asserts the CORRECT behaviour and
 * failed on the code as reviewed (review of 2026-11-30), and passes since
 * the fixes that followed it:
 *
 *   A, A'  requests in flight upstream during a range change are invisible
 *   B      a one-off LIST of the same lineage stands in for the informer's relist
 *   C      a snapshot by another consumer of the lineage sweeps the index
 *   D      #heldOwed.clear() drops a held one-off LIST's obligation: stall
 *   E      a held resuming WATCH after a sidecar restart is accepted and applied
 *   F, F'  metadata informers: LIST and WATCH fall into different lineages
 *   G      JSON watch: narrow() while an event's key is judged but the event incomplete
 *   H      relists are counted per resource, not per cache
 *
 * The ledger's side of each case is also a row of test/proxy/handoff/ledger.test.ts
 * (docs/testing.md maps them); these keep the shell's wiring honest. No test
 * sleeps: the proxy runs on a ManualClock, and tests wait for conditions.
 */
import t from "tap";
import { MutableOwnership } from "../../../src/shard/ownership.ts";
import { FULL_RANGE } from "../../../src/shard/range.ts";
import { uidIn, pod, listBody, event, get, watch, until, setup, LOW, HIGH } from "../support/scripted-upstream.ts";

t.test("A: a WATCH whose upstream answer arrives after a narrowing keeps filtering with the old ranges", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const { f, proxy } = await setup(t, own, { betweenListAndWatchMs: 300 });
  const xUid = uidIn(LOW, HIGH, "x");
  const x = pod("x", xUid, "5");
  const yUid = uidIn(HIGH, LOW, "y");
  const y = pod("y", yUid, "6");
  f.lists = [{ body: listBody([x, y], "10") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "informer LIST");
  let open: () => void = () => {};
  f.watchHeaders = new Promise<void>((r) => (open = r));
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.ok(await until(() => f.watchRequests === 1), "the WATCH reached upstream; its headers are not back yet");
  own.set({ generation: 2, ranges: LOW });
  open();
  t.equal(await w.status, 200, "the watch is served");
  t.ok(await until(() => f.watches.length === 1), "upstream watch open");
  // y's event, then x's: once x's (or the watch's end) reached the client, y's would have too.
  f.watches[0]?.write(event("MODIFIED", pod("y", yUid, "11")) + event("MODIFIED", pod("x", xUid, "12")));
  t.ok(await until(() => w.events.some((e) => e.type === "ERROR" || (e.type === "MODIFIED" && e.object.metadata?.name === "x"))), "the stream was answered");
  const leaked = w.events.filter((e) => e.type === "MODIFIED" && e.object.metadata?.name === "y");
  t.same(leaked, [], "no event for an object outside the new ranges reaches the controller");
  t.ok(
    w.events.some((e) => e.type === "ERROR") || w.events.some((e) => e.type === "DELETED" && e.object.metadata?.name === "y"),
    "the cache is told that y left (410 or DELETED)",
  );
  const told = w.events.some((e) => e.type === "ERROR" || (e.type === "DELETED" && e.object.metadata?.name === "y"));
  t.notOk(own.applied.includes(2) && !told, `generation 2 is not reported applied while the cache still holds y (applied: ${JSON.stringify(own.applied)})`);
  w.abort();
});

t.test("A': a LIST whose upstream answer is still pending does not hold the generation back", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy } = await setup(t, own);
  const x = pod("x", uidIn(LOW, HIGH, "x"), "5");
  let release: () => void = () => {};
  f.lists = [{ body: listBody([x], "10"), delay: new Promise<void>((r) => (release = r)) }];
  const l = get(`${proxy.url}/api/v1/pods`);
  t.ok(await until(() => f.listRequests === 1), "the informer's first LIST reached upstream");
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  t.same(own.applied, [], "generation 2 (a widening) is not applied while the informer's LIST under the old ranges is in flight");
  release();
  await l;
});

t.test("B: a one-off LIST of the same path and selectors makes the informer's stale cache look relisted", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy } = await setup(t, own);
  const x = pod("x", uidIn(LOW, HIGH, "x"), "5");
  const y = pod("y", uidIn(HIGH, LOW, "y"), "6");
  f.lists = [{ body: listBody([x], "10") }, { body: listBody([x, y], "12") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "the informer lists under LOW (its cache: x)");
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  // The controller's uncached client lists the same collection (no selectors).
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "a one-off LIST under the new ranges");
  // The informer now resumes from its own LIST's resourceVersion.
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.equal(await w.status, 410, "the informer's watch resuming from a LIST of the old ranges gets 410");
  t.same(own.applied, [], "generation 2 is not applied: the informer's cache still lacks y");
  w.abort();
});

t.test("C: a snapshot by another consumer of the lineage sweeps an object the informer holds; the narrowing then misses it", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const { f, proxy } = await setup(t, own);
  const x = pod("x", uidIn(LOW, HIGH, "x"), "5");
  const y = pod("y", uidIn(HIGH, LOW, "y"), "6");
  const zUid = uidIn(HIGH, LOW, "z");
  f.lists = [{ body: listBody([x, y], "10") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "informer LIST");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.ok(await until(() => f.watches.length === 1), "informer watching");
  f.watches[0]?.write(event("ADDED", pod("z", zUid, "11")));
  t.ok(await until(() => w.events.some((e) => e.object.metadata?.name === "z")), "z reached the informer");
  // A one-off LIST whose snapshot predates z (served at RV 10: a LIST
  // answered from a lagging watch cache, or one whose response started
  // before z's event reached the watch).
  t.equal((await get(`${proxy.url}/api/v1/pods?resourceVersion=0`)).status, 200, "one-off LIST");
  own.set({ generation: 2, ranges: LOW });
  t.same(own.applied, [2], "narrowed in place");
  // The synthetic DELETEDs go out in one write: once y's arrived, all did.
  t.ok(await until(() => w.events.some((e) => e.type === "DELETED" && e.object.metadata?.name === "y")), "the DELETEDs arrived");
  const deleted = w.events.filter((e) => e.type === "DELETED").map((e) => e.object.metadata?.name);
  t.ok(deleted.includes("y"), "y got its synthetic DELETED");
  t.ok(deleted.includes("z"), "z (outside the new ranges, in the informer's cache) got its synthetic DELETED");
  w.abort();
});

t.test("D: a held one-off LIST still in flight when the next generation arrives stalls markApplied for good", async (t) => {
  const own = new MutableOwnership({ generation: 0, ranges: [] });
  const { f, proxy } = await setup(t, own, { waitForRangesMs: 400, betweenListAndWatchMs: 200 });
  const x = pod("x", uidIn(LOW, HIGH, "x"), "5");
  let release: () => void = () => {};
  f.lists = [{ body: listBody([x], "10"), delay: new Promise<void>((r) => (release = r)) }];
  const l = get(`${proxy.url}/api/v1/pods`);
  t.ok(await until(() => proxy.proxy.handoff().held === 1), "the LIST is held");
  own.set({ generation: 1, ranges: LOW });
  t.ok(await until(() => f.listRequests === 1), "the held LIST was released upstream");
  own.set({ generation: 2, ranges: LOW }); // the ring moved elsewhere: same ranges
  release();
  t.equal((await l).status, 200, "the one-off LIST completed");
  t.ok(await until(() => own.applied.includes(2), 2000), `generation 2 is applied eventually (applied: ${JSON.stringify(own.applied)})`);
});

t.test("E: after a sidecar restart, a held WATCH resuming from a LIST this proxy never saw is served under the first ranges and the generation is applied", async (t) => {
  const own = new MutableOwnership({ generation: 0, ranges: [] });
  // An owed cache whose client stays away is released after
  // betweenListAndWatchMs (a client may vanish): long enough here for the
  // check below.
  const { f, proxy, clock } = await setup(t, own, { waitForRangesMs: 3000, betweenListAndWatchMs: 2000 });
  // The controller kept running; its informer (cache built through the
  // previous proxy process, under ranges this process does not know)
  // reconnects and resumes from its last resourceVersion.
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.ok(await until(() => proxy.proxy.handoff().held === 1), "the resume is held");
  own.set({ generation: 5, ranges: LOW });
  const status = await w.status;
  t.equal(status, 410, "a resuming watch whose cache this proxy cannot vouch for must relist");
  clock.advance(2000);
  t.same(own.applied, [], `generation 5 is not applied without a relist, past betweenListAndWatchMs (applied: ${JSON.stringify(own.applied)}, upstream LISTs: ${f.listRequests})`);
  w.abort();
});

// client-go's metadata client (metadata.go): List sends
// `as=PartialObjectMetadataList`, Watch sends `as=PartialObjectMetadata`.
const META_LIST_ACCEPT = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const META_WATCH_ACCEPT = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

t.test("F: a metadata-only informer (client-go metadata client) relists after a widening, yet the generation is never applied", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy } = await setup(t, own, { betweenListAndWatchMs: 300 });
  const meta = (name: string, uid: string, rv: string): Record<string, unknown> => ({ kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: { name, namespace: "ns", uid, resourceVersion: rv } });
  const list = (items: Record<string, unknown>[], rv: string): string =>
    JSON.stringify({ kind: "PartialObjectMetadataList", apiVersion: "meta.k8s.io/v1", metadata: { resourceVersion: rv }, items });
  const x = meta("x", uidIn(LOW, HIGH, "x"), "5");
  const y = meta("y", uidIn(HIGH, LOW, "y"), "6");
  f.lists = [{ body: list([x], "10") }, { body: list([x, y], "12") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`, { accept: META_LIST_ACCEPT })).status, 200, "metadata LIST");
  const w1 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`, { accept: META_WATCH_ACCEPT });
  t.equal(await w1.status, 200, "metadata WATCH");
  t.ok(await until(() => f.watches.length === 1), "watching");
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  await w1.ended;
  t.ok(w1.lines.some((l) => l.includes('"code":410')), "the widening ends the watch with 410");
  // The informer relists and resumes, exactly as client-go does.
  t.equal((await get(`${proxy.url}/api/v1/pods`, { accept: META_LIST_ACCEPT })).status, 200, "metadata reLIST");
  const w2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=12`, { accept: META_WATCH_ACCEPT });
  t.equal(await w2.status, 200, "metadata reWATCH");
  t.same(own.applied, [2], "generation 2 is applied once the metadata informer relisted and resumed");
  w2.abort();
});

t.test("F': a metadata-only informer resuming from a LIST made under older ranges is not sent 410", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy } = await setup(t, own, { betweenListAndWatchMs: 100 });
  const meta = (name: string, uid: string, rv: string): Record<string, unknown> => ({ kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: { name, namespace: "ns", uid, resourceVersion: rv } });
  f.lists = [{ body: JSON.stringify({ kind: "PartialObjectMetadataList", apiVersion: "meta.k8s.io/v1", metadata: { resourceVersion: "10" }, items: [meta("x", uidIn(LOW, HIGH, "x"), "5")] }) }];
  t.equal((await get(`${proxy.url}/api/v1/pods`, { accept: META_LIST_ACCEPT })).status, 200, "metadata LIST under LOW");
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`, { accept: META_WATCH_ACCEPT });
  t.equal(await w.status, 410, "its WATCH resuming from the LIST of the old ranges gets 410 (as a typed informer's does)");
  w.abort();
});

t.test("G: JSON watch: an event whose key was scanned under the old ranges, still incomplete at the narrowing, passes after its synthetic DELETED", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const { f, proxy } = await setup(t, own);
  const xUid = uidIn(LOW, HIGH, "x");
  const x = pod("x", xUid, "5");
  const yUid = uidIn(HIGH, LOW, "y");
  f.lists = [{ body: listBody([x, pod("y", yUid, "6")], "10") }];
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "informer LIST");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.ok(await until(() => f.watches.length === 1), "informer watching");
  // A large MODIFIED for y arrives in two TCP segments: metadata (uid) first, spec/status later.
  const ev = `{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"y","namespace":"ns","uid":"${yUid}","resourceVersion":"11"},"spec":{"nodeName":"n1"}}}\n`;
  const cut = ev.indexOf('"spec"');
  const upstreamBytes = (): number => proxy.proxy.stats().get("pods")?.upstreamBytes ?? 0;
  const before = upstreamBytes();
  f.watches[0]?.write(ev.slice(0, cut));
  t.ok(await until(() => upstreamBytes() > before), "the proxy read the first segment");
  own.set({ generation: 2, ranges: LOW });
  t.same(own.applied, [2], "narrowed in place");
  // Then x's event: once it reached the client, whatever the rest of y's event became has too.
  f.watches[0]?.write(ev.slice(cut) + event("MODIFIED", pod("x", xUid, "12")));
  t.ok(await until(() => w.events.some((e) => e.type === "MODIFIED" && e.object.metadata?.name === "x")), "x's later event arrived");
  const ys = w.events.filter((e) => e.object.metadata?.name === "y").map((e) => e.type);
  t.same(ys, ["DELETED"], `the informer's last word on y is its DELETED (got ${JSON.stringify(ys)})`);
  w.abort();
});

t.test("H: two caches of one resource (different selectors): the first to relist clears the resource for both", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy } = await setup(t, own);
  const x = pod("x", uidIn(LOW, HIGH, "x"), "5");
  f.lists = [{ body: listBody([x], "10") }];
  // Informer A: all pods. Informer B: pods with a label selector.
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "A lists");
  t.equal((await get(`${proxy.url}/api/v1/pods?labelSelector=app%3Dweb`)).status, 200, "B lists");
  const wa = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  const wb = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10&labelSelector=app%3Dweb`);
  t.ok(await until(() => f.watches.length === 2), "both watching");
  own.set({ generation: 2, ranges: [FULL_RANGE] });
  await Promise.all([wa.ended, wb.ended]);
  // B (a small selector) relists and resumes at once; A's big LIST is still running.
  t.equal((await get(`${proxy.url}/api/v1/pods?labelSelector=app%3Dweb`)).status, 200, "B relists");
  const wb2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10&labelSelector=app%3Dweb`);
  t.equal(await wb2.status, 200, "B resumes");
  // The proxy steps a watch's response before it sends its headers: the status is enough to look.
  t.same(own.applied, [], "generation 2 waits for A, whose cache still holds only the old ranges");
  wb2.abort();
});
