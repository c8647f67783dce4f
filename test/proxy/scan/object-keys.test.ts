/**
 * Every filter and tap places an object where `keyValue()` (src/shard/
 * slots.ts) of its JSON.parse says, for every key: uid, namespace, owner
 * (the controller ownerReference, in both key orders, one level only) and
 * the slot label of labels mode; and an object without a readable slot
 * label is in no shard, dropped and counted. Streaming guarantees hold for
 * the new paths: output does not depend on where the input is cut, and a
 * cut body fails closed.
 */
import t from "tap";
import type { Transform } from "node:stream";
import { createJsonListTap, createJsonWatchTap } from "../../../src/proxy/scan/json-tap.ts";
import { createJsonListFilter } from "../../../src/proxy/scan/json-list-filter.ts";
import { createJsonWatchFilter } from "../../../src/proxy/scan/json-watch-filter.ts";
import { slotOfBytes, type ObjectKey } from "../../../src/proxy/scan/object-key.ts";
import { createProtoListFilter } from "../../../src/proxy/scan/proto-list-filter.ts";
import { lenHeader } from "../../../src/proxy/scan/proto-wire.ts";
import { createProtoListTap, createProtoWatchTap } from "../../../src/proxy/scan/proto-tap.ts";
import { createProtoWatchFilter } from "../../../src/proxy/scan/proto-watch-filter.ts";
import type { DeliveredObject, Tap, TapSink } from "../../../src/proxy/scan/tap.ts";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { FULL_RANGE, HashMatcher, makeRange, split, type Range } from "../../../src/shard/range.ts";
import { parseSlot, slotLabelKey } from "../../../src/shard/slots.ts";
import { slotRange } from "../../../src/shard/table.ts";
import {
  expectedPoint,
  jsonList,
  jsonWatch,
  meta,
  nameOf,
  object,
  protoList,
  protoWatch,
  randomObjects,
  ref,
  sortedKeys,
  type Json,
  type Obj,
} from "../../support/keyed-objects.ts";
import { decodeList, loadK8sProto, metaOf, splitFrames, decodeEvent } from "../../support/proto/k8s.ts";
import { rng } from "../../support/rng.ts";
import { runTransform, splitAt } from "../../support/streams.ts";

const pb = loadK8sProto();
const LABEL = slotLabelKey("widgets");
const SLOTS = { label: LABEL, slotCount: 256 } as const;
const KEYS: readonly ObjectKey[] = ["uid", "namespace", "owner", SLOTS];
const keyName = (k: ObjectKey): string => (typeof k === "object" ? "slot label" : k);

type Encoding = "json" | "protobuf";
type Shape = "list" | "watch";

interface Placed {
  /** Names of the objects the filter kept, in order. */
  readonly kept: string[];
  readonly unlabelled: number;
  readonly named: string[];
  readonly error: Error | undefined;
  readonly out: Buffer;
}

function body(encoding: Encoding, shape: Shape, items: readonly Obj[]): Buffer {
  if (encoding === "json") return shape === "list" ? jsonList(items) : jsonWatch(items);
  return shape === "list" ? protoList(pb, items) : protoWatch(pb, items);
}

function makeFilter(encoding: Encoding, shape: Shape, key: ObjectKey, ranges: readonly Range[], named: string[]): Transform & { readonly unlabelled: number } {
  const common = { matcher: new HashMatcher(ranges), key, onUnlabelled: (o: string) => named.push(o) };
  const watch = { ...common, allowBookmarks: false, initialEvents: false };
  if (encoding === "json") return (shape === "list" ? createJsonListFilter(common) : createJsonWatchFilter(watch));
  return (shape === "list" ? createProtoListFilter(common) : createProtoWatchFilter(watch));
}

/** The names in a filter's output. */
function namesOut(encoding: Encoding, shape: Shape, out: Buffer): string[] {
  if (encoding === "json") {
    if (shape === "list") return ((JSON.parse(out.toString()) as { items: Obj[] }).items ?? []).map((i) => nameOf(i));
    return out
      .toString()
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => nameOf((JSON.parse(l) as { object: Obj }).object));
  }
  if (shape === "list") return decodeList(pb, out).items.map((i) => metaOf(i).name ?? "");
  return splitFrames(out).map((f) => metaOf(decodeEvent(pb, f).object).name ?? "");
}

