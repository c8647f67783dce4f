import t from "tap";
import { createJsonWatchFilter, type WatchFilterOptions } from "../../../src/proxy/scan/json-watch-filter.ts";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, HashMatcher, makeRange, type Range } from "../../../src/shard/range.ts";
import { parseSelector, type ShardKey, type ShardSelector } from "../../../src/shard/selector.ts";
import { listCases, readCase, type RecordedCase } from "../../support/fixture-io.ts";
import { chunksOf, runTransform, splitAt, type TransformRun } from "../../support/streams.ts";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

function isObj(v: Json | undefined): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function get(v: Json | undefined, ...path: Array<string | number>): Json | undefined {
  let cur = v;
  for (const p of path) {
    if (typeof p === "number") cur = Array.isArray(cur) ? cur[p] : undefined;
    else cur = isObj(cur) ? cur[p] : undefined;
  }
  return cur;
}

const LOW: Range[] = [makeRange(0n, 1n << 63n)];

/** A clock that moves `step` ms each time it is read, so pacing is deterministic. */
function steppingClock(step: number): () => number {
  let now = 0;
  return () => (now += step);
}

type Run = TransformRun & { stats: ReturnType<typeof createJsonWatchFilter>["stats"] };

function run(opts: Partial<WatchFilterOptions> & { ranges?: readonly Range[]; key?: ShardKey }, chunks: Buffer[]): Promise<Run> {
  const f = createJsonWatchFilter({
    matcher: new HashMatcher(opts.ranges ?? LOW),
    key: opts.key ?? "uid",
    allowBookmarks: opts.allowBookmarks ?? false,
    initialEvents: opts.initialEvents ?? false,
    ...(opts.bookmarkIntervalMs === undefined ? {} : { bookmarkIntervalMs: opts.bookmarkIntervalMs }),
    ...(opts.now === undefined ? {} : { now: opts.now }),
    ...(opts.maxEventBytes === undefined ? {} : { maxEventBytes: opts.maxEventBytes }),
  });
  return runTransform(f, chunks, ["initial-events-end"]).then((r) => ({ ...r, stats: f.stats }));
}

function lines(buf: Buffer): string[] {
  return buf
    .toString("utf8")
    .split("\n")
    .filter((l) => l.length > 0);
}

/** The reference: does this event pass (JSON.parse, then the rules)? */
function refPasses(ev: Obj, sel: { key: ShardKey; ranges: readonly Range[] }): boolean {
  const type = ev["type"];
  if (type === "BOOKMARK" || type === "ERROR") return true;
  const obj = ev["object"];
  const meta = get(obj, "kind") === "Table" ? get(obj, "rows", 0, "object", "metadata") : get(obj, "metadata");
  const v = get(meta, sel.key);
  const key = typeof v === "string" ? v : sel.key === "namespace" ? "" : undefined;
  return key !== undefined && contains(sel.ranges, fnv1a64(key));
}

/** `TYPE:rv` of an output line, for compact expectations. */
function summary(line: string): string {
  const e = JSON.parse(line) as Json;
  const type = get(e, "type");
  return `${typeof type === "string" ? type : "?"}:${rvOf(e) ?? ""}`;
}

function rvOf(ev: Json): string | undefined {
  const rv = get(ev, "object", "metadata", "resourceVersion");
  return typeof rv === "string" ? rv : undefined;
}

function isInitialEnd(ev: Json): boolean {
  return get(ev, "type") === "BOOKMARK" && get(ev, "object", "metadata", "annotations", "k8s.io/initial-events-end") === "true";
}

function isSyntheticBookmark(ev: Json): boolean {
  const meta = get(ev, "object", "metadata");
  return get(ev, "type") === "BOOKMARK" && isObj(meta) && Object.keys(meta).length === 1 && Object.keys(get(ev, "object") as Obj).length === 3;
}

interface WatchFixture {
  readonly id: string;
  readonly rec: RecordedCase;
  readonly sel: ShardSelector;
  readonly allowBookmarks: boolean;
  readonly initialEvents: boolean;
}

