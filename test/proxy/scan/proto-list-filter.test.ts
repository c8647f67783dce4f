import t from "tap";
import { setFlagsFromString } from "node:v8";
import { setImmediate } from "node:timers/promises";
import { runInNewContext } from "node:vm";
import { ScanError } from "../../../src/errors.ts";
import { createProtoListFilter } from "../../../src/proxy/scan/proto-list-filter.ts";
import { lenField, lenHeader, stringField } from "../../../src/proxy/scan/proto-wire.ts";
import { HashMatcher, makeRange, type Range } from "../../../src/shard/range.ts";
import { formatSelector, parseSelector, type ShardKey } from "../../../src/shard/selector.ts";
import { matcherFor, protoCases, type ProtoCase } from "../../support/proto/fixtures.ts";
import { decodeEnvelope, decodeList, encodeEnvelope, loadK8sProto, metaOf, type PlainObject } from "../../support/proto/k8s.ts";
import { podBytes, podListBody } from "../../support/proto/pods.ts";
import { chunksOf, runFilter, splitAt } from "../../support/proto/run.ts";

const pb = loadK8sProto();
const LOW = parseSelector("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')");
const HIGH = parseSelector("shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')");
const lists = protoCases().filter((c) => !c.watch);

function filterFor(sel: { key: ShardKey; ranges: readonly Range[] }, sentSelector: string | undefined, maxItemBytes?: number) {
  return createProtoListFilter({
    matcher: new HashMatcher(sel.ranges),
    key: sel.key,
    ...(sentSelector === undefined ? {} : { sentSelector }),
    ...(maxItemBytes === undefined ? {} : { maxItemBytes }),
  });
}

function keyOf(item: PlainObject, key: ShardKey): string {
  const m = metaOf(item);
  return (key === "uid" ? m.uid : m.namespace) ?? "";
}

/** The reference: the input decoded by protobufjs, items kept by hashing their decoded key. */
function expectedItems(body: Uint8Array, sel: { key: ShardKey; ranges: readonly Range[] }): PlainObject[] {
  const m = new HashMatcher(sel.ranges);
  return decodeList(pb, body).items.filter((it) => m.matchesString(keyOf(it, sel.key)));
}

function uidsOf(body: Uint8Array): string[] {
  return decodeList(pb, body)
    .items.map((it) => metaOf(it).uid ?? "")
    .sort();
}

/** Filters a recording with `sel` (default: its own), sending `sel`'s canonical form unless `sent` says otherwise. */
async function filtered(c: ProtoCase, sel = c.selector, opts: { sent?: string } = {}) {
  if (sel === undefined) throw new Error(`${c.name}: no selector`);
  const f = filterFor(sel, "sent" in opts ? opts.sent : matcherFor(sel).sentSelector);
  const r = await runFilter(f, [c.body]);
  return { ...r, stats: f.stats };
}

