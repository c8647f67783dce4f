/**
 * The delivery taps (src/proxy/scan/*-tap.ts) read what a filter hands the
 * controller; the synthetic-DELETE index is only as good as they are. Each
 * is checked against an independent decoder (JSON.parse, protobufjs) with
 * the input cut at many chunk sizes, and on input it must refuse.
 */
import t from "tap";
import { createJsonListTap, createJsonWatchTap } from "../../../src/proxy/scan/json-tap.ts";
import { createJsonWatchFilter } from "../../../src/proxy/scan/json-watch-filter.ts";
import { createProtoListTap, createProtoWatchTap } from "../../../src/proxy/scan/proto-tap.ts";
import { createProtoWatchFilter } from "../../../src/proxy/scan/proto-watch-filter.ts";
import type { ObjectKey } from "../../../src/proxy/scan/object-key.ts";
import type { DeliveredObject, Tap, TapSink } from "../../../src/proxy/scan/tap.ts";
import { SYNTHETIC_DELETE_ANNOTATION, syntheticDelete } from "../../../src/proxy/handoff/synthetic-delete.ts";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, FULL_RANGE, HashMatcher, shardRange } from "../../../src/shard/range.ts";
import { chunksOf } from "../../support/streams.ts";
import { syntheticPodList, syntheticWatchStream } from "../../support/synthetic-pods.ts";
import { decodeEvent, decodeList, loadK8sProto, metaOf, splitFrames } from "../../support/proto/k8s.ts";
import { podListBody, podWatchFrames } from "../../support/proto/pods.ts";

const pb = loadK8sProto();

/** Records what a tap reported, as plain lines. */
class Recorder implements TapSink {
  readonly log: string[] = [];
  types = new Set<string>();
  rv: string | undefined;
  tokens: string[] = [];
  unreadableReason: string | undefined;
  upsert(o: DeliveredObject): void {
    this.log.push(`+${o.namespace}/${o.name}@${o.uid}`);
  }
  remove(namespace: string, name: string): void {
    this.log.push(`-${namespace}/${name}`);
  }
  typeMeta(apiVersion: string, kind: string): void {
    this.types.add(`${apiVersion}/${kind}`);
  }
  resourceVersion(rv: string): void {
    this.rv = rv;
  }
  continueToken(token: string): void {
    this.tokens.push(token);
  }
  unreadable(reason: string): void {
    this.unreadableReason = reason;
  }
}

function feed(make: (s: TapSink, key: ObjectKey) => Tap, body: Buffer, size: number, key: ObjectKey = "uid"): Recorder {
  const r = new Recorder();
  const tap = make(r, key);
  for (const c of chunksOf(body, size)) tap.write(c);
  return r;
}

const SIZES = [1, 3, 7, 64, 1000, 1 << 30];

interface JsonMeta {
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string };
}

t.test("JSON list tap: every item, at any chunking, as JSON.parse sees them", async (t) => {
  const body = syntheticPodList(150_000, { seed: 3 });
  const parsed = JSON.parse(body.toString()) as { items: JsonMeta[] };
  const want = parsed.items.map((i) => `+${i.metadata.namespace ?? ""}/${i.metadata.name}@${i.metadata.uid ?? ""}`);
  t.ok(want.length > 20, `${want.length} items`);
  for (const size of SIZES) {
    const r = feed(createJsonListTap, body, size);
    t.same(r.log, want, `chunks of ${size}`);
    t.same([...r.types], ["v1/Pod"], "item kind from the list kind");
    t.equal(r.unreadableReason, undefined);
  }
});

t.test("JSON list tap: escaped names, the continue token, Table and garbage", async (t) => {
  const body = Buffer.from(`{"kind":"WidgetList","apiVersion":"x.io/v1","metadata":{"continue":"abc"},"items":[{"metadata":{"name":"w\\u0031","uid":"u1"}},{"kind":"Widget","metadata":{"namespace":"ns","name":"w2","uid":"u2"}}]}`);
  const r = feed(createJsonListTap, body, 5);
  t.same(r.log, ["+/w1@u1", "+ns/w2@u2"], "decoded names; cluster-scoped items have namespace \"\"");
  t.same(r.tokens, ["abc"]);
  t.same([...r.types], ["x.io/v1/Widget"]);
  const table = feed(createJsonListTap, Buffer.from(`{"kind":"Table","apiVersion":"meta.k8s.io/v1","columnDefinitions":[],"rows":[{"cells":[],"object":{"metadata":{"name":"a"}}}]}`), 9);
  t.match(table.unreadableReason, /Table/, "a Table is refused: its rows are no cache");
  const bad = feed(createJsonListTap, Buffer.from(`{"items":[{"metadata":{"name":"a"}}},]`), 4);
  t.match(bad.unreadableReason, /unreadable/, "malformed output makes it give up");
});