function jsonWatchFixtures(): WatchFixture[] {
  const out: WatchFixture[] = [];
  for (const c of listCases("**")) {
    const rec = readCase(c.dir, c.name);
    const q = rec.request.query;
    if (q.get("watch") === null || rec.response.status !== 200 || !(rec.response.headers["content-type"] ?? "").startsWith("application/json")) continue;
    const raw = q.get("shardSelector");
    if (raw === null || raw === "") continue;
    let sel: ShardSelector;
    try {
      sel = parseSelector(raw);
    } catch {
      continue; // invalid-watch-bad-hex: the proxy never sends such a selector
    }
    const rv = q.get("resourceVersion");
    out.push({
      id: `${c.dir}/${c.name}`,
      rec,
      sel,
      allowBookmarks: q.get("allowWatchBookmarks") === "true",
      // As the proxy computes it: watch-list, or an RV that starts with a synthetic initial list.
      initialEvents: q.get("sendInitialEvents") === "true" || rv === null || rv === "" || rv === "0",
    });
  }
  return out;
}

const FIXTURES = jsonWatchFixtures();

// ---------------------------------------------------------------------------
// Fixture replay

t.test("the watch fixture set covers plain watches, watch-lists, informer and kubectl Table watches", async (t) => {
  const ids = FIXTURES.map((f) => f.id);
  t.ok(FIXTURES.length >= 20, `${FIXTURES.length} JSON watch streams`);
  for (const want of ["/watch-uid-low", "/watchlist-uid-low", "/informer-watch-uid-low-json", "/informer-watchlist-uid-low-json", "/kubectl-table-watch-uid-low", "/watch-rv0-uid-low", "/watch-ns-high"]) {
    t.ok(ids.some((i) => i.endsWith(want)), want);
  }
});

t.test("every recorded JSON watch passes exactly its in-range events, byte for byte, plus well-formed synthetic bookmarks", async (t) => {
  for (const fx of FIXTURES) {
    const inLines = lines(fx.rec.response.body);
    const inEvents = inLines.map((l) => JSON.parse(l) as Obj);
    const r = await run({ ranges: fx.sel.ranges, key: fx.sel.key, allowBookmarks: fx.allowBookmarks, initialEvents: fx.initialEvents, now: steppingClock(300) }, [fx.rec.response.body]);
    t.equal(r.error, undefined, `${fx.id}: no error`);
    t.ok(r.ended, `${fx.id}: ended`);
    t.equal(r.stats.errors, 0, `${fx.id}: no ERROR of ours`);
    t.ok(r.out.length === 0 || r.out[r.out.length - 1] === 0x0a, `${fx.id}: newline-terminated`);

    const wantPassed = inLines.filter((_, i) => refPasses(inEvents[i] as Obj, fx.sel));
    const outLines = lines(r.out);
    const outEvents = outLines.map((l) => JSON.parse(l) as Obj);
    const synthetic = outEvents.map((e) => isSyntheticBookmark(e) && !inLines.includes(JSON.stringify(e)));
    const passed = outLines.filter((_, i) => synthetic[i] !== true);
    const table = get(inEvents[0], "object", "kind") === "Table";
    if (!table) {
      t.same(passed, wantPassed, `${fx.id}: passed lines are exactly the in-range ones, byte for byte, in order`);
    } else {
      // Column definitions may have moved into the first passed event; compare the rest.
      const strip = (l: string): Json => ({ ...(JSON.parse(l) as Obj), object: { ...(get(JSON.parse(l) as Obj, "object") as Obj), columnDefinitions: null } });
      t.same(passed.map(strip), wantPassed.map(strip), `${fx.id}: passed Table events are the in-range ones`);
      t.same(passed.slice(1), wantPassed.slice(1), `${fx.id}: after the first, byte for byte`);
    }
    t.equal(r.stats.events, inLines.length, `${fx.id}: events counted`);
    t.equal(r.stats.passed, wantPassed.length, `${fx.id}: passed counted`);
    t.equal(r.stats.dropped, inLines.length - wantPassed.length, `${fx.id}: dropped counted`);
    t.equal(r.stats.syntheticBookmarks, synthetic.filter(Boolean).length, `${fx.id}: synthetic bookmarks counted`);
    t.equal(r.stats.bytesIn, fx.rec.response.body.length, `${fx.id}: bytesIn`);
    t.equal(r.stats.bytesOut, r.out.length, `${fx.id}: bytesOut`);
    if (!fx.allowBookmarks) t.equal(r.stats.syntheticBookmarks, 0, `${fx.id}: no bookmarks unless asked for`);

    // Synthetic bookmarks: the dropped object's kind and apiVersion, an RV that
    // was dropped, newer than anything passed before it, never before the end
    // of the initial events.
    const droppedRvs = new Set(inEvents.filter((e) => !refPasses(e, fx.sel)).map(rvOf));
    const hasInitialEnd = inEvents.some(isInitialEnd);
    let initialDone = !fx.initialEvents;
    let newest = 0n;
    let bad = 0;
    outEvents.forEach((ev, i) => {
      if (synthetic[i] === true) {
        const rv = rvOf(ev) ?? "";
        if (!initialDone || !droppedRvs.has(rv) || BigInt(rv) <= newest) bad++;
        if (get(ev, "object", "kind") !== get(inEvents[0], "object", "kind") || get(ev, "object", "apiVersion") !== get(inEvents[0], "object", "apiVersion")) bad++;
        newest = BigInt(rv);
        return;
      }
      if (isInitialEnd(ev)) initialDone = true;
      const rv = rvOf(ev);
      // Initial ADDED events are unordered; only events after the initial phase set the floor.
      if (rv !== undefined && initialDone && BigInt(rv) > newest) newest = BigInt(rv);
    });
    t.equal(bad, 0, `${fx.id}: every synthetic bookmark is well formed and in order`);
    t.same(r.events, fx.initialEvents && hasInitialEnd ? ["initial-events-end"] : [], `${fx.id}: initial-events-end signalled iff passed`);
  }
});