t.test("every recorded protobuf list decodes after filtering and holds exactly the in-range items", async (t) => {
  t.ok(lists.length >= 45, `found ${lists.length} protobuf list recordings`);
  for (const c of lists) {
    t.test(c.name, async (t) => {
      if (c.status !== 200) {
        // 406 (no protobuf for this type) and 500 (bad selector) are Status bodies: no objects.
        const r = await filtered(c, c.selector ?? LOW);
        t.equal(r.error, undefined);
        t.ok(r.out.equals(c.body), "a Status body passes unchanged");
        t.equal(r.stats.kind, "Status");
        t.equal(decodeEnvelope(pb, r.out).kind, "Status");
        return;
      }
      const sels = c.selector === undefined ? [LOW, HIGH] : [c.selector];
      const outs: Buffer[] = [];
      for (const sel of sels) {
        const r = await filtered(c, sel);
        t.equal(r.error, undefined, "no error");
        const got = decodeList(pb, r.out);
        const want = expectedItems(c.body, sel);
        t.same(got.items, want, `exactly the in-range items of ${formatSelector(sel).slice(0, 60)}…, in order`);
        if (r.stats.path === "filter") {
          t.equal(r.stats.kept, want.length);
          t.equal(r.stats.items, decodeList(pb, c.body).items.length);
          t.equal(r.stats.dropped, r.stats.items - r.stats.kept);
        } else {
          t.same([r.stats.items, r.stats.kept, r.stats.dropped], [0, 0, 0], "the fast path reads no items");
        }
        t.equal(r.stats.bytesIn, c.body.length);
        t.equal(r.stats.bytesOut, r.out.length);
        const inMeta = metaOf(decodeList(pb, c.body).object);
        t.equal(metaOf(got.object).resourceVersion, inMeta.resourceVersion, "resourceVersion kept");
        const typed = got.kind !== "PartialObjectMetadataList";
        if (c.gate === "gate-on" && c.selector !== undefined && typed) {
          t.ok(r.out.equals(c.body), "gate-on typed list: byte-identical (fast path)");
          t.equal(r.stats.path, "fast");
          t.equal(r.stats.serverFiltered, "confirmed");
        } else {
          t.equal(r.stats.path, "filter");
          t.equal(r.stats.serverFiltered, r.stats.dropped > 0 ? "no" : "inferred");
        }
        outs.push(r.out);
      }
      if (outs.length === 2) {
        const [low = Buffer.alloc(0), high = Buffer.alloc(0)] = outs;
        t.same([...uidsOf(low), ...uidsOf(high)].sort(), uidsOf(c.body), "LOW and HIGH together are the whole list");
      }
    });
  }
});

t.test("gate-off recordings filtered here hold the same objects as the gate-on server's own answer", async (t) => {
  const byKey = new Map<string, ProtoCase>();
  for (const c of lists) if (c.status === 200) byKey.set(`${c.server}/${c.gate}/${c.resource}/${c.caseName}`, c);
  let pairs = 0;
  for (const off of lists) {
    if (off.gate !== "gate-off" || off.status !== 200 || off.selector === undefined) continue;
    const on = byKey.get(`${off.server}/gate-on/${off.resource}/${off.caseName}`);
    if (on === undefined) continue;
    pairs++;
    const mine = await filtered(off);
    t.same(uidsOf(mine.out), uidsOf(on.body), `${off.server}/${off.resource}/${off.caseName}`);
  }
  // And a full list (no selector sent) filtered here equals the server's shard.
  for (const all of lists) {
    if (all.caseName !== "pb-list-all") continue;
    const on = byKey.get(`${all.server}/gate-on/${all.resource}/pb-list-uid-low`);
    if (on === undefined) continue;
    pairs++;
    const mine = await filtered(all, LOW);
    t.same(uidsOf(mine.out), uidsOf(on.body), `${all.name} filtered LOW = gate-on pb-list-uid-low`);
  }
  t.ok(pairs >= 12, `${pairs} comparisons`);
});

t.test("a cluster-scoped object has no namespace and hashes as the empty string, like on the server", async (t) => {
  const crds = lists.find((c) => c.name === "apiextensions-apiserver/gate-on/customresourcedefinitions/pb-list-all");
  if (crds === undefined) throw new Error("fixture missing");
  // FNV-1a("") = 0xcbf29ce484222325: upper half.
  const high = await filtered(crds, parseSelector("shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"));
  const low = await filtered(crds, parseSelector("shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"));
  t.equal(high.stats.kept, 64);
  t.equal(low.stats.kept, 0);
  t.equal(decodeList(pb, low.out).items.length, 0, "an empty list still decodes");
});

// ---------------------------------------------------------------------------
// Fast path and ListMeta

const SENT = formatSelector(LOW);