t.test("JSON watch tap: upserts, removes and the newest resourceVersion, at any chunking", async (t) => {
  const body = syntheticWatchStream(40_000, 5);
  const lines = body.toString().trim().split("\n").map((l) => JSON.parse(l) as { type: string; object: JsonMeta });
  const want = lines.map((e) => (e.type === "DELETED" ? `-${e.object.metadata.namespace ?? ""}/${e.object.metadata.name}` : `+${e.object.metadata.namespace ?? ""}/${e.object.metadata.name}@${e.object.metadata.uid ?? ""}`));
  for (const size of SIZES) {
    const r = feed(createJsonWatchTap, body, size);
    t.same(r.log, want, `chunks of ${size}`);
    t.equal(r.rv, lines[lines.length - 1]?.object.metadata.resourceVersion, "the last event's resourceVersion");
  }
  const bookmark = feed(createJsonWatchTap, Buffer.from(`{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"99"}}}\n{"type":"ERROR","object":{"kind":"Status","code":410}}\n`), 6);
  t.same(bookmark.log, [], "bookmarks and errors change no cache");
  t.equal(bookmark.rv, "99", "a bookmark moves the client's resourceVersion");
  const nameless = feed(createJsonWatchTap, Buffer.from(`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"uid":"u"}}}\n`), 100);
  t.match(nameless.unreadableReason, /without metadata.name/, "an object it cannot name makes the index untrustworthy");
});

t.test("protobuf list tap: every item, at any chunking, as protobufjs decodes them", async (t) => {
  const body = podListBody(pb, 40, { continue: "next-page", seed: 2 });
  const decoded = decodeList(pb, body);
  const want = decoded.items.map((i) => {
    const m = metaOf(i);
    return `+${m.namespace ?? ""}/${m.name ?? ""}@${m.uid ?? ""}`;
  });
  t.equal(want.length, 40);
  for (const size of SIZES) {
    const r = feed(createProtoListTap, body, size);
    t.same(r.log, want, `chunks of ${size}`);
    t.same(r.tokens, ["next-page"], "the continue token");
    t.same([...r.types], ["v1/Pod"]);
    t.equal(r.unreadableReason, undefined);
  }
  const empty = feed(createProtoListTap, podListBody(pb, 0), 3);
  t.same(empty.log, [], "an empty list");
  t.match(feed(createProtoListTap, Buffer.from("{\"kind\":\"PodList\"}"), 4).unreadableReason, /not a Kubernetes protobuf body/);
  const cut = Buffer.concat([body.subarray(0, 4), Buffer.from([0x12, 0x03, 0x12, 0x0a, 0x00])]);
  t.match(feed(createProtoListTap, cut, 2).unreadableReason, /overruns/, "a length past the end of its message");
});

t.test("protobuf watch tap: ADDED/MODIFIED upsert, DELETED removes, at any chunking", async (t) => {
  const frames = podWatchFrames(pb, 30, { seed: 4, firstResourceVersion: 700 });
  const want = frames.map((f) => {
    const e = decodeEvent(pb, f.subarray(4));
    const m = metaOf(e.object);
    return e.type === "DELETED" ? `-${m.namespace ?? ""}/${m.name ?? ""}` : `+${m.namespace ?? ""}/${m.name ?? ""}@${m.uid ?? ""}`;
  });
  const body = Buffer.concat(frames);
  for (const size of SIZES) {
    const r = feed(createProtoWatchTap, body, size);
    t.same(r.log, want, `chunks of ${size}`);
    t.equal(r.rv, "729");
    t.same([...r.types], ["v1/Pod"]);
  }
});