t.test("with bookmarks asked for, a gate-off watch yields synthetic bookmarks (and a gate-on one needs none)", async (t) => {
  const off = FIXTURES.filter((f) => f.id.includes("/gate-off/") && f.allowBookmarks);
  t.ok(off.length >= 4, `${off.length} gate-off watches with bookmarks`);
  for (const fx of off) {
    const r = await run({ ranges: fx.sel.ranges, key: fx.sel.key, allowBookmarks: true, initialEvents: fx.initialEvents, now: steppingClock(2000) }, [fx.rec.response.body]);
    t.ok(r.stats.syntheticBookmarks > 0, `${fx.id}: ${r.stats.syntheticBookmarks} synthetic bookmarks`);
  }
  for (const fx of FIXTURES.filter((f) => f.id.includes("/gate-on/") && !f.id.includes("watch-noselector"))) {
    const r = await run({ ranges: fx.sel.ranges, key: fx.sel.key, allowBookmarks: true, initialEvents: fx.initialEvents, now: steppingClock(2000) }, [fx.rec.response.body]);
    t.equal(r.stats.dropped, 0, `${fx.id}: the server filtered`);
  }
});

t.test("a watch-list gets no synthetic bookmark before its initial-events-end bookmark", async (t) => {
  const wl = FIXTURES.filter((f) => f.id.includes("/gate-off/") && f.id.includes("watchlist"));
  t.ok(wl.length >= 2, `${wl.length} gate-off watch-lists`);
  for (const fx of wl) {
    // A clock fast enough that every drop could have its own bookmark.
    const r = await run({ ranges: fx.sel.ranges, key: fx.sel.key, allowBookmarks: true, initialEvents: true, now: steppingClock(10_000) }, [fx.rec.response.body]);
    const evs = lines(r.out).map((l) => JSON.parse(l) as Obj);
    const end = evs.findIndex(isInitialEnd);
    t.ok(end > 0, `${fx.id}: the initial-events-end bookmark passed`);
    t.notOk(evs.slice(0, end).some((e) => e["type"] === "BOOKMARK"), `${fx.id}: nothing before it`);
    const inEvents = lines(fx.rec.response.body).map((l) => JSON.parse(l) as Obj);
    const droppedAfter = inEvents.slice(inEvents.findIndex(isInitialEnd)).filter((e) => !refPasses(e, fx.sel)).length;
    t.ok(droppedAfter === 0 || r.stats.syntheticBookmarks > 0, `${fx.id}: bookmarks resume after it`);
  }
});

