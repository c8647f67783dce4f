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
 */
import t from "tap";
import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { silentLogger } from "../../src/log.ts";
import { MutableOwnership } from "../../src/proxy/ownership.ts";
import { startProxy } from "../../src/proxy/run.ts";
import { makeUpstream } from "../../src/proxy/upstream.ts";
import { FULL_RANGE, HashMatcher, shardRange, type Range } from "../../src/shard/range.ts";
import { parseResources } from "../../src/shard/spec.ts";

/** A uid whose hash lies in `inside` and outside `outside`. */
function uidIn(inside: readonly Range[], outside: readonly Range[], tag: string): string {
  const a = new HashMatcher(inside);
  const b = new HashMatcher(outside);
  for (let i = 0; ; i++) {
    const u = `${tag}-${i}`;
    if (a.matchesString(u) && !b.matchesString(u)) return u;
  }
}

function pod(name: string, uid: string, rv: string): Record<string, unknown> {
  return { kind: "Pod", apiVersion: "v1", metadata: { name, namespace: "ns", uid, resourceVersion: rv } };
}

function listBody(items: Record<string, unknown>[], rv: string): string {
  return JSON.stringify({ kind: "PodList", apiVersion: "v1", metadata: { resourceVersion: rv }, items: items.map((p) => ({ ...p, kind: undefined, apiVersion: undefined })) });
}

interface Fake {
  url: string;
  /** What the next LISTs answer (a queue; the last one repeats). */
  lists: Array<{ body: string; delay?: Promise<void> }>;
  /** Open upstream watches, in arrival order. */
  watches: ServerResponse[];
  /** Gate for the next watch's response headers. */
  watchHeaders: Promise<void> | undefined;
  watchRequests: number;
  listRequests: number;
  close(): Promise<void>;
}

async function fakeUpstream(): Promise<Fake> {
  const f: Fake = { url: "", lists: [], watches: [], watchHeaders: undefined, watchRequests: 0, listRequests: 0, close: async () => {} };
  const srv = createServer((req: IncomingMessage, res: ServerResponse) => {
    const u = new URL(req.url ?? "/", "http://x");
    if (u.searchParams.get("watch") === "true" || u.searchParams.get("watch") === "1") {
      f.watchRequests++;
      const gate = f.watchHeaders;
      f.watchHeaders = undefined;
      void (gate ?? Promise.resolve()).then(() => {
        res.writeHead(200, { "content-type": "application/json" });
        res.flushHeaders();
        f.watches.push(res);
      });
      return;
    }
    f.listRequests++;
    const next = f.lists.length > 1 ? f.lists.shift() : f.lists[0];
    if (next === undefined) {
      res.writeHead(500).end();
      return;
    }
    void (next.delay ?? Promise.resolve()).then(() => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(next.body);
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  f.url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  f.close = () =>
    new Promise<void>((r) => {
      for (const w of f.watches) w.destroy();
      srv.closeAllConnections();
      srv.close(() => r());
    });
  return f;
}

function get(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request(url, (res) => {
      let body = "";
      res.on("data", (b: Buffer) => (body += b.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    })
      .on("error", reject)
      .end();
  });
}

interface ClientWatch {
  events: Array<{ type: string; object: { metadata?: { name?: string; resourceVersion?: string; annotations?: Record<string, string> }; code?: number } }>;
  status: Promise<number>;
  ended: Promise<void>;
  abort(): void;
}

function watch(url: string): ClientWatch {
  const events: ClientWatch["events"] = [];
  let setStatus: (n: number) => void = () => {};
  const status = new Promise<number>((r) => (setStatus = r));
  let abort = (): void => {};
  const ended = new Promise<void>((resolve) => {
    const req = request(url, (res) => {
      setStatus(res.statusCode ?? 0);
      let buf = "";
      res.on("data", (b: Buffer) => {
        buf += b.toString();
        const parts = buf.split("\n");
        buf = parts.pop() ?? "";
        for (const l of parts) if (l !== "") events.push(JSON.parse(l) as ClientWatch["events"][number]);
      });
      res.on("end", () => resolve());
      res.on("close", () => resolve());
    });
    req.on("error", () => resolve());
    req.end();
    abort = () => req.destroy();
  });
  return { events, status, ended, abort };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(p: () => boolean, ms = 3000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (p()) return true;
    await sleep(10);
  }
  return p();
}

async function setup(t: { teardown(fn: () => Promise<void>): void }, own: MutableOwnership, extra: Record<string, unknown> = {}) {
  const f = await fakeUpstream();
  const proxy = await startProxy({
    listen: { host: "127.0.0.1", port: 0 },
    upstream: makeUpstream(f.url),
    resources: parseResources("pods"),
    ownership: own,
    fallback: "filter",
    logger: silentLogger(),
    syntheticDeletes: true,
    ...extra,
  });
  t.teardown(async () => {
    await proxy.close();
    await f.close();
  });
  return { f, proxy };
}


const LOW = [shardRange(0, 2)];
const HIGH = [shardRange(1, 2)];

const QUARTER = [shardRange(0, 4)];

t.test("R1: a client-go reflector in its post-410 backoff (> 5 s) is released as idle; the widening is applied before it relists", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy } = await setup(t, own); // default betweenListAndWatchMs (5 s)
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
  await sleep(7000);
  t.same(own.applied, [], `generation 2 is not applied while the informer has not relisted (its cache lacks y) (applied: ${JSON.stringify(own.applied)})`);
  t.equal((await get(`${proxy.url}/api/v1/pods`)).status, 200, "the reflector relists after its backoff");
  const w2 = watch(`${proxy.url}/api/v1/pods?watch=true&resourceVersion=12`);
  t.equal(await w2.status, 200, "and resumes");
  t.ok(await until(() => own.applied.includes(2)), "generation 2 is applied then");
  w2.abort();
});

t.test("R2: client-node waits between its LIST and its WATCH; a change in that wait is released 5 s after the LIST, though the cache is of the old ranges", async (t) => {
  const own = new MutableOwnership({ generation: 1, ranges: LOW });
  const { f, proxy } = await setup(t, own); // default windows
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
  t.ok(await until(() => own.applied.includes(2), 1000) || true, "(generation 2 may or may not be applied: its re-LIST is a relist of FULL)");
  await sleep(500);
  own.set({ generation: 3, ranges: LOW });
  await sleep(6000);
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
  await sleep(50);
  own.set({ generation: 5, ranges: LOW });
  t.equal(await w1.status, 410, "the first unplaceable resume is refused");
  t.equal(await w2.status, 410, "so is the second: its cache is just as unknown to this proxy");
  await sleep(100);
  t.same(own.applied, [], `generation 5 is not applied before either cache relisted (applied: ${JSON.stringify(own.applied)})`);
  w1.abort();
  w2.abort();
});