async function place(encoding: Encoding, shape: Shape, key: ObjectKey, ranges: readonly Range[], items: readonly Obj[], chunks?: Buffer[]): Promise<Placed> {
  const named: string[] = [];
  const f = makeFilter(encoding, shape, key, ranges, named);
  const r = await runTransform(f, chunks ?? [body(encoding, shape, items)]);
  return { kept: r.error === undefined ? namesOut(encoding, shape, r.out) : [], unlabelled: f.unlabelled, named, error: r.error, out: r.out };
}

/** One hash: an object is kept by it iff the filter placed it exactly there. */
function point(h: bigint): Range[] {
  return [makeRange(h, h + 1n)];
}

class Points implements TapSink {
  readonly points = new Map<string, bigint>();
  unreadableReason: string | undefined;
  upsert(o: DeliveredObject): void {
    this.points.set(o.name, (BigInt(o.keyHi) << 32n) | BigInt(o.keyLo));
  }
  remove(): void {}
  typeMeta(): void {}
  resourceVersion(): void {}
  continueToken(): void {}
  unreadable(reason: string): void {
    this.unreadableReason = reason;
  }
}

function tapPoints(encoding: Encoding, shape: Shape, key: ObjectKey, b: Buffer): Points {
  const sink = new Points();
  const make: (s: TapSink, k: ObjectKey) => Tap = encoding === "json" ? (shape === "list" ? createJsonListTap : createJsonWatchTap) : shape === "list" ? createProtoListTap : createProtoWatchTap;
  make(sink, key).write(b);
  return sink;
}

// ---------------------------------------------------------------------------
// Tables: each shape with the value it must be placed by.

const CHILD = "1d0c2a5e-0000-4000-a000-00000000c41d";
const PARENT = "9a7b3c1d-0000-4000-a000-0000000a2e47";
const OTHER = "5e5e5e5e-0000-4000-a000-0000000074e2";

interface Case {
  readonly name: string;
  readonly obj: Obj;
  /** The owner key's value; undefined: no uid at all (hashes as ""). */
  readonly owner: string | undefined;
  /** The slot label's slot; undefined: unlabelled. */
  readonly slot?: number | undefined;
  /** JSON only: values the protobuf schema cannot hold. */
  readonly jsonOnly?: boolean;
}

const withLabel = (v: Json | undefined): Obj => (v === undefined ? { app: "a" } : { app: "a", [LABEL]: v });