t.test("a dropped first Table event hands its columnDefinitions to the first event that passes", async (t) => {
  const rec = readCase("kube-apiserver/gate-off/pods", "kubectl-table-watch-uid-low");
  const inEvents = lines(rec.response.body).map((l) => JSON.parse(l) as Obj);
  const cols = get(inEvents[0], "object", "columnDefinitions");
  t.ok(Array.isArray(cols) && cols.length > 0, "the first event carries the column definitions");
  t.notOk(refPasses(inEvents[0] as Obj, { key: "uid", ranges: LOW }), "and is out of range");
  const r = await run({ allowBookmarks: false, initialEvents: false }, chunksOf(rec.response.body, 4096));
  const out = lines(r.out).map((l) => JSON.parse(l) as Obj);
  t.same(get(out[0], "object", "columnDefinitions"), cols, "the first passed event has them");
  t.ok(out.slice(1).every((e) => get(e, "object", "columnDefinitions") === null), "later events keep null");
  t.equal(get(out[0], "object", "rows", 0, "object", "metadata", "uid"), get(inEvents.find((e) => refPasses(e, { key: "uid", ranges: LOW })), "object", "rows", 0, "object", "metadata", "uid"), "in the right event");

  // The gate-on recording's first event passes: nothing moves, bytes identical.
  const on = readCase("kube-apiserver/gate-on/pods", "kubectl-table-watch-uid-low");
  t.ok((await run({}, [on.response.body])).out.equals(on.response.body), "gate-on: byte-identical");
});

t.test("Table column definitions are added when later events omit the member entirely", async (t) => {
  const row = (uid: string, rv: string): Obj => ({ cells: ["x"], object: { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: { name: "x", uid, resourceVersion: rv } } });
  const table = (uid: string, rv: string, cols?: Json): string =>
    JSON.stringify({ type: "ADDED", object: { kind: "Table", apiVersion: "meta.k8s.io/v1", metadata: { resourceVersion: rv }, ...(cols === undefined ? {} : { columnDefinitions: cols }), rows: [row(uid, rv)] } }) + "\n";
  const cols = [{ name: "Name", type: "string", format: "name", description: "d", priority: 0 }];
  const body = Buffer.from(table(OUT_UID, "5", cols) + table(IN_UID, "6"));
  const r = await run({}, [body]);
  const out = lines(r.out).map((l) => JSON.parse(l) as Obj);
  t.equal(out.length, 1);
  t.same(get(out[0], "object", "columnDefinitions"), cols);
  t.equal(get(out[0], "object", "rows", 0, "object", "metadata", "uid"), IN_UID);
});

// ---------------------------------------------------------------------------
// Chunking

t.test("watch output does not depend on where the input is cut into chunks", async (t) => {
  for (const [dir, name] of [["minicore/gate-off/pods", "watch-uid-low"], ["sample-apiserver/gate-off/flunders", "watch-uid-low"]] as const) {
    const rec = readCase(dir, name);
    const body = rec.response.body;
    const opts = { allowBookmarks: true, initialEvents: false, bookmarkIntervalMs: 1000 };
    const whole = await run({ ...opts, now: steppingClock(400) }, [body]);
    t.ok(whole.stats.dropped > 0 && whole.stats.passed > 0 && whole.stats.syntheticBookmarks > 0, `${name}: drops, passes and bookmarks`);
    let differ = 0;
    for (let at = 1; at < body.length; at++) {
      const r = await run({ ...opts, now: steppingClock(400) }, splitAt(body, at));
      if (!r.out.equals(whole.out)) differ++;
    }
    t.equal(differ, 0, `${dir}/${name}: all ${body.length - 1} two-chunk splits identical`);
    t.ok((await run({ ...opts, now: steppingClock(400) }, chunksOf(body, 1))).out.equals(whole.out), `${dir}/${name}: 1-byte chunks identical`);
  }
});

// ---------------------------------------------------------------------------
// Events built by hand

const IN_UID = "cdc457cf-f482-4a32-95e5-15d30ce54d34";
const IN_UID2 = "dddd530c-37a4-4cdc-9761-94ffcd716a74";
const OUT_UID = "9346c2ea-aba1-490f-99ca-503c6b45496a";

t.test("hand-made uids fall where the tests assume", async (t) => {
  t.ok(fnv1a64(IN_UID) < 1n << 63n && fnv1a64(IN_UID2) < 1n << 63n, "in LOW");
  t.ok(fnv1a64(OUT_UID) >= 1n << 63n, "out of LOW");
});

function ev(type: string, uid: string | undefined, rv: string, extra: Obj = {}): string {
  const metadata: Obj = { name: `p-${rv}`, namespace: "alpha", resourceVersion: rv };
  if (uid !== undefined) metadata["uid"] = uid;
  return JSON.stringify({ type, object: { kind: "Pod", apiVersion: "v1", metadata, ...extra } }) + "\n";
}

