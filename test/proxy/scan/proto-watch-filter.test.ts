import t from "tap";
import { createProtoWatchFilter, type ProtoWatchFilterOptions } from "../../../src/proxy/scan/proto-watch-filter.ts";
import { protoWatchErrorFrame } from "../../../src/proxy/scan/status-encoding.ts";
import { lenField, stringField } from "../../../src/proxy/scan/proto-wire.ts";
import { HashMatcher } from "../../../src/shard/range.ts";
import { parseSelector, type ShardSelector } from "../../../src/shard/selector.ts";
import { readFixtureText } from "../../support/fixtures.ts";
import { protoCases, type ProtoCase } from "../../support/proto/fixtures.ts";
import { decodeEvent, frame, loadK8sProto, metaOf, splitFrames, type DecodedEvent } from "../../support/proto/k8s.ts";
import { podWatchFrames } from "../../support/proto/pods.ts";
import { chunksOf, runFilter, splitAt } from "../../support/proto/run.ts";

const pb = loadK8sProto();
const LOW = parseSelector("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')");
const watches = protoCases().filter((c) => c.watch);
const INITIAL_EVENTS_END = "k8s.io/initial-events-end";

/** How the proxy decides `initialEvents` (server.ts): watch-list, or a watch from RV unset/"0". */
function initialEventsOf(c: ProtoCase): boolean {
  const rv = c.query.get("resourceVersion");
  return c.query.get("sendInitialEvents") === "true" || rv === undefined || rv === "" || rv === "0";
}

/** A clock that moves `stepMs` each time it is read: the filter reads it once per frame. */
function steppingClock(stepMs: number): () => number {
  let now = 1_000_000;
  return () => (now += stepMs);
}

function filterFor(sel: ShardSelector, opts: Partial<ProtoWatchFilterOptions> = {}) {
  return createProtoWatchFilter({ matcher: new HashMatcher(sel.ranges), key: sel.key, allowBookmarks: true, initialEvents: false, ...opts });
}

function optsFor(c: ProtoCase, extra: Partial<ProtoWatchFilterOptions> = {}): Partial<ProtoWatchFilterOptions> {
  return { allowBookmarks: c.query.get("allowWatchBookmarks") === "true", initialEvents: initialEventsOf(c), now: steppingClock(300), ...extra };
}

function keyOf(ev: DecodedEvent, sel: ShardSelector): string {
  const m = metaOf(ev.object);
  return (sel.key === "uid" ? m.uid : m.namespace) ?? "";
}

function isInitialEventsEnd(ev: DecodedEvent): boolean {
  return ev.type === "BOOKMARK" && metaOf(ev.object).annotations?.[INITIAL_EVENTS_END] === "true";
}

/** A synthetic bookmark as this proxy writes it: BOOKMARK, metadata with only a resourceVersion. */
function isSynthetic(ev: DecodedEvent): boolean {
  const meta = metaOf(ev.object);
  return ev.type === "BOOKMARK" && Object.keys(ev.object).join() === "metadata" && Object.keys(meta).join() === "resourceVersion";
}

interface Checked {
  readonly out: Buffer;
  readonly outEvents: DecodedEvent[];
  readonly synthetic: number;
  /** Everything that did not match the reference; empty when all is well. */
  readonly problems: string[];
}

/**
 * Runs a recording through the filter and checks the output against a
 * reference computed from the protobufjs-decoded input: every passing frame
 * byte-identical and in order, every other output frame a bookmark for an
 * event dropped in between, with that event's apiVersion, kind and RV.
 */