const CASES: readonly Case[] = [
  { name: "typed: uid before ownerReferences, a reference's uid before controller", obj: object(meta({ name: "typed", namespace: "ns", uid: CHILD, ownerReferences: [ref(PARENT, true)] })), owner: PARENT },
  { name: "custom resource: sorted keys, ownerReferences before uid, controller before uid", obj: sortedKeys(object(meta({ name: "sorted", namespace: "ns", uid: CHILD, ownerReferences: [ref(PARENT, true)] }))) as Obj, owner: PARENT },
  { name: "several references: the first controller one wins", obj: object(meta({ name: "several", uid: CHILD, ownerReferences: [ref(OTHER, false), ref(PARENT, true), ref(OTHER, true)] })), owner: PARENT },
  { name: "several references, sorted keys", obj: sortedKeys(object(meta({ name: "several-sorted", uid: CHILD, ownerReferences: [ref(OTHER, undefined), ref(PARENT, true), ref(OTHER, true)] }))) as Obj, owner: PARENT },
  { name: "controller: false only: the object's own uid", obj: object(meta({ name: "not-controller", uid: CHILD, ownerReferences: [ref(PARENT, false)] })), owner: CHILD },
  { name: "no controller field: the object's own uid", obj: object(meta({ name: "no-controller", uid: CHILD, ownerReferences: [ref(PARENT, undefined)] })), owner: CHILD },
  { name: "controller \"true\" (a string) is not a controller", obj: object(meta({ name: "string-true", uid: CHILD, ownerReferences: [ref(PARENT, "true")] })), owner: CHILD, jsonOnly: true },
  { name: "a controller reference without a uid is skipped", obj: object(meta({ name: "uidless-ref", uid: CHILD, ownerReferences: [ref(undefined, true), ref(PARENT, true)] })), owner: PARENT },
  { name: "a non-string reference uid is skipped", obj: object(meta({ name: "numeric-ref-uid", uid: CHILD, ownerReferences: [ref(7, true), ref(PARENT, true)] })), owner: PARENT, jsonOnly: true },
  { name: "elements that are not references are skipped", obj: object(meta({ name: "odd-elements", uid: CHILD, ownerReferences: ["x", null, 3, ref(PARENT, true)] })), owner: PARENT, jsonOnly: true },
  { name: "ownerReferences null", obj: object(meta({ name: "refs-null", uid: CHILD, ownerReferences: null })), owner: CHILD, jsonOnly: true },
  { name: "empty ownerReferences", obj: object(meta({ name: "refs-empty", uid: CHILD, ownerReferences: [] })), owner: CHILD },
  { name: "an escaped reference uid is decoded", obj: JSON.parse(JSON.stringify(object(meta({ name: "escaped", uid: CHILD, ownerReferences: [ref("PLACEHOLDER", true)] }))).replace('"PLACEHOLDER"', `"${PARENT.replace("-", "\\u002d")}"`)) as Obj, owner: PARENT, jsonOnly: true },
  {
    name: "nested: a pod template's and a top-level ownerReferences do not count, one level only",
    obj: object(meta({ name: "nested", uid: CHILD, labels: withLabel("9") }), { ownerUid: OTHER, labels: { [LABEL]: "1" } }),
    owner: CHILD,
    slot: 9,
  },
  { name: "no uid and no references: hashed as \"\"", obj: object(meta({ name: "no-uid", namespace: "ns" })), owner: undefined },
  { name: "slot label 0", obj: object(meta({ name: "slot-0", uid: CHILD, labels: withLabel("0") })), owner: CHILD, slot: 0 },
  { name: "slot label 255", obj: object(meta({ name: "slot-255", uid: CHILD, labels: withLabel("255") })), owner: CHILD, slot: 255 },
  { name: "slot label with a leading zero", obj: object(meta({ name: "slot-007", uid: CHILD, labels: withLabel("007") })), owner: CHILD, slot: undefined },
  { name: "slot label beyond the slot count", obj: object(meta({ name: "slot-256", uid: CHILD, labels: withLabel("256") })), owner: CHILD, slot: undefined },
  { name: "slot label negative", obj: object(meta({ name: "slot-neg", uid: CHILD, labels: withLabel("-1") })), owner: CHILD, slot: undefined },
  { name: "slot label empty", obj: object(meta({ name: "slot-empty", uid: CHILD, labels: withLabel("") })), owner: CHILD, slot: undefined },
  { name: "slot label a number, not a string", obj: object(meta({ name: "slot-number", uid: CHILD, labels: withLabel(3) })), owner: CHILD, slot: undefined, jsonOnly: true },
  { name: "no slot label", obj: object(meta({ name: "slot-missing", uid: CHILD, labels: withLabel(undefined) })), owner: CHILD, slot: undefined },
  { name: "labels null", obj: object(meta({ name: "labels-null", uid: CHILD, labels: null })), owner: CHILD, slot: undefined, jsonOnly: true },
  { name: "an escaped slot value", obj: JSON.parse(JSON.stringify(object(meta({ name: "slot-escaped", uid: CHILD, labels: withLabel("PLACEHOLDER") }))).replace('"PLACEHOLDER"', '"4\\u0032"')) as Obj, owner: CHILD, slot: 42, jsonOnly: true },
  { name: "slot label, sorted keys", obj: sortedKeys(object(meta({ name: "slot-sorted", uid: CHILD, labels: withLabel("17"), ownerReferences: [ref(PARENT, true)] }))) as Obj, owner: PARENT, slot: 17 },
];