function bookmark(rv: string, initialEnd = false): string {
  const metadata: Obj = { resourceVersion: rv };
  if (initialEnd) metadata["annotations"] = { "k8s.io/initial-events-end": "true" };
  return JSON.stringify({ type: "BOOKMARK", object: { kind: "Pod", apiVersion: "v1", metadata } }) + "\n";
}

function errorLine(out: Buffer): Obj | undefined {
  const last = lines(out).pop();
  const evt = last === undefined ? undefined : (JSON.parse(last) as Obj);
  return evt !== undefined && evt["type"] === "ERROR" ? evt : undefined;
}

t.test("BOOKMARK and ERROR events from upstream always pass", async (t) => {
  const upstreamError = JSON.stringify({ type: "ERROR", object: { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "too old resource version", reason: "Expired", code: 410 } }) + "\n";
  const body = bookmark("10") + ev("ADDED", OUT_UID, "11") + upstreamError;
  const r = await run({}, [Buffer.from(body)]);
  t.equal(r.out.toString(), bookmark("10") + upstreamError);
  t.same([r.stats.passed, r.stats.dropped, r.stats.errors], [2, 1, 0]);
});

t.test("an unknown event type ends the stream with one ERROR event (new mutation types must not bypass sharding)", async (t) => {
  for (const type of ["SYNCED", "added", ""]) {
    const body = ev("ADDED", IN_UID, "10") + ev(type, IN_UID, "11") + ev("ADDED", IN_UID2, "12");
    const r = await run({}, [Buffer.from(body)]);
    const out = lines(r.out);
    t.equal(out[0], ev("ADDED", IN_UID, "10").trimEnd(), `${type}: events before it pass`);
    t.equal(out.length, 2, `${type}: nothing after the ERROR`);
    const err = errorLine(r.out);
    t.match(get(err, "object", "message"), /^shardcar: .*unknown type/, `${type}: an ERROR event that says why`);
    t.same(get(err, "object"), { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: get(err, "object", "message") ?? null, reason: "InternalError", code: 500 }, "a 500 InternalError Status");
    t.ok(r.ended && r.error === undefined, "the stream ends cleanly after it");
    t.equal(r.stats.errors, 1);
  }
});

t.test("an unparsable line ends the stream with one ERROR event and is never passed", async (t) => {
  const bad = [
    `{"type":"ADDED","object":{"metadata":{"uid":"${IN_UID}"}}\n`, // missing a close
    `{"type":"ADDED","object":{"metadata":{"uid":"${IN_UID}"}},}\n`,
    `not json at all\n`,
    `{"type":"ADDED","object":{"metadata":{"uid":"${IN_UID}","x":"raw\ttab"}}}\n`,
    `{"type":"ADDED","object":{"metadata":{"uid":"${IN_UID}"}}} trailing\n`,
    `["ADDED"]\n`,
    `"ADDED"\n`,
    `42\n`,
    `null\n`,
  ];
  for (const line of bad) {
    const body = ev("ADDED", IN_UID, "10") + line + ev("ADDED", IN_UID2, "12");
    for (const chunks of [[Buffer.from(body)], chunksOf(Buffer.from(body), 7)]) {
      const r = await run({}, chunks);
      const out = lines(r.out);
      t.equal(out[0], ev("ADDED", IN_UID, "10").trimEnd(), `${JSON.stringify(line)}: the good event before it passes`);
      t.equal(out.length, 2, `${JSON.stringify(line)}: then only the ERROR`);
      t.ok(errorLine(r.out) !== undefined, "ERROR last");
      t.notOk(r.out.toString().includes(IN_UID2), "nothing after it");
      t.ok(r.ended && r.error === undefined && r.stats.errors === 1, "clean end, one error");
    }
  }
});

