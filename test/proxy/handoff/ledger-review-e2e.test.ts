/**
 * Findings 1 and 2 of the review of branch `ledger`, through the real proxy
 * (its ledger shell and object index) in front of the scripted upstream, on
 * its ManualClock: what reaches the controller's cache when the ledger
 * reports a narrowing applied too early; and finding 7, the proxy's default
 * clock. They fail on the ledger as reviewed.
 */
import t from "tap";
import { silentLogger } from "../../../src/log.ts";
import { MutableOwnership } from "../../../src/shard/ownership.ts";
import { startProxy } from "../../../src/proxy/run.ts";
import { makeUpstream } from "../../../src/proxy/serving/upstream.ts";
import { parseResources } from "../../../src/shard/spec.ts";
import { SYNTHETIC_DELETE_ANNOTATION } from "../../../src/proxy/handoff/synthetic-delete.ts";
import { FULL_RANGE } from "../../../src/shard/range.ts";
import { event, fakeUpstream, get, HIGH, listBody, LOW, pod, setup, uidIn, until, watch } from "../support/scripted-upstream.ts";

const KEEP_UID = uidIn(LOW, HIGH, "keep-0");
const KEEP = [pod("keep-0", KEEP_UID, "5"), pod("keep-1", uidIn(LOW, HIGH, "keep-1"), "6")];
const LEAVE = [pod("leave-0", uidIn(HIGH, LOW, "leave-0"), "7"), pod("leave-1", uidIn(HIGH, LOW, "leave-1"), "8")];

const deleted = (w: ReturnType<typeof watch>): string[] =>
  w.events.filter((e) => e.type === "DELETED" && e.object.metadata?.annotations?.[SYNTHETIC_DELETE_ANNOTATION] !== undefined).map((e) => e.object.metadata?.name ?? "");

const names = (body: string): string[] => (JSON.parse(body) as { items: Array<{ metadata: { name: string } }> }).items.map((i) => i.metadata.name).sort();

t.test("finding 1: a narrowing is not reported applied while a LIST sent under the old ranges is in flight", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const { f, proxy } = await setup(t, own);
  f.lists.push({ body: listBody([...KEEP, ...LEAVE], "10") });
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "the informer's LIST");
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.teardown(() => w.abort());
  t.equal(await w.status, 200);
  t.ok(await until(() => f.watches.length === 1));
  f.watches[0]?.write(event("MODIFIED", pod("keep-0", KEEP_UID, "11")));
  t.ok(await until(() => w.events.length === 1), "between events");
  // The informer relists (its watch abandoned; the proxy has not seen the close yet): upstream holds the answer.
  let release = (): void => {};
  f.lists.splice(0, f.lists.length, { body: listBody([...KEEP, ...LEAVE], "12"), delay: new Promise<void>((r) => (release = r)) });
  const relist = get(`${proxy.url}/api/v1/pods`);
  t.ok(await until(() => f.listRequests === 2), "the relist is in flight under the whole keyspace");
  own.set({ generation: 2, ranges: LOW });
  t.ok(await until(() => deleted(w).length === 2), "the open watch narrows");
  t.same(own.applied, [], "generation 2 is not reported applied while that LIST has not landed");
  w.abort();
  release();
  const r = await relist;
  t.same(names(r.body), ["keep-0", "keep-1", "leave-0", "leave-1"], "(what the LIST hands the cache: the whole keyspace)");
  t.same(own.applied, [], "nor once it landed, with objects of HIGH in the informer's new cache");
});

t.test("finding 2: a resume narrowed once served is narrowed with every object that left, even when a newer LIST of the query landed while it was in flight", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  const { f, proxy } = await setup(t, own);
  f.lists.push({ body: listBody([...KEEP, ...LEAVE], "10") });
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "the informer's LIST");
  own.set({ generation: 2, ranges: LOW });
  // The informer's resume reaches upstream, which has not answered yet.
  let open = (): void => {};
  f.watchHeaders = new Promise<void>((r) => (open = r));
  const w = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=10`);
  t.teardown(() => w.abort());
  t.ok(await until(() => f.watchRequests === 1), "the resume is sent");
  // An uncached reader (a controller's API reader) LISTs the same query, under LOW.
  f.lists.splice(0, f.lists.length, { body: listBody(KEEP, "12") });
  const reader = await get(`${proxy.url}/api/v1/pods`);
  t.same(names(reader.body), ["keep-0", "keep-1"]);
  open();
  t.equal(await w.status, 200);
  t.ok(await until(() => own.applied.length > 0 || w.events.length > 0), "the ledger decided");
  if (own.applied.length > 0) t.same(deleted(w).sort(), ["leave-0", "leave-1"], "applied only once the informer's cache was handed a DELETED for each object that left");
  else t.pass("not applied (the resume relists)");
});

t.test("finding 7: with its default clock, a step of the wall clock does not let the proxy's quiet bounds pass", async (t) => {
  const f = await fakeUpstream();
  const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
  // No clock given: what the CLI runs.
  const proxy = await startProxy({ listen: { host: "127.0.0.1", port: 0 }, upstream: makeUpstream(f.url), resources: parseResources("pods"), ownership: own, fallback: "filter", logger: silentLogger(), syntheticDeletes: true });
  const realNow = Date.now;
  t.teardown(async () => {
    Date.now = realNow;
    await proxy.close();
    await f.close();
  });
  f.lists.push({ body: listBody([...KEEP, ...LEAVE], "10") });
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "the informer's LIST");
  own.set({ generation: 2, ranges: LOW });
  t.same(own.applied, [], "waiting for the informer's resume");
  // NTP steps the wall clock ten minutes ahead; no time passes for the proxy's timers.
  const step = 10 * 60_000;
  Date.now = () => realNow() + step;
  // Any request makes the ledger step (another lineage: a labelled LIST).
  f.lists.splice(0, f.lists.length, { body: listBody([], "11") });
  t.equal((await get(`${proxy.url}/api/v1/pods?labelSelector=app%3Dx`)).status, 200);
  t.same(own.applied, [], "generation 2 is not reported applied: the informer, parsing its list, has not been away for its bound");
});