for (const encoding of ["json", "protobuf"] as const) {
  for (const shape of ["list", "watch"] as const) {
    t.test(`${encoding} ${shape}: each shape is placed by its owner and its slot label`, async (t) => {
      for (const c of CASES) {
        if (c.jsonOnly === true && encoding === "protobuf") continue;
        const owner = await place(encoding, shape, "owner", point(fnv1a64(c.owner ?? "")), [c.obj]);
        t.same(owner.kept, [nameOf(c.obj)], `${c.name}: placed at the hash of ${c.owner ?? '""'}`);
        if (!("slot" in c)) continue;
        const want = c.slot;
        if (want === undefined) {
          const r = await place(encoding, shape, SLOTS, [FULL_RANGE], [c.obj]);
          t.same([r.kept, r.unlabelled, r.named], [[], 1, [nameOf(c.obj)]], `${c.name}: in no shard, counted and named`);
        } else {
          const r = await place(encoding, shape, SLOTS, point(slotRange(want, 256).start), [c.obj]);
          t.equal(r.kept.length, 1, `${c.name}: placed at slot ${want}`);
        }
      }
    });
  }
}

t.test("JSON: an item without metadata is dropped under every key; Tables and metadata-only lists are placed by their rows' and items' metadata", async (t) => {
  const bare: Obj = { kind: "Widget", apiVersion: "example.com/v1", spec: { metadata: meta({ name: "inner", uid: CHILD, ownerReferences: [ref(PARENT, true)], labels: withLabel("3") }) } };
  for (const key of KEYS) {
    const r = await place("json", "list", key, [FULL_RANGE], [bare]);
    t.same(r.kept, [], `${keyName(key)}: no metadata, no shard (a nested one is not the object's)`);
  }
  const obj = object(meta({ name: "row", namespace: "ns", uid: CHILD, ownerReferences: [ref(PARENT, true)], labels: withLabel("3") }));
  const table = Buffer.from(JSON.stringify({ kind: "Table", apiVersion: "meta.k8s.io/v1", metadata: { resourceVersion: "9" }, columnDefinitions: [], rows: [{ cells: ["row"], object: obj }] }));
  const pom = Buffer.from(
    JSON.stringify({ kind: "PartialObjectMetadataList", apiVersion: "meta.k8s.io/v1", metadata: {}, items: [{ kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: obj["metadata"] ?? null }] }),
  );
  for (const [key, at] of [
    ["owner", fnv1a64(PARENT)],
    [SLOTS, slotRange(3, 256).start],
  ] as const) {
    for (const [what, b] of [
      ["Table", table],
      ["PartialObjectMetadataList", pom],
    ] as const) {
      const named: string[] = [];
      const f = makeFilter("json", "list", key, point(at), named);
      const r = await runTransform(f, [b]);
      const parsed = JSON.parse(r.out.toString()) as { rows?: unknown[]; items?: unknown[] };
      t.equal((parsed.rows ?? parsed.items ?? []).length, 1, `${what}, ${keyName(key)}: kept at its point`);
      const away = await runTransform(makeFilter("json", "list", key, point(at + 1n), named), [b]);
      const p2 = JSON.parse(away.out.toString()) as { rows?: unknown[]; items?: unknown[] };
      t.equal((p2.rows ?? p2.items ?? []).length, 0, `${what}, ${keyName(key)}: dropped one hash away`);
    }
  }
  const watchTable = Buffer.from(`${JSON.stringify({ type: "ADDED", object: JSON.parse(table.toString()) as Json })}\n`);
  const kept = await runTransform(makeFilter("json", "watch", "owner", point(fnv1a64(PARENT)), []), [watchTable]);
  t.match(kept.out.toString(), /"row"/, "a Table watch event is placed by its row's object");
});

// ---------------------------------------------------------------------------
// Property: every scanner agrees with keyValue() of JSON.parse.