t.test("a mutation without a type, an object or object metadata ends the stream with an ERROR event", async (t) => {
  const cases = [
    JSON.stringify({ object: { kind: "Pod", metadata: { uid: IN_UID } } }),
    JSON.stringify({ type: "ADDED" }),
    JSON.stringify({ type: "ADDED", object: null }),
    JSON.stringify({ type: "MODIFIED", object: { kind: "Pod", apiVersion: "v1" } }),
    JSON.stringify({ type: "DELETED", object: { kind: "Pod", apiVersion: "v1", metadata: "x" } }),
    JSON.stringify({ type: "ADDED", object: { kind: "Table", apiVersion: "meta.k8s.io/v1", rows: [] } }),
    JSON.stringify({ type: "ADDED", object: { kind: "Table", apiVersion: "meta.k8s.io/v1", rows: [{ cells: [] }] } }),
    JSON.stringify({ type: "ADDED", object: { kind: "Table", apiVersion: "meta.k8s.io/v1", rows: [{ object: { metadata: { uid: IN_UID } } }, { object: { metadata: { uid: OUT_UID } } }] } }),
  ];
  for (const c of cases) {
    const r = await run({}, [Buffer.from(c + "\n")]);
    t.equal(lines(r.out).length, 1, `${c}: only the ERROR`);
    t.ok(errorLine(r.out) !== undefined && r.stats.errors === 1, c);
  }
});

t.test("a mutation whose object has metadata but no uid hashes as \"\", as the server and the list filter do", async (t) => {
  const r = await run({}, [Buffer.from(ev("ADDED", undefined, "10") + ev("ADDED", IN_UID, "11"))]);
  t.equal(r.out.toString(), ev("ADDED", IN_UID, "11"), "\"\" is not in the lower half");
  t.same([r.stats.dropped, r.stats.errors], [1, 0]);
  const high = await run({ ranges: [makeRange(1n << 63n, 1n << 64n)] }, [Buffer.from(ev("ADDED", undefined, "10"))]);
  t.equal(high.out.toString(), ev("ADDED", undefined, "10"), "and passes the upper half");
});

t.test("with the namespace key, cluster-scoped objects hash as the empty namespace", async (t) => {
  const clusterScoped = JSON.stringify({ type: "ADDED", object: { kind: "Namespace", apiVersion: "v1", metadata: { name: "x", uid: IN_UID, resourceVersion: "3" } } }) + "\n";
  const high = [makeRange(1n << 63n, 1n << 64n)];
  t.equal((await run({ key: "namespace", ranges: high }, [Buffer.from(clusterScoped)])).out.toString(), clusterScoped, "\"\" is in the upper half");
  t.equal((await run({ key: "namespace", ranges: LOW }, [Buffer.from(clusterScoped)])).out.toString(), "", "and not in the lower");
});

t.test("upstream ending in the middle of an event gives an ERROR event, at every cut point", async (t) => {
  const rec = readCase("minicore/gate-on/pods", "watch-uid-low");
  const body = rec.response.body;
  const whole = await run({}, [body]);
  const ends = new Set<number>();
  for (let k = body.indexOf(0x0a); k >= 0; k = body.indexOf(0x0a, k + 1)) {
    ends.add(k); // cut right after the closing brace: the event is complete
    ends.add(k + 1);
  }
  let bad = 0;
  for (let at = 1; at < body.length; at++) {
    const r = await run({}, [body.subarray(0, at)]);
    const complete = ends.has(at);
    const err = errorLine(r.out);
    const msg = get(err, "object", "message");
    if (complete ? err !== undefined : typeof msg !== "string" || !/ended inside an event/.test(msg)) bad++;
    if (!r.ended || r.error !== undefined) bad++;
    // What passed before the ERROR is a prefix of the full output.
    const passedPart = err === undefined ? r.out : r.out.subarray(0, r.out.lastIndexOf("{\"type\":\"ERROR\""));
    if (!whole.out.subarray(0, passedPart.length).equals(passedPart)) bad++;
  }
  t.equal(bad, 0, `all ${body.length - 1} cut points: ERROR iff the cut is inside an event`);
});

t.test("an event larger than maxEventBytes ends the stream with an ERROR event, passed or dropped, however it is chunked", async (t) => {
  for (const uid of [IN_UID, OUT_UID]) {
    const big = ev("ADDED", uid, "11", { spec: { big: "x".repeat(10_000) } });
    const body = Buffer.from(ev("ADDED", IN_UID, "10") + big);
    for (const size of [body.length, 1000, 97]) {
      const r = await run({ maxEventBytes: 4096 }, chunksOf(body, size));
      const what = `${uid === IN_UID ? "in range" : "out of range"}, chunks of ${size}`;
      t.equal(lines(r.out).length, 2, `the first event, then the ERROR (${what})`);
      t.match(get(errorLine(r.out), "object", "message"), /exceeds 4096 bytes/, what);
    }
  }
});