async function checkRecording(c: ProtoCase, sel: ShardSelector, extra: Partial<ProtoWatchFilterOptions> = {}): Promise<Checked> {
  const problems: string[] = [];
  const check = (ok: boolean, what: string): void => {
    if (!ok) problems.push(what);
  };
  const frames = splitFrames(c.body);
  const events = frames.map((f) => decodeEvent(pb, f));
  const m = new HashMatcher(sel.ranges);
  const passes = events.map((e) => e.type === "BOOKMARK" || e.type === "ERROR" || m.matchesString(keyOf(e, sel)));
  const f = filterFor(sel, optsFor(c, extra));
  const r = await runFilter(f, [c.body]);
  check(r.error === undefined && f.stats.errors === 0, `${c.name}: clean end`);
  const outFrames = splitFrames(r.out);
  const outEvents = outFrames.map((fr) => decodeEvent(pb, fr));
  let next = 0; // index into the input
  let synthetic = 0;
  const droppedSince: DecodedEvent[] = [];
  for (let k = 0; k < outFrames.length; k++) {
    while (next < frames.length && !passes[next]) droppedSince.push(events[next++] as DecodedEvent);
    const got = outFrames[k] as Buffer;
    if (next < frames.length && got.equals(frames[next] as Buffer)) {
      next++;
      droppedSince.length = 0;
      continue;
    }
    // Not the next passing frame: it must stand for a dropped event before it.
    const ev = outEvents[k] as DecodedEvent;
    const rv = metaOf(ev.object).resourceVersion;
    const stand = droppedSince.find((d) => metaOf(d.object).resourceVersion === rv);
    if (!isSynthetic(ev) || stand === undefined) {
      problems.push(`${c.name}: output frame ${k} is neither the next in-range frame nor a bookmark for a dropped event`);
      return { out: r.out, outEvents, synthetic, problems };
    }
    check(ev.apiVersion === stand.apiVersion && ev.kind === stand.kind, `${c.name}: bookmark ${k} is ${ev.apiVersion}/${ev.kind}, the event was ${stand.apiVersion}/${stand.kind}`);
    synthetic++;
  }
  while (next < frames.length && !passes[next]) next++;
  check(next === frames.length, `${c.name}: every in-range event and bookmark delivered, in order`);
  check(f.stats.passed === passes.filter(Boolean).length && f.stats.dropped === passes.length - f.stats.passed, `${c.name}: counts`);
  check(f.stats.syntheticBookmarks === synthetic && f.stats.bytesIn === c.body.length && f.stats.bytesOut === r.out.length, `${c.name}: stats`);
  return { out: r.out, outEvents, synthetic, problems };
}

interface Action {
  readonly uid?: string;
  readonly uidHalf?: string;
}

t.test("every recorded protobuf watch, filtered, passes exactly the in-range events, byte for byte", async (t) => {
  t.ok(watches.length >= 12, `found ${watches.length} protobuf watch recordings`);
  for (const c of watches) {
    t.test(c.name, async (t) => {
      if (c.selector === undefined) throw new Error("every watch recording sent a selector");
      const { out, outEvents, synthetic, problems } = await checkRecording(c, c.selector);
      t.same(problems, [], "output matches the reference");
      if (c.gate === "gate-on") t.ok(out.equals(c.body), "gate on: the server filtered, the stream passes unchanged");
      if (c.gate === "gate-off") t.ok(synthetic > 0, "gate off: dropped events became bookmarks");
      for (const ev of outEvents) {
        if (ev.type === "BOOKMARK") continue;
        t.ok(new HashMatcher(c.selector.ranges).matchesString(keyOf(ev, c.selector)), `${ev.type} ${metaOf(ev.object).uid ?? ""} is in range`);
      }
      // The writes made during the watch: each appears iff it is in range.
      const actions = (JSON.parse(readFixtureText(`${c.name}.actions.json`)) as { actions: Action[] }).actions;
      const seen = new Set(outEvents.map((e) => metaOf(e.object).uid));
      for (const a of actions) {
        // Deletes are recorded without a uid; their creates name the object.
        if (a.uid === undefined || a.uid === "" || c.selector.key !== "uid") continue;
        t.equal(seen.has(a.uid), a.uidHalf === "low", `${a.uid} (${a.uidHalf ?? "?"} half) delivered iff in range`);
      }
    });
  }
});

t.test("a gate-off watch-list filtered here starts from the same objects as the gate-on server's", async (t) => {
  const initialUids = (events: DecodedEvent[], created: Set<string>): string[] => {
    const end = events.findIndex(isInitialEventsEnd);
    return events
      .slice(0, end)
      .filter((e) => e.type === "ADDED")
      .map((e) => metaOf(e.object).uid ?? "")
      .filter((u) => !created.has(u))
      .sort();
  };
  let pairs = 0;
  for (const off of watches) {
    if (off.gate !== "gate-off" || off.selector === undefined || off.query.get("sendInitialEvents") !== "true") continue;
    const on = watches.find((c) => c.gate === "gate-on" && c.server === off.server && c.resource === off.resource && c.caseName === off.caseName);
    if (on === undefined) continue;
    pairs++;
    const created = new Set<string>();
    for (const c of [off, on]) {
      const actions = (JSON.parse(readFixtureText(`${c.name}.actions.json`)) as { actions: Action[] }).actions;
      for (const a of actions) if (a.uid !== undefined) created.add(a.uid);
    }
    const mine = await checkRecording(off, off.selector);
    t.same(mine.problems, []);
    const theirs = splitFrames(on.body).map((f) => decodeEvent(pb, f));
    const want = initialUids(theirs, created);
    t.ok(want.length > 50, `${want.length} initial objects`);
    t.same(initialUids(mine.outEvents, created), want, off.caseName);
  }
  t.ok(pairs >= 1, `${pairs} pairs`);
});