t.test("property: each filter keeps an object in exactly the quarter holding keyValue() of its JSON.parse, for every key and both encodings", async (t) => {
  const quarters = split(4);
  for (const encoding of ["json", "protobuf"] as const) {
    const objs = randomObjects(rng(encoding === "json" ? 11 : 12), 400, SLOTS, encoding === "protobuf");
    for (const shape of ["list", "watch"] as const) {
      for (const key of KEYS) {
        const want = new Map<string, number>();
        objs.forEach((o) => {
          const p = expectedPoint(JSON.parse(JSON.stringify(o)) as Json, key);
          if (p !== undefined) want.set(nameOf(o), quarters.findIndex((q) => q.start <= p && p < q.end));
        });
        const got = new Map<string, number>();
        let twice = 0;
        let unlabelled = 0;
        for (let q = 0; q < 4; q++) {
          const r = await place(encoding, shape, key, [quarters[q] as Range], objs);
          if (r.error !== undefined) t.fail(`${encoding} ${shape} ${keyName(key)}: ${r.error.message}`);
          for (const n of r.kept) {
            if (got.has(n)) twice++;
            got.set(n, q);
          }
          unlabelled += r.unlabelled;
        }
        t.equal(twice, 0, `${encoding} ${shape} ${keyName(key)}: no object in two quarters`);
        t.same(got, want, `${encoding} ${shape} ${keyName(key)}: every object where keyValue() puts it (${want.size} placed of ${objs.length})`);
        if (typeof key === "object") t.equal(unlabelled, 4 * (objs.length - want.size), "every unlabelled object is counted by every filter that saw it");
      }
    }
  }
});

t.test("property: each tap reports the point keyValue() of its JSON.parse gives, for every key and both encodings", async (t) => {
  for (const encoding of ["json", "protobuf"] as const) {
    // Only what a filter could deliver: objects without a readable slot label never reach a tap.
    const objs = randomObjects(rng(encoding === "json" ? 21 : 22), 300, SLOTS, encoding === "protobuf");
    for (const shape of ["list", "watch"] as const) {
      for (const key of KEYS) {
        const placed = objs.filter((o) => expectedPoint(o, key) !== undefined);
        const sink = tapPoints(encoding, shape, key, body(encoding, shape, placed));
        const want = new Map(placed.map((o) => [nameOf(o), expectedPoint(JSON.parse(JSON.stringify(o)) as Json, key)]));
        t.equal(sink.unreadableReason, undefined, `${encoding} ${shape} ${keyName(key)}: readable`);
        t.same(sink.points, want, `${encoding} ${shape} ${keyName(key)}: ${placed.length} objects at their points`);
      }
    }
  }
});

t.test("a tap that is shown an object without a readable slot label gives up rather than index it", async (t) => {
  const obj = object(meta({ name: "unlabelled", uid: CHILD }));
  for (const encoding of ["json", "protobuf"] as const) {
    for (const shape of ["list", "watch"] as const) {
      const sink = tapPoints(encoding, shape, SLOTS, body(encoding, shape, [obj]));
      t.match(sink.unreadableReason, /slot label|key/, `${encoding} ${shape}`);
      t.equal(sink.points.size, 0);
    }
  }
});

// ---------------------------------------------------------------------------
// Streaming: cut anywhere.

/**
 * Small bodies, so that every cut point is tried on a loaded machine too:
 * per key the shapes that decide late or early (typed and sorted key orders,
 * a non-controller reference, a nested decoy, a label that is no slot),
 * without the padding members.
 */
function lean(o: Obj): Obj {
  const m = { ...(o["metadata"] as Obj) };
  delete m["annotations"];
  delete m["managedFields"];
  return { ...o, metadata: m };
}
const casesNamed = (...prefixes: string[]): Obj[] => prefixes.map((p) => lean(CASES.find((c) => c.name.startsWith(p))?.obj ?? {}));
const STREAM: ReadonlyMap<ObjectKey, Obj[]> = new Map<ObjectKey, Obj[]>([
  ["owner", casesNamed("typed:", "custom resource:", "controller: false only", "nested:")],
  [SLOTS, casesNamed("slot label 0", "slot label with a leading zero", "nested:", "slot label, sorted keys")],
]);