t.test("the fast path needs the selector that was sent: without it the same body is filtered", async (t) => {
  const c = lists.find((x) => x.name === "kube-apiserver/gate-on/pods/pb-list-uid-low");
  if (c === undefined) throw new Error("fixture missing");
  const r = await filtered(c, LOW, { sent: undefined });
  t.equal(r.stats.path, "filter");
  t.equal(r.stats.serverFiltered, "inferred", "nothing out of range was seen");
  t.same(decodeList(pb, r.out).items, decodeList(pb, c.body).items);
  const other = await filtered(c, LOW, { sent: formatSelector(HIGH) });
  t.equal(other.stats.path, "filter", "an echo of a different selector is not a confirmation");
});

t.test("fast path: the body passes byte for byte, remainingItemCount included", async (t) => {
  const body = podListBody(pb, 6, { continue: "tok", remainingItemCount: 150, shardSelector: SENT });
  const f = filterFor(LOW, SENT);
  const r = await runFilter(f, [body]);
  t.ok(r.out.equals(body));
  t.equal(f.stats.path, "fast");
  t.equal(f.stats.items, 0, "nothing after ListMeta is read");
});

t.test("filter path keeps resourceVersion and continue: a lost token would end the reflector's relist after one page", async (t) => {
  // Regression guard for the pagination invariant (design.md §3): the
  // continue token and resourceVersion must survive the re-encoding.
  const body = podListBody(pb, 12, { resourceVersion: "98765", continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6OTg3NjV9", remainingItemCount: 150, shardSelector: "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')" });
  const f = filterFor(LOW, SENT);
  const r = await runFilter(f, [body]);
  t.equal(r.error, undefined);
  const meta = metaOf(decodeList(pb, r.out).object) as Record<string, unknown>;
  t.equal(meta["resourceVersion"], "98765");
  t.equal(meta["continue"], "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6OTg3NjV9");
  t.equal(meta["remainingItemCount"], undefined, "remainingItemCount counted unfiltered keys: dropped");
  t.equal(meta["shardInfo"], undefined, "shardInfo described the server's selection, not this body: dropped");
  t.equal(f.stats.path, "filter");
});

t.test("the shard key is the last uid in the item, as the client's decoder reads it", async (t) => {
  // A repeated ObjectMeta merges and a repeated string keeps its last value,
  // so an item may carry an earlier uid that the client never sees.
  const low = "00000000-0000-0000-0000-000000000001"; // 0x7c38…: lower half
  const high = "6f1d9e2c-3b7a-4c1e-9f0a-1234567890ab"; // 0x9b2e…: upper half
  t.ok(new HashMatcher(LOW.ranges).matchesString(low) && !new HashMatcher(LOW.ranges).matchesString(high), "premise: the two uids sit in different halves");
  const item = Buffer.concat([podBytes(pb, 0, { uid: low }), lenField(1, stringField(5, high))]);
  const raw = Buffer.concat([lenField(1, stringField(2, "7")), lenField(2, item)]);
  const body = encodeEnvelope(pb, "v1", "PodList", raw);
  t.equal(metaOf(decodeList(pb, body).items[0] ?? {}).uid, high, "protobufjs reads the last uid");
  const r = await runFilter(filterFor(LOW, SENT), [body]);
  t.equal(decodeList(pb, r.out).items.length, 0, "dropped by the uid the client would see");
  const r2 = await runFilter(filterFor(HIGH, SENT), [body]);
  t.equal(decodeList(pb, r2.out).items.length, 1);
});

// ---------------------------------------------------------------------------
// Chunk boundaries

function fixture(name: string): ProtoCase {
  const c = lists.find((x) => x.name === name);
  if (c === undefined) throw new Error(`fixture ${name} missing`);
  return c;
}

/** Small bodies for exhaustive splits: one per path. */
function smallBodies(): Array<{ name: string; body: Buffer; sel: typeof LOW; sent: string | undefined }> {
  return [
    { name: "filter path with drops (6 generated pods)", body: podListBody(pb, 6, { continue: "c" }), sel: LOW, sent: SENT },
    { name: "fast path (leases, gate on)", body: fixture("kube-apiserver/gate-on/leases/pb-list-uid-low").body, sel: LOW, sent: SENT },
    { name: "Status (406)", body: fixture("sample-apiserver/gate-on/flunders/pb-list-uid-low-notsupported").body, sel: LOW, sent: SENT },
  ];
}

t.test("output is identical whatever the chunking: 1-byte chunks, on recordings of every shape", async (t) => {
  const names = [
    "kube-apiserver/gate-on/pods/pb-list-uid-low",
    "kube-apiserver/gate-off/pods/pb-list-uid-low",
    "minicore/gate-off/pods/pb-pom-uid-low",
    "apiextensions-apiserver/gate-off/customresourcedefinitions/pb-list-uid-high",
    "kube-apiserver/gate-on/pods/pb-invalid-bad-hex",
  ];
  for (const name of names) {
    const c = fixture(name);
    const sel = c.selector ?? LOW;
    const whole = await runFilter(filterFor(sel, matcherFor(sel).sentSelector), [c.body]);
    const bytewise = await runFilter(filterFor(sel, matcherFor(sel).sentSelector), chunksOf(c.body, 1));
    t.equal(bytewise.error, undefined, name);
    t.ok(bytewise.out.equals(whole.out), `${name}: same output in 1-byte chunks`);
  }
});

t.test("output is identical whatever the chunking: every split offset", async (t) => {
  for (const { name, body, sel, sent } of smallBodies()) {
    const whole = await runFilter(filterFor(sel, sent), [body]);
    t.equal(whole.error, undefined);
    let same = 0;
    for (let at = 0; at <= body.length; at++) {
      const r = await runFilter(filterFor(sel, sent), splitAt(body, at));
      if (r.error === undefined && r.out.equals(whole.out)) same++;
      else t.fail(`${name}: split at ${at} differs (${r.error?.message ?? "output"})`);
    }
    t.equal(same, body.length + 1, `${name}: all ${body.length + 1} splits agree`);
  }
});

// ---------------------------------------------------------------------------
// Bad input: always an error, never a complete-looking body

function rawEnd(body: Buffer): number {
  // magic, typeMeta field, then raw: find where raw's value ends.
  let o = 4;
  const field = (): { f: number; start: number; end: number } => {
    const tag = body[o++] ?? 0;
    let len = 0;
    let scale = 1;
    for (;;) {
      const b = body[o++] ?? 0;
      len += (b & 0x7f) * scale;
      scale *= 128;
      if (b < 0x80) break;
    }
    const start = o;
    o += len;
    return { f: tag >> 3, start, end: o };
  };
  for (;;) {
    const f = field();
    if (f.f === 2) return f.end;
  }
}

t.test("a truncated protobuf list ends in a ScanError, never in a complete-looking body", async (t) => {
  for (const { name, body, sel, sent } of smallBodies()) {
    const end = rawEnd(body);
    const whole = await runFilter(filterFor(sel, sent), [body]);
    let errors = 0;
    for (let cut = 0; cut < body.length; cut++) {
      const f = filterFor(sel, sent);
      const r = await runFilter(f, [body.subarray(0, cut)]);
      if (cut >= end && r.error === undefined) {
        // The envelope has no overall length: a cut after Unknown.raw loses
        // only the empty contentEncoding/contentType fields. The content is whole.
        t.same(decodeEnvelope(pb, r.out).raw, decodeEnvelope(pb, whole.out).raw, `${name}: cut at ${cut} after raw`);
        continue;
      }
      if (!(r.error instanceof ScanError)) {
        t.fail(`${name}: cut at ${cut} did not fail with a ScanError`);
        continue;
      }
      errors++;
      if (f.stats.path === "filter") {
        if (r.out.length !== 0) t.fail(`${name}: cut at ${cut}: the filter path emitted ${r.out.length} bytes before failing`);
      } else {
        // The fast path streams: what left is a strict prefix of the body
        // whose declared lengths promise more, so no decoder accepts it.
        if (!body.subarray(0, r.out.length).equals(r.out)) t.fail(`${name}: cut at ${cut}: output is not a prefix`);
        if (r.out.length < end) t.throws(() => decodeList(pb, r.out), `${name}: cut at ${cut}: prefix does not decode`);
      }
    }
    t.ok(errors >= end - 1, `${name}: ${errors} cuts failed`);
  }
});

/** How a body fails: the ScanError code and how many bytes left before it. */
async function failure(body: Buffer, opts: { maxItemBytes?: number } = {}): Promise<{ code: string | undefined; emitted: number }> {
  const r = await runFilter(filterFor(LOW, SENT, opts.maxItemBytes), chunksOf(body, 1000));
  return { code: r.error instanceof ScanError ? r.error.code : `not a ScanError: ${String(r.error)}`, emitted: r.out.length };
}

const SYNTAX = { code: "SHARDCAR_ERR_SCAN_SYNTAX", emitted: 0 };

t.test("a body without the k8s\\0 prefix is refused: it cannot be vouched for", async (t) => {
  t.same(await failure(Buffer.from('{"kind":"PodList","apiVersion":"v1","items":[]}')), SYNTAX, "JSON");
  t.same(await failure(Buffer.concat([Buffer.from("k8s\x01"), podListBody(pb, 2).subarray(4)])), SYNTAX, "wrong magic byte");
  t.same(await failure(Buffer.alloc(0)), { code: "SHARDCAR_ERR_SCAN_TRUNCATED", emitted: 0 }, "empty body");
});

t.test("kinds this reader cannot filter fail closed", async (t) => {
  // A protobuf Table keeps rows at field 3: filtering it as a list would pass them on.
  const table = encodeEnvelope(pb, "meta.k8s.io/v1", "Table", Buffer.concat([lenField(1, Buffer.alloc(0)), lenField(3, Buffer.from([0x0a, 0x00]))]));
  t.same(await failure(table), SYNTAX, "Table");
  const noTypeMeta = Buffer.concat([Buffer.from("k8s\0"), lenField(2, lenField(1, Buffer.alloc(0)))]);
  t.same(await failure(noTypeMeta), SYNTAX, "raw before typeMeta: kind unknown");
});

t.test("malformed list structure fails closed", async (t) => {
  const good = decodeEnvelope(pb, podListBody(pb, 3));
  const env = (raw: Uint8Array, tail: Uint8Array[] = []): Buffer =>
    Buffer.concat([Buffer.from("k8s\0"), lenField(1, Buffer.concat([stringField(1, "v1"), stringField(2, "PodList")])), lenField(2, raw), ...tail]);
  // An item whose declared length runs past Unknown.raw.
  const overrun = Buffer.concat([Buffer.from(good.raw), Buffer.from([0x12, 0x7f])]);
  t.same(await failure(env(overrun)), SYNTAX, "item runs past Unknown.raw");
  t.same(await failure(env(lenField(2, Buffer.from([0x08, 0x01])))), SYNTAX, "ObjectMeta with a varint wire type");
  t.same(await failure(env(good.raw, [stringField(3, "gzip")])), SYNTAX, "an encoded raw cannot be read");
  t.same(await failure(env(Buffer.from([0x13]))), SYNTAX, "group wire types do not occur in Kubernetes messages");
  t.same(await failure(env(good.raw, [Buffer.from([0x1a, 0x05, 0x61])])), { code: "SHARDCAR_ERR_SCAN_TRUNCATED", emitted: 0 }, "cut inside contentEncoding");
});

t.test("an item over maxItemBytes fails with SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE", async (t) => {
  t.same(await failure(podListBody(pb, 3), { maxItemBytes: 1000 }), { code: "SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE", emitted: 0 });
});

// ---------------------------------------------------------------------------
// Memory

t.test("filter path output never aliases input chunks, so upstream buffers are freed as they are read", async (t) => {
  const body = podListBody(pb, 40);
  const inputs = [...chunksOf(body, 4096)].map((c) => {
    const own = Buffer.alloc(c.length); // never pooled: its ArrayBuffer is its own
    own.set(c);
    return own;
  });
  const r = await runFilter(filterFor(LOW, SENT), inputs);
  t.equal(r.error, undefined);
  const inputBuffers = new Set<ArrayBufferLike>(inputs.map((b) => b.buffer));
  t.ok(r.pieces.length > 0);
  t.ok(
    r.pieces.every((p) => !inputBuffers.has(p.buffer)),
    "every emitted chunk is the filter's own memory",
  );
});

t.test("filter path memory stays near the filtered output, not the input (256 MB in, 1/64 kept)", async (t) => {
  // One pod template whose uid is rewritten per item; chunks are made lazily.
  const tplUid = "00000000-0000-4000-a000-000000000000";
  const item = lenField(2, podBytes(pb, 7, { uid: tplUid }));
  const uidAt = item.indexOf(Buffer.from(tplUid));
  const perChunk = Math.floor((256 * 1024) / item.length);
  const chunks = 1024; // 256 MB
  const itemsTotal = perChunk * chunks;
  const listMeta = lenField(1, stringField(2, "42"));
  const head = Buffer.concat([
    Buffer.from("k8s\0"),
    lenField(1, Buffer.concat([stringField(1, "v1"), stringField(2, "PodList")])),
    lenHeader(2, listMeta.length + itemsTotal * item.length),
    listMeta,
  ]);
  // 1/64 of the keyspace.
  const sel = { key: "uid" as const, ranges: [makeRange(0n, 1n << 58n)] };
  const f = filterFor(sel, undefined);
  let kept = 0;
  let bytesOut = 0;
  f.on("data", (b: Buffer) => {
    bytesOut += b.length;
  });
  const ended = new Promise<Error | undefined>((resolve) => {
    f.once("end", () => resolve(undefined));
    f.once("error", (e: Error) => resolve(e));
  });
  // Measured after full GCs with a turn of the event loop between them
  // (backing stores are freed by a concurrent sweeper), so uncollected input
  // garbage does not count.
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  const external = async (): Promise<number> => {
    gc();
    await setImmediate();
    gc();
    return process.memoryUsage().arrayBuffers;
  };
  const base = await external();
  let peak = 0;
  f.write(head);
  let serial = 0;
  for (let c = 0; c < chunks; c++) {
    const chunk = Buffer.allocUnsafe(perChunk * item.length);
    for (let k = 0; k < perChunk; k++) {
      item.copy(chunk, k * item.length);
      const uid = `00000000-0000-4000-a000-${(serial++).toString(16).padStart(12, "0")}`;
      chunk.write(uid, k * item.length + uidAt, "latin1");
    }
    if (!f.write(chunk)) await new Promise((r) => f.once("drain", r));
    if (c % 64 === 63) peak = Math.max(peak, (await external()) - base);
  }
  f.end();
  t.equal(await ended, undefined);
  kept = f.stats.kept;
  t.equal(f.stats.items, itemsTotal);
  t.ok(kept > 0 && kept < itemsTotal / 32, `kept ${kept} of ${itemsTotal}`);
  const outputBytes = kept * item.length;
  // The bound: kept items, the last output block's slack (<= 1 MiB), the
  // chunk in hand (256 KiB) and its item. Holding the input would show as ~256 MB.
  t.ok(peak < outputBytes + 2 * 1024 * 1024, `peak external growth ${(peak / 1048576).toFixed(1)} MiB for ${(outputBytes / 1048576).toFixed(1)} MiB kept`);
  t.ok(bytesOut > outputBytes, "the output was emitted");
});