// ---------------------------------------------------------------------------
// Synthetic bookmarks

function gateOffWatchList(): ProtoCase {
  const c = watches.find((x) => x.name === "kube-apiserver/gate-off/pods/informer-watchlist-uid-low-pb");
  if (c === undefined) throw new Error("fixture missing");
  return c;
}

t.test("no synthetic bookmark before the upstream initial-events-end bookmark has passed", async (t) => {
  const c = gateOffWatchList();
  // Interval 0: every dropped event that may have a bookmark gets one.
  const { outEvents, problems } = await checkRecording(c, LOW, { initialEvents: true, bookmarkIntervalMs: 0 });
  t.same(problems, []);
  const end = outEvents.findIndex(isInitialEventsEnd);
  const first = outEvents.findIndex(isSynthetic);
  t.ok(end > 50, `initial-events-end delivered at ${end}`);
  t.ok(first > end, `first synthetic bookmark at ${first}, after it`);
  // The guard is what keeps them out: without it they come much earlier.
  const unguarded = await checkRecording(c, LOW, { initialEvents: false, bookmarkIntervalMs: 0 });
  t.ok(unguarded.outEvents.findIndex(isSynthetic) < end, "without initialEvents the first bookmark comes during the initial events");
});

t.test("initial-events-end is announced once, after its bookmark has been pushed", async (t) => {
  const c = gateOffWatchList();
  const f = filterFor(LOW, { initialEvents: true });
  const lengths: number[] = [];
  let pushed = 0;
  f.on("data", (b: Buffer) => (pushed += b.length));
  f.on("initial-events-end", () => lengths.push(pushed));
  const r = await runFilter(f, chunksOf(c.body, 1500));
  t.equal(lengths.length, 1);
  const frames = splitFrames(r.out);
  let endAt = 0;
  for (const fr of frames) {
    endAt += 4 + fr.length;
    if (isInitialEventsEnd(decodeEvent(pb, fr))) break;
  }
  t.ok((lengths[0] ?? 0) >= endAt, "the bookmark was out before the event fired");
  const quiet = filterFor(LOW, { initialEvents: false });
  let fired = 0;
  quiet.on("initial-events-end", () => fired++);
  await runFilter(quiet, [c.body]);
  t.equal(fired, 0, "not announced when the stream had no initial events");
});

t.test("output resourceVersions never go down once the initial events are over", async (t) => {
  for (const c of watches.filter((x) => x.gate === "gate-off")) {
    if (c.selector === undefined) continue;
    const { outEvents, problems } = await checkRecording(c, c.selector, { bookmarkIntervalMs: 0 });
    t.same(problems, [], c.name);
    const start = initialEventsOf(c) ? outEvents.findIndex(isInitialEventsEnd) : 0;
    t.ok(start >= 0, `${c.name}: initial events end`);
    let last = 0;
    let ok = true;
    for (const ev of outEvents.slice(start)) {
      const rv = Number(metaOf(ev.object).resourceVersion);
      if (!(rv >= last)) ok = false;
      last = rv;
    }
    t.ok(ok, `${c.name}: non-decreasing`);
  }
});