// ---------------------------------------------------------------------------
// Synthetic bookmarks

t.test("a dropped event becomes a synthetic BOOKMARK with its kind, apiVersion and resourceVersion", async (t) => {
  const r = await run({ allowBookmarks: true, now: steppingClock(5000) }, [Buffer.from(ev("ADDED", OUT_UID, "42"))]);
  t.equal(r.out.toString(), `{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"42"}}}\n`);
  t.equal(r.stats.syntheticBookmarks, 1);
  const none = await run({ allowBookmarks: false, now: steppingClock(5000) }, [Buffer.from(ev("ADDED", OUT_UID, "42"))]);
  t.equal(none.out.length, 0, "none without allowWatchBookmarks");
});

t.test("synthetic bookmarks are paced per stream; the latest dropped RV wins and a passed event supersedes it", async (t) => {
  // Clock: 0 ms between reads, so only the first drop is due until time moves.
  let now = 0;
  const clock = (): number => now;
  const f = createJsonWatchFilter({ matcher: new HashMatcher(LOW), key: "uid", allowBookmarks: true, initialEvents: false, bookmarkIntervalMs: 1000, now: clock });
  const got: string[] = [];
  f.on("data", (b: Buffer) => got.push(...lines(b)));
  const write = (s: string): Promise<void> => new Promise((resolve) => f.write(Buffer.from(s), () => resolve()));
  await write(ev("MODIFIED", OUT_UID, "100")); // due at once
  await write(ev("MODIFIED", OUT_UID, "101")); // inside the interval: remembered
  await write(ev("MODIFIED", OUT_UID, "102")); // replaces 101
  now = 1500;
  await write(ev("MODIFIED", OUT_UID, "103")); // due: the latest drop, 103
  await write(ev("MODIFIED", OUT_UID, "104")); // remembered...
  await write(ev("MODIFIED", IN_UID, "105")); // ...and superseded by a passed event
  now = 5000;
  await write(ev("MODIFIED", OUT_UID, "106")); // due
  f.end();
  await new Promise((resolve) => f.on("end", resolve));
  t.same(got.map(summary), ["BOOKMARK:100", "BOOKMARK:103", "MODIFIED:105", "BOOKMARK:106"]);
});

t.test("a synthetic bookmark is never older than an event already passed", async (t) => {
  const body = ev("MODIFIED", IN_UID, "200") + ev("MODIFIED", OUT_UID, "150") + ev("MODIFIED", OUT_UID, "201");
  const r = await run({ allowBookmarks: true, now: steppingClock(5000) }, [Buffer.from(body)]);
  t.same(lines(r.out).map(summary), ["MODIFIED:200", "BOOKMARK:201"]);
});

t.test("with initial events, no synthetic bookmark before the upstream initial-events-end bookmark", async (t) => {
  const body = ev("ADDED", OUT_UID, "50") + ev("ADDED", IN_UID, "20") + ev("ADDED", OUT_UID, "70") + bookmark("80", true) + ev("MODIFIED", OUT_UID, "81");
  const r = await run({ allowBookmarks: true, initialEvents: true, now: steppingClock(5000) }, chunksOf(Buffer.from(body), 11));
  t.same(lines(r.out).map(summary), ["ADDED:20", "BOOKMARK:80", "BOOKMARK:81"]);
  t.same(r.events, ["initial-events-end"], "signalled once");
  const plain = await run({ allowBookmarks: true, initialEvents: false, now: steppingClock(5000) }, [Buffer.from(ev("ADDED", OUT_UID, "50"))]);
  t.equal(plain.stats.syntheticBookmarks, 1, "without initial events, at once");
});

t.test("two events on one line are judged separately and pass together, byte for byte", async (t) => {
  const a = ev("ADDED", IN_UID, "10").trimEnd();
  const b = ev("ADDED", OUT_UID, "11").trimEnd();
  const c = ev("ADDED", IN_UID2, "12").trimEnd();
  const r = await run({}, chunksOf(Buffer.from(`${a} ${b}${c}\n`), 9));
  // Whitespace after a passed event goes out with it; a dropped one takes its own.
  t.equal(r.out.toString(), `${a} ${c}\n`);
  t.same([r.stats.passed, r.stats.dropped], [2, 1]);
});