for (const encoding of ["json", "protobuf"] as const) {
  t.test(`${encoding} watch filter: narrow() sends the DELETEDs through the tap, then filters with the new ranges`, async (t) => {
    const low = [shardRange(0, 2)];
    const seen = new Recorder();
    const tap = encoding === "json" ? createJsonWatchTap(seen, "uid") : createProtoWatchTap(seen, "uid");
    const opts = { matcher: new HashMatcher([FULL_RANGE]), key: "uid" as const, allowBookmarks: false, initialEvents: false, onDeliver: (b: Buffer) => tap.write(b) };
    const filter = encoding === "json" ? createJsonWatchFilter(opts) : createProtoWatchFilter(opts);
    const events: Buffer[] =
      encoding === "json"
        ? syntheticWatchStream(60_000, 9)
            .toString()
            .trim()
            .split("\n")
            .map((l) => Buffer.from(`${l}\n`))
        : podWatchFrames(pb, 60, { seed: 9, firstResourceVersion: 100 });
    const half = Math.floor(events.length / 2);
    const leaving: DeliveredObject = { namespace: "ns-x", name: "gone", uid: "0000", keyHi: 0, keyLo: 0 };
    const del = syntheticDelete(encoding, { apiVersion: "v1", kind: "Pod" }, leaving, "424242");
    const pushes: Buffer[] = [];
    filter.on("data", (b: Buffer) => pushes.push(b));
    const ended = new Promise((r) => filter.on("end", r));
    for (const e of events.slice(0, half)) await new Promise<void>((r) => filter.write(e, () => r()));
    // Between two writes, as the proxy narrows between chunks.
    t.ok(filter.narrow(new HashMatcher(low), [del]), "accepted between events");
    for (const e of events.slice(half)) filter.write(e);
    filter.end();
    await ended;
    const out = Buffer.concat(pushes);
    const decoded: Array<{ type: string; uid: string; name: string; rv: string; annotated: boolean }> =
      encoding === "json"
        ? out
            .toString()
            .trim()
            .split("\n")
            .map((l) => {
              const e = JSON.parse(l) as { type: string; object: JsonMeta & { metadata: { annotations?: Record<string, string> } } };
              return { type: e.type, uid: e.object.metadata.uid ?? "", name: e.object.metadata.name, rv: e.object.metadata.resourceVersion ?? "", annotated: e.object.metadata.annotations?.[SYNTHETIC_DELETE_ANNOTATION] !== undefined };
            })
        : splitFrames(out).map((f) => {
            const e = decodeEvent(pb, f);
            const m = metaOf(e.object);
            return { type: e.type, uid: m.uid ?? "", name: m.name ?? "", rv: m.resourceVersion ?? "", annotated: m.annotations?.[SYNTHETIC_DELETE_ANNOTATION] !== undefined };
          });
    const at = decoded.findIndex((e) => e.annotated);
    t.ok(at >= 0, "the synthetic DELETED is in the output");
    t.same(decoded[at], { type: "DELETED", uid: "0000", name: "gone", rv: "424242", annotated: true }, "decodes as a DELETED with identity, resourceVersion and annotation");
    t.equal(at, half, "exactly between the events before and after the narrowing");
    const after = decoded.slice(at + 1);
    t.ok(after.length > 0 && after.every((e) => contains(low, fnv1a64(e.uid))), "afterwards only in-range events pass");
    t.ok(seen.log.includes("-ns-x/gone"), "the tap saw the synthetic DELETED (the index forgets the object)");
  });
}

t.test("JSON watch filter: narrow() is refused while a judged event waits for its newline", async (t) => {
  const filter = createJsonWatchFilter({ matcher: new HashMatcher([FULL_RANGE]), key: "uid", allowBookmarks: false, initialEvents: false });
  filter.resume();
  const ev = `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","uid":"u1","resourceVersion":"5"}}}`;
  await new Promise<void>((r) => filter.write(Buffer.from(ev), () => r()));
  t.notOk(filter.narrow(new HashMatcher([]), []), "refused mid-line: the event could still be retracted");
  await new Promise<void>((r) => filter.write(Buffer.from("\n"), () => r()));
  t.ok(filter.narrow(new HashMatcher([]), []), "accepted once the line is complete");
  const initial = createJsonWatchFilter({ matcher: new HashMatcher([FULL_RANGE]), key: "uid", allowBookmarks: false, initialEvents: true });
  t.notOk(initial.narrow(new HashMatcher([]), []), "refused during initial events (their resourceVersions are unordered)");
  filter.destroy();
  initial.destroy();
});