t.test("synthetic bookmarks are rate limited per stream", async (t) => {
  // 20 pods from one seed; keep none of them: every event is dropped.
  const frames = podWatchFrames(pb, 20);
  const none = { key: "uid" as const, ranges: [] };
  const rvs = (out: Buffer): string[] => splitFrames(out).map((f) => metaOf(decodeEvent(pb, f).object).resourceVersion ?? "");
  // The clock is read once per droppable event and once at the end.
  const every4th = await runFilter(filterFor(none, { now: steppingClock(250), bookmarkIntervalMs: 1000 }), frames);
  t.same(rvs(every4th.out), ["5000", "5004", "5008", "5012", "5016", "5019"], "one per 1000 ms at 250 ms per event, and the last drop at a clean end");
  const byDefault = await runFilter(filterFor(none, { now: steppingClock(100) }), frames);
  t.same(rvs(byDefault.out), ["5000", "5010", "5019"], "default interval: 1000 ms");
  const off = await runFilter(filterFor(none, { allowBookmarks: false, now: steppingClock(5000) }), frames);
  t.equal(off.out.length, 0, "no bookmarks unless the client allowed them");
});

t.test("a synthetic bookmark carries the dropped object's apiVersion and kind", async (t) => {
  const crd = watches.find((x) => x.name === "apiextensions-apiserver/gate-off/customresourcedefinitions/pb-watch-uid-low");
  if (crd?.selector === undefined) throw new Error("fixture missing");
  const { outEvents, problems } = await checkRecording(crd, crd.selector);
  t.same(problems, []);
  const marks = outEvents.filter(isSynthetic);
  t.ok(marks.length > 0);
  t.ok(
    marks.every((e) => e.apiVersion === "apiextensions.k8s.io/v1" && e.kind === "CustomResourceDefinition"),
    "apiextensions.k8s.io/v1 CustomResourceDefinition",
  );
});

// ---------------------------------------------------------------------------
// Chunk boundaries

t.test("output is identical whatever the chunking", async (t) => {
  for (const name of ["minicore/gate-off/pods/pb-watch-uid-low", "kube-apiserver/gate-off/pods/pb-watch-uid-low", "kube-apiserver/gate-off/pods/informer-watchlist-uid-low-pb"]) {
    const c = watches.find((x) => x.name === name);
    if (c?.selector === undefined) throw new Error(`${name} missing`);
    const sel = c.selector;
    const run = (chunks: Iterable<Uint8Array>) => runFilter(filterFor(sel, optsFor(c)), chunks);
    const whole = await run([c.body]);
    t.ok((await run(chunksOf(c.body, 1))).out.equals(whole.out), `${name}: 1-byte chunks`);
    // Every split offset on the small recording only: each run is a whole stream.
    if (c.body.length > 10_000) continue;
    let same = 0;
    for (let at = 0; at <= c.body.length; at++) if ((await run(splitAt(c.body, at))).out.equals(whole.out)) same++;
    t.equal(same, c.body.length + 1, `${name}: all ${c.body.length + 1} split offsets`);
  }
});

// ---------------------------------------------------------------------------
// Bad input: the stream ends with an ERROR event, never with unfiltered data

interface Ending {
  readonly frames: number;
  readonly last: { type: string; kind: string; status?: unknown; reason?: unknown; code?: unknown } | undefined;
  readonly errors: number;
}

async function ending(chunks: Iterable<Uint8Array>, opts: Partial<ProtoWatchFilterOptions> = {}): Promise<Ending & { out: Buffer }> {
  const f = filterFor(LOW, opts);
  const r = await runFilter(f, chunks);
  const evs = splitFrames(r.out).map((fr) => decodeEvent(pb, fr));
  const last = evs[evs.length - 1];
  return {
    out: r.out,
    frames: evs.length,
    last: last === undefined ? undefined : { type: last.type, kind: last.kind, status: last.object["status"], reason: last.object["reason"], code: last.object["code"] },
    errors: f.stats.errors,
  };
}

const INTERNAL_ERROR = { type: "ERROR", kind: "Status", status: "Failure", reason: "InternalError", code: 500 };
const good = (() => {
  const c = watches.find((x) => x.name === "minicore/gate-on/pods/pb-watch-uid-low");
  if (c === undefined) throw new Error("fixture missing");
  return c.body;
})();
const goodFrames = splitFrames(good).length;