/** Writes `chunks` without waiting between them and collects the output (fast enough to run thousands of times). */
function output(f: Transform, chunks: readonly Buffer[]): Promise<{ out: Buffer; error: Error | undefined }> {
  const parts: Buffer[] = [];
  return new Promise((resolve) => {
    f.on("data", (b: Buffer) => parts.push(b));
    f.on("end", () => resolve({ out: Buffer.concat(parts), error: undefined }));
    f.on("error", (error: Error) => resolve({ out: Buffer.concat(parts), error }));
    for (const c of chunks) f.write(c);
    f.end();
  });
}

for (const [key, objs] of STREAM) {
  for (const encoding of ["json", "protobuf"] as const) {
    for (const shape of ["list", "watch"] as const) {
      t.test(`${encoding} ${shape}, ${keyName(key)} key: output does not depend on where the input is cut`, async (t) => {
        // The parent's hash for owner (the children follow it), half the slots for the slot label.
        const ranges = key === "owner" ? point(fnv1a64(PARENT)) : [split(2)[0] as Range];
        const b = body(encoding, shape, objs);
        const whole = await place(encoding, shape, key, ranges, objs);
        t.ok(whole.kept.length > 0 && whole.kept.length < objs.length, `premise: some kept (${whole.kept.length}), some dropped`);
        let differ = 0;
        for (let at = 1; at < b.length; at++) {
          const r = await output(makeFilter(encoding, shape, key, ranges, []), splitAt(b, at));
          if (r.error !== undefined || !r.out.equals(whole.out)) differ++;
        }
        t.equal(differ, 0, `all ${b.length - 1} two-chunk splits identical`);
      });
    }
  }
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

t.test("JSON list and watch, owner and slot keys: a body cut at any byte fails closed", async (t) => {
  for (const [key, objs] of STREAM) {
    const list = jsonList(objs);
    let bad = 0;
    const end = list.lastIndexOf("}") + 1;
    for (let at = 0; at < end; at++) {
      const r = await output(makeFilter("json", "list", key, [FULL_RANGE], []), [list.subarray(0, at)]);
      if (r.error === undefined || parses(r.out.toString())) bad++;
    }
    t.equal(bad, 0, `list, ${keyName(key)}: all ${end} cuts end in an error, never a shorter valid list`);
    const watch = jsonWatch(objs);
    const lines = watch.toString().split("\n").length - 1;
    let leaked = 0;
    for (let at = 1; at < watch.length; at++) {
      const cut = watch.subarray(0, at).toString().split("\n");
      // What may pass: the whole events before the cut (the last one even without its newline).
      const whole = cut.filter((l) => l !== "" && parses(l));
      const cutInside = !parses(cut[cut.length - 1] ?? "") && cut[cut.length - 1] !== "";
      const r = await output(makeFilter("json", "watch", key, [FULL_RANGE], []), [watch.subarray(0, at)]);
      const text = r.out.toString();
      const passed = text.split("\n").filter((l) => l !== "" && !l.includes('"ERROR"'));
      const allowed = whole.filter((l) => expectedPoint((JSON.parse(l) as { object: Json }).object, key) !== undefined);
      if (passed.join("\n") !== allowed.join("\n") || cutInside !== text.includes('"ERROR"')) leaked++;
    }
    t.equal(leaked, 0, `watch, ${keyName(key)}: of ${lines} events, a cut one never passes in part, and the stream ends with an ERROR`);
  }
});

t.test("the first controller reference wins across repeated protobuf ObjectMeta fields, as the Go decoder merges them", async (t) => {
  // Two ObjectMeta fields in one object: Go appends their ownerReferences.
  const T = pb.type("Pod");
  const first = Buffer.from(T.encode(T.fromObject({ metadata: { name: "merged", uid: CHILD, ownerReferences: [{ uid: OTHER, controller: false }] } })).finish());
  const second = Buffer.from(T.encode(T.fromObject({ metadata: { ownerReferences: [{ uid: PARENT, controller: true }] } })).finish());
  const podBytes = Buffer.concat([first, second]);
  const decoded = T.toObject(T.decode(podBytes)) as { metadata: { ownerReferences: { uid: string }[] } };
  t.same(
    decoded.metadata.ownerReferences.map((r) => r.uid),
    [OTHER, PARENT],
    "premise: protobufjs merges them too",
  );
  const L = pb.type("PodList");
  const list = Buffer.concat([
    Buffer.from([0x6b, 0x38, 0x73, 0x00]),
    Buffer.from(
      pb.Unknown.encode(
        pb.Unknown.create({ typeMeta: { apiVersion: "v1", kind: "PodList" }, raw: Buffer.concat([Buffer.from(L.encode(L.fromObject({ metadata: {} })).finish()), lenHeader(2, podBytes.length), podBytes]) }),
      ).finish(),
    ),
  ]);
  const f = createProtoListFilter({ matcher: new HashMatcher(point(fnv1a64(PARENT))), key: "owner" });
  const r = await runTransform(f, [list]);
  t.equal(f.stats.kept, 1, "placed by the controller reference of the second ObjectMeta");
  t.equal(r.error, undefined);
});

t.test("protobuf: a key field with the wrong wire type fails closed", async (t) => {
  // ObjectMeta { ownerReferences (13) as a varint }: not what any server sends.
  const meta13 = Buffer.from([0x0a, 0x01, 0x61, 0x68, 0x01]);
  const pod = Buffer.concat([Buffer.from([0x0a, meta13.length]), meta13]);
  const raw = Buffer.concat([Buffer.from([0x0a, 0x00, 0x12, pod.length]), pod]);
  const list = Buffer.concat([Buffer.from([0x6b, 0x38, 0x73, 0x00]), Buffer.from(pb.Unknown.encode(pb.Unknown.create({ typeMeta: { apiVersion: "v1", kind: "PodList" }, raw })).finish())]);
  const f = createProtoListFilter({ matcher: new HashMatcher([FULL_RANGE]), key: "owner" });
  const r = await runTransform(f, [list]);
  t.match(r.error?.message, /ownerReferences has wire type 0/);
  t.equal(r.out.length, 0, "nothing went out");
  const labels = createProtoListFilter({ matcher: new HashMatcher([FULL_RANGE]), key: SLOTS });
  const m11 = Buffer.from([0x0a, 0x01, 0x61, 0x58, 0x01]);
  const pod11 = Buffer.concat([Buffer.from([0x0a, m11.length]), m11]);
  const raw11 = Buffer.concat([Buffer.from([0x0a, 0x00, 0x12, pod11.length]), pod11]);
  const r11 = await runTransform(labels, [Buffer.concat([Buffer.from([0x6b, 0x38, 0x73, 0x00]), Buffer.from(pb.Unknown.encode(pb.Unknown.create({ typeMeta: { apiVersion: "v1", kind: "PodList" }, raw: raw11 })).finish())])]);
  t.match(r11.error?.message, /labels has wire type 0/);
});

t.test("a slot label's bytes are read exactly as parseSlot reads its text", async (t) => {
  const r = rng(5);
  const alphabet = "0123456789-+ ex";
  let disagree = 0;
  const tried = ["0", "00", "1", "01", "255", "256", "1023", "1024", "9999", "10000", "", "-0", "+1", " 1", "1 ", "1e2"];
  for (let i = 0; i < 5000; i++) tried.push(Array.from({ length: 1 + Math.floor(r() * 5) }, () => alphabet[Math.floor(r() * alphabet.length)]).join(""));
  for (const slotCount of [1, 10, 256, 1024]) {
    for (const text of tried) {
      const b = Buffer.from(text);
      const want = parseSlot(text, slotCount) ?? -1;
      if (slotOfBytes(b, 0, b.length, slotCount) !== want) disagree++;
    }
  }
  t.equal(disagree, 0, `${tried.length} texts, 4 slot counts`);
});