t.test("a frame length larger than the bytes left at the end of the stream ends it with an ERROR", async (t) => {
  const e = await ending([good, Buffer.from([0, 0, 0x10, 0]), Buffer.from("partial")]);
  t.same(e.last, INTERNAL_ERROR);
  t.equal(e.frames, goodFrames + 1, "the complete frames before it were delivered");
  t.equal(e.errors, 1);
  // Cut anywhere: the output is the whole frames before the cut, byte for
  // byte, followed by an ERROR exactly when the cut falls inside a frame.
  let right = 0;
  for (let cut = 0; cut < good.length; cut++) {
    const r = await ending([good.subarray(0, cut)]);
    const whole = wholeFramesIn(good, cut);
    const intact = r.out.subarray(0, whole).equals(good.subarray(0, whole));
    const errorIffMidFrame = (r.last?.type === "ERROR") === (whole !== cut);
    if (intact && errorIffMidFrame && r.out.length >= whole) right++;
    else t.fail(`cut at ${cut}`);
  }
  t.equal(right, good.length, `all ${good.length} cuts`);
});

/** Bytes of whole frames in `body[0, cut)`. */
function wholeFramesIn(body: Buffer, cut: number): number {
  let o = 0;
  while (o + 4 <= cut && o + 4 + body.readUInt32BE(o) <= cut) o += 4 + body.readUInt32BE(o);
  return o;
}

t.test("a frame over maxFrameBytes ends the stream with an ERROR, and nothing after it is delivered", async (t) => {
  const frames = podWatchFrames(pb, 6);
  const e = await ending([frame(Buffer.alloc(10)), ...frames], { maxFrameBytes: 1000 });
  t.same(e.last, INTERNAL_ERROR);
  t.equal(e.frames, 1);
  const big = await ending([good, Buffer.from([0xff, 0xff, 0xff, 0xff]), good]);
  t.equal(big.frames, goodFrames + 1, "default limit (16 MiB): a 4 GiB length is refused at once");
  t.same(big.last, INTERNAL_ERROR);
});

t.test("an unknown event type fails closed: a new mutation type must not bypass sharding", async (t) => {
  const mutant = Buffer.concat([stringField(1, "PATCHED"), lenField(2, lenField(1, Buffer.from("k8s\0")))]);
  const e = await ending([good, frame(mutant), good]);
  t.equal(e.frames, goodFrames + 1);
  t.same(e.last, INTERNAL_ERROR);
  const typeless = await ending([frame(lenField(2, lenField(1, Buffer.from("k8s\0"))))]);
  t.same(typeless.last, INTERNAL_ERROR, "no type at all");
});

t.test("unparsable frames end the stream with an ERROR", async (t) => {
  // WatchEvent bodies; each is framed below.
  const obj = (unknown: Buffer): Buffer => Buffer.concat([stringField(1, "ADDED"), lenField(2, lenField(1, Buffer.concat([Buffer.from("k8s\0"), unknown])))]);
  const cases: Array<[string, Buffer]> = [
    ["garbage", Buffer.from([0xff, 0xff, 0xff])],
    ["object that is JSON, not a k8s\\0 envelope", Buffer.concat([stringField(1, "ADDED"), lenField(2, lenField(1, Buffer.from('{"kind":"Pod"}')))])],
    ["ADDED without an object", stringField(1, "ADDED")],
    ["envelope without raw", obj(lenField(1, stringField(2, "Pod")))],
    ["envelope without typeMeta", obj(lenField(2, Buffer.alloc(0)))],
    ["metadata with a varint wire type", obj(Buffer.concat([lenField(1, stringField(2, "Pod")), lenField(2, Buffer.from([0x08, 0x01]))]))],
    ["length running past the frame", Buffer.from([0x0a, 0x40, 0x41])],
  ];
  for (const [name, bad] of cases) {
    const e = await ending([good, frame(bad), good]);
    t.equal(e.frames, goodFrames + 1, `${name}: earlier frames kept, later ones not delivered`);
    t.same(e.last, INTERNAL_ERROR, name);
  }
});

t.test("upstream BOOKMARK and ERROR events pass unchanged, even out of range", async (t) => {
  const expired = protoWatchErrorFrame(410, "too old resource version: 1 (2)", "Expired");
  const none = { key: "uid" as const, ranges: [] };
  const r = await runFilter(filterFor(none, {}), [expired]);
  t.ok(r.out.equals(expired));
  const ev = decodeEvent(pb, splitFrames(r.out)[0] ?? Buffer.alloc(0));
  t.same({ type: ev.type, kind: ev.kind, code: ev.object["code"], reason: ev.object["reason"] }, { type: "ERROR", kind: "Status", code: 410, reason: "Expired" });
});
