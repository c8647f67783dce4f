import t from "tap";
import { ScanError } from "../../../src/errors.ts";
import { createJsonListFilter, type ListFilterOptions } from "../../../src/proxy/scan/json-list-filter.ts";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, HashMatcher, makeRange, type Range } from "../../../src/shard/range.ts";
import { formatSelector, parseSelector, type ShardKey, type ShardSelector } from "../../../src/shard/selector.ts";
import { listCases, readCase, type RecordedCase } from "../../support/fixture-io.ts";
import { chunksOf, runTransform, splitAt, type TransformRun } from "../../support/streams.ts";

// ---------------------------------------------------------------------------
// Helpers

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

function isObj(v: Json | undefined): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const LOW: Range[] = [makeRange(0n, 1n << 63n)];

function filter(ranges: readonly Range[], key: ShardKey, extra: Partial<ListFilterOptions> = {}): ReturnType<typeof createJsonListFilter> {
  return createJsonListFilter({ matcher: new HashMatcher(ranges), key, ...extra });
}

function run(ranges: readonly Range[], key: ShardKey, body: Buffer | Buffer[], extra: Partial<ListFilterOptions> = {}): Promise<TransformRun & { stats: ReturnType<typeof filter>["stats"]; unkeyed: number }> {
  const f = filter(ranges, key, extra);
  return runTransform(f, Array.isArray(body) ? body : [body]).then((r) => ({ ...r, stats: f.stats, unkeyed: f.unkeyed }));
}

/**
 * The reference: what JSON.parse says the item's key is. Table rows are keyed
 * by `object.metadata`. No metadata: undefined (dropped). No uid or no
 * namespace: "", as the server hashes it.
 */
function refKey(item: Json | undefined, table: boolean, key: ShardKey): string | undefined {
  const holder = table ? (isObj(item) ? item["object"] : undefined) : item;
  const meta = isObj(holder) ? holder["metadata"] : undefined;
  if (!isObj(meta)) return undefined;
  const v = meta[key];
  return typeof v === "string" ? v : "";
}

function refKeep(item: Json | undefined, table: boolean, sel: { key: ShardKey; ranges: readonly Range[] }): boolean {
  const k = refKey(item, table, sel.key);
  return k !== undefined && contains(sel.ranges, fnv1a64(k));
}

function listOf(doc: Obj): { items: Json[]; table: boolean } {
  const rows = doc["rows"];
  if (Array.isArray(rows)) return { items: rows, table: true };
  const items = doc["items"];
  return { items: Array.isArray(items) ? items : [], table: false };
}

function uidsOf(doc: Obj): string[] {
  const { items, table } = listOf(doc);
  return items.map((it) => refKey(it, table, "uid") ?? "?");
}

/**
 * kube-apiserver recreates its identity lease (`kube-system/apiserver-<id>`)
 * when it restarts, with a new uid, so that one object differs between the
 * gate-on recording and the gate-off one made after the restart.
 */
function sameAcrossRestart(item: Json): boolean {
  const meta = isObj(item) ? (isObj(item["object"]) ? item["object"]["metadata"] : item["metadata"]) : undefined;
  return !(isObj(meta) && meta["namespace"] === "kube-system" && typeof meta["name"] === "string" && meta["name"].startsWith("apiserver-"));
}

function stableUids(doc: Obj): string[] {
  const { items, table } = listOf(doc);
  return items.filter(sameAcrossRestart).map((it) => refKey(it, table, "uid") ?? "?").sort();
}

interface ListFixture {
  readonly id: string;
  readonly rec: RecordedCase;
  readonly sel: ShardSelector;
  /** What the proxy would have sent: the canonical printing, as the server echoes it. */
  readonly sent: string;
  readonly doc: Obj;
}

/** Every recorded JSON list (200, JSON, items or rows) whose request carries a selector we accept. */
function jsonListFixtures(): ListFixture[] {
  const out: ListFixture[] = [];
  for (const c of listCases("**")) {
    const rec = readCase(c.dir, c.name);
    if (rec.response.status !== 200 || !(rec.response.headers["content-type"] ?? "").startsWith("application/json")) continue;
    if (rec.request.query.get("watch") !== null) continue;
    const raw = rec.request.query.get("shardSelector");
    if (raw === null || raw.trim() === "") continue;
    let sel: ShardSelector;
    try {
      sel = parseSelector(raw);
    } catch {
      continue; // invalid-* selectors: the proxy never sends those
    }
    const doc = JSON.parse(rec.response.body.toString("utf8")) as Json;
    if (!isObj(doc) || !(Array.isArray(doc["items"]) || Array.isArray(doc["rows"]))) continue;
    out.push({ id: `${c.dir}/${c.name}`, rec, sel, sent: formatSelector(sel), doc });
  }
  return out;
}

const FIXTURES = jsonListFixtures();

function withoutList(doc: Obj): Obj {
  const rest: Obj = {};
  for (const [k, v] of Object.entries(doc)) if (k !== "items" && k !== "rows" && k !== "metadata") rest[k] = v;
  return rest;
}

// ---------------------------------------------------------------------------
// Fixture replay

t.test("the fixture set covers every list shape the proxy filters", async (t) => {
  const names = FIXTURES.map((f) => f.id);
  t.ok(FIXTURES.length >= 190, `${FIXTURES.length} JSON lists`);
  for (const want of ["/list-", "/page-", "/table-", "/kubectl-table-list-", "/pom-", "/informer-list-", "widgets/list-", "/http2-list-", "/pb-or-json-"]) {
    t.ok(names.some((n) => n.includes(want)), `has ${want}*`);
  }
  t.ok(names.some((n) => n.includes("/gate-on/")) && names.some((n) => n.includes("/gate-off/")), "both gates");
  t.ok(FIXTURES.some((f) => f.rec.response.body.subarray(0, 40).includes("\n  ")), "pretty bodies");
  t.ok(FIXTURES.some((f) => f.rec.response.body[1] === 0x22), "compact bodies");
});

t.test("every recorded JSON list comes out as exactly its in-range items, and stays valid JSON", async (t) => {
  for (const fx of FIXTURES) {
    const body = fx.rec.response.body;
    const r = await run(fx.sel.ranges, fx.sel.key, body, { sentSelector: fx.sent });
    t.equal(r.error, undefined, `${fx.id}: no error`);
    const out = JSON.parse(r.out.toString("utf8")) as Obj;
    const { items, table } = listOf(fx.doc);
    const want = items.filter((it) => refKeep(it, table, fx.sel));
    t.same(listOf(out).items, want, `${fx.id}: exactly the in-range items, in order`);
    t.same(withoutList(out), withoutList(fx.doc), `${fx.id}: everything besides items and metadata unchanged`);

    const inMeta = isObj(fx.doc["metadata"]) ? fx.doc["metadata"] : {};
    const outMeta = isObj(out["metadata"]) ? out["metadata"] : {};
    t.equal(outMeta["resourceVersion"], inMeta["resourceVersion"], `${fx.id}: resourceVersion kept`);
    t.equal(outMeta["continue"], inMeta["continue"], `${fx.id}: continue kept`);

    const shardInfo = isObj(inMeta["shardInfo"]) ? inMeta["shardInfo"] : undefined;
    if (shardInfo !== undefined) {
      t.equal(shardInfo["selector"], fx.sent, `${fx.id}: the server echoes our canonical selector`);
      t.equal(r.stats.path, "fast", `${fx.id}: fast path`);
      t.equal(r.stats.serverFiltered, "confirmed", `${fx.id}: confirmed`);
      t.ok(r.out.equals(body), `${fx.id}: fast path is byte-identical`);
    } else {
      t.equal(r.stats.path, "filter", `${fx.id}: filter path`);
      t.notOk("remainingItemCount" in outMeta, `${fx.id}: remainingItemCount dropped on the filter path`);
      t.equal(r.stats.items, items.length, `${fx.id}: items counted`);
      t.equal(r.stats.kept, want.length, `${fx.id}: kept counted`);
      t.equal(r.stats.dropped, items.length - want.length, `${fx.id}: dropped counted`);
      t.equal(r.stats.serverFiltered, want.length < items.length ? "no" : "inferred", `${fx.id}: verdict`);
    }
    t.equal(r.stats.bytesIn, body.length, `${fx.id}: bytesIn`);
    t.equal(r.stats.bytesOut, r.out.length, `${fx.id}: bytesOut`);
    t.equal(r.stats.kind, fx.doc["kind"], `${fx.id}: kind`);
  }
});

t.test("filtering an already filtered list changes nothing but remainingItemCount", async (t) => {
  // No sentSelector: the filter path runs over gate-on bodies, which are in range already.
  for (const fx of FIXTURES.filter((f) => f.id.includes("/gate-on/"))) {
    const body = fx.rec.response.body;
    const r = await run(fx.sel.ranges, fx.sel.key, body);
    const inMeta = isObj(fx.doc["metadata"]) ? fx.doc["metadata"] : {};
    t.equal(r.stats.dropped, 0, `${fx.id}: nothing dropped`);
    if (!("remainingItemCount" in inMeta)) t.ok(r.out.equals(body), `${fx.id}: byte-identical`);
    else t.same(JSON.parse(r.out.toString()), { ...fx.doc, metadata: Object.fromEntries(Object.entries(inMeta).filter(([k]) => k !== "remainingItemCount")) }, `${fx.id}: only remainingItemCount gone`);
  }
});

t.test("a gate-off list is filtered to exactly the objects the gate-on server returned for the same request", async (t) => {
  let pairs = 0;
  for (const off of FIXTURES.filter((f) => f.id.includes("/gate-off/"))) {
    // Pages differ by construction (limit counts before vs after filtering).
    if (/\/(page-|continue-|kubectl-table-list-uid-low-limit)/.test(off.id)) continue;
    const on = FIXTURES.find((f) => f.id === off.id.replace("/gate-off/", "/gate-on/"));
    if (on === undefined) continue;
    pairs++;
    const r = await run(off.sel.ranges, off.sel.key, off.rec.response.body, { sentSelector: off.sent });
    t.same(stableUids(JSON.parse(r.out.toString()) as Obj), stableUids(on.doc), `${off.id} matches its gate-on recording`);
  }
  t.ok(pairs >= 40, `${pairs} gate-on/gate-off pairs compared`);
});

// ---------------------------------------------------------------------------
// Chunk boundaries

const SMALL = [
  "kube-apiserver/gate-off/leases/list-uid-low", // pretty typed list, gate off: items dropped
  "kube-apiserver/gate-on/leases/kubectl-table-list-uid-low", // compact Table
  "apiextensions-apiserver/gate-on/widgets/page-uid-low-etcd-3", // custom resources: metadata after items
  "minicore/gate-on/pods/page-narrow-range-limit5", // remainingItemCount to cut
];

t.test("output does not depend on where the input is cut into chunks", async (t) => {
  for (const id of SMALL) {
    const slash = id.lastIndexOf("/");
    const body = readCase(id.slice(0, slash), id.slice(slash + 1)).response.body;
    // Keep the items hashing below the median: some kept, some dropped, so the
    // separator rewriting is exercised whatever the server did.
    const hashes = uidsOf(JSON.parse(body.toString()) as Obj).map((u) => fnv1a64(u)).sort((a, b) => (a < b ? -1 : 1));
    const half = [makeRange(0n, hashes[Math.floor(hashes.length / 2)] ?? 1n)];
    const whole = await run(half, "uid", body);
    t.equal(whole.error, undefined, `${id}: whole`);
    t.ok(whole.stats.dropped > 0 && whole.stats.kept > 0, `${id}: some kept, some dropped`);
    let same = 0;
    for (let at = 1; at < body.length; at++) {
      const r = await run(half, "uid", splitAt(body, at));
      if (r.out.equals(whole.out) && r.error === undefined) same++;
      else t.fail(`${id}: split at ${at} differs`);
    }
    t.equal(same, body.length - 1, `${id}: all ${body.length - 1} two-chunk splits identical`);
    const bytewise = await run(half, "uid", chunksOf(body, 1));
    t.ok(bytewise.out.equals(whole.out), `${id}: 1-byte chunks identical`);
  }
});

// ---------------------------------------------------------------------------
// Lists built by hand

function pod(uid: string | undefined, extra: Obj = {}, namespace?: string): Obj {
  const metadata: Obj = { name: `p-${uid ?? "none"}` };
  if (namespace !== undefined) metadata["namespace"] = namespace;
  if (uid !== undefined) metadata["uid"] = uid;
  return { metadata, spec: { containers: [{ name: "c", image: "x" }] }, ...extra };
}

/** Recorded pod uids on each side of the LOW/HIGH split (kube-apiserver uid-hash-vectors.json). */
const IN = ["cdc457cf-f482-4a32-95e5-15d30ce54d34", "dddd530c-37a4-4cdc-9761-94ffcd716a74", "ef48428a-a2aa-4ed6-a612-3bcc47b240ee"];
const OUT = ["9346c2ea-aba1-490f-99ca-503c6b45496a", "2351beb9-2596-40af-9900-6ea98dd894eb", "f8a4cb4e-db4f-4baa-8f34-cd09ca0f6742"];

t.test("test uids fall where the tests assume", async (t) => {
  for (const u of IN) t.ok(fnv1a64(u) < 1n << 63n, `${u} is in LOW`);
  for (const u of OUT) t.ok(fnv1a64(u) >= 1n << 63n, `${u} is out of LOW`);
});

const inA = IN[0] ?? "";
const inB = IN[1] ?? "";
const outA = OUT[0] ?? "";
const outB = OUT[1] ?? "";

function podList(items: Json[], meta: Obj = { resourceVersion: "10" }, pretty = false): Buffer {
  const doc = { kind: "PodList", apiVersion: "v1", metadata: meta, items };
  return Buffer.from(pretty ? JSON.stringify(doc, null, 2) + "\n" : JSON.stringify(doc));
}

t.test("dropping the first items never leaves a leading comma (the classic bug)", async (t) => {
  const items = [pod(outA), pod(outB), pod(inA), pod(outA), pod(inB), pod(outB)];
  for (const pretty of [false, true]) {
    const r = await run(LOW, "uid", podList(items, { resourceVersion: "10" }, pretty));
    const text = r.out.toString();
    t.doesNotThrow(() => void JSON.parse(text), `pretty=${pretty}: valid JSON`);
    t.same(uidsOf(JSON.parse(text) as Obj), [inA, inB], `pretty=${pretty}: the two in-range items, in order`);
    t.notMatch(text, /\[\s*,/, `pretty=${pretty}: no comma after '['`);
    t.notMatch(text, /,\s*\]/, `pretty=${pretty}: no comma before ']'`);
  }
  const none = await run(LOW, "uid", podList([pod(outA), pod(outB)], { resourceVersion: "10" }, true));
  t.same((JSON.parse(none.out.toString()) as Obj)["items"], [], "all dropped: an empty array");
});

// Regression (kube-state-metrics, pkg/sharding/listwatch.go): a sharded lister
// that dropped `continue` made the reflector's pager stop after one page, and
// relists silently lost everything past it.
t.test("a filtered page keeps its continue token, so a paged relist is not truncated", async (t) => {
  const meta = { resourceVersion: "10", continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ", remainingItemCount: 150 };
  const r = await run(LOW, "uid", podList([pod(outA), pod(inA)], meta));
  const out = JSON.parse(r.out.toString()) as Obj;
  t.same(out["metadata"], { resourceVersion: "10", continue: meta.continue }, "continue and resourceVersion kept, remainingItemCount gone");
});

t.test("remainingItemCount is cut cleanly wherever it sits in the list metadata", async (t) => {
  const metas: Obj[] = [
    { remainingItemCount: 5 },
    { remainingItemCount: 5, resourceVersion: "1" },
    { resourceVersion: "1", remainingItemCount: 5 },
    { resourceVersion: "1", remainingItemCount: 5, continue: "c" },
    { resourceVersion: "1", continue: "c", remainingItemCount: 5, shardInfo: { selector: "other" } },
  ];
  for (const meta of metas) {
    for (const pretty of [false, true]) {
      const r = await run(LOW, "uid", podList([pod(inA)], meta, pretty), { sentSelector: "mine" });
      const want = Object.fromEntries(Object.entries(meta).filter(([k]) => k !== "remainingItemCount"));
      t.same((JSON.parse(r.out.toString()) as Obj)["metadata"], want, `${JSON.stringify(meta)} pretty=${pretty}`);
    }
  }
});

t.test("a custom-resource list, whose metadata follows the items, is filtered and keeps continue", async (t) => {
  const widget = (uid: string, owner: string): Obj => ({
    apiVersion: "example.com/v1",
    kind: "Widget",
    // Sorted keys, as the apiserver writes unstructured objects: ownerReferences[].uid comes before the object's uid.
    metadata: { name: `w-${uid}`, namespace: "alpha", ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: "o", uid: owner }], uid },
    spec: { color: "red" },
  });
  const doc = { apiVersion: "example.com/v1", items: [widget(outA, inA), widget(inA, outA)], kind: "WidgetList", metadata: { continue: "tok", remainingItemCount: 7, resourceVersion: "9" } };
  for (const pretty of [false, true]) {
    const body = Buffer.from(pretty ? JSON.stringify(doc, null, 2) : JSON.stringify(doc));
    const r = await run(LOW, "uid", body);
    const out = JSON.parse(r.out.toString()) as Obj;
    t.same(uidsOf(out), [inA], `pretty=${pretty}: judged by the object's uid, not the owner's`);
    t.same(out["metadata"], { continue: "tok", resourceVersion: "9" }, `pretty=${pretty}: list metadata after the items handled`);
    t.equal(r.stats.kind, "WidgetList", "kind read after the items");
  }
});

t.test("an ownerReferences uid before the object's own uid does not decide (CR key order)", async (t) => {
  const item = (own: string, owner: string): Obj => ({ apiVersion: "example.com/v1", kind: "Widget", metadata: { ownerReferences: [{ uid: owner }], uid: own } });
  const r = await run(LOW, "uid", Buffer.from(JSON.stringify({ apiVersion: "example.com/v1", items: [item(outA, inA), item(inB, outB)], kind: "WidgetList", metadata: {} })));
  t.same(uidsOf(JSON.parse(r.out.toString()) as Obj), [inB]);
  t.same([r.stats.kept, r.stats.dropped], [1, 1]);
});

t.test("escaped quotes and backslashes around \"uid\" keys do not fool the scanner", async (t) => {
  const tricky: Json[] = [
    // A label value that contains a whole `"uid":"<in-range>"` pair.
    { metadata: { labels: { note: `"uid":"${inA}"` }, uid: outA } },
    // Key with an escaped quote, and a value ending in an escaped backslash.
    { metadata: { 'uid"': inA, name: "a\\", uid: outB } },
    // The real uid key written with a \u escape must still count.
    JSON.parse(`{"metadata":{"name":"x\\"","u\\u0069d":"${inA}"}}`) as Obj,
    // An annotation value with \\" sequences and unicode escapes.
    { metadata: { annotations: { a: '\\"uid\\": "' + inB + '" \u2028 \u0000' }, uid: outA } },
  ];
  const r = await run(LOW, "uid", podList(tricky));
  const out = JSON.parse(r.out.toString()) as Obj;
  t.same(listOf(out).items, [tricky[2]], "only the item whose real uid is in range");
  t.same([r.stats.kept, r.stats.dropped], [1, 3]);
});

t.test("an item with no uid hashes as \"\" (as the server and the protobuf filter do) and is counted; one with no metadata is dropped", async (t) => {
  const items = [pod(undefined), { spec: {} }, "not an object", pod(inA)];
  const r = await run(LOW, "uid", podList(items));
  t.same(uidsOf(JSON.parse(r.out.toString()) as Obj), [inA], "\"\" (0xcbf2…) is not in the lower half");
  t.equal(r.stats.dropped, 3);
  t.equal(r.unkeyed, 3, "all three are counted as unkeyed");
  t.equal(r.stats.serverFiltered, "no");
  const high = await run([makeRange(1n << 63n, 1n << 64n)], "uid", podList(items));
  t.equal((listOf(JSON.parse(high.out.toString()) as Obj).items as Obj[]).filter((i) => (i["metadata"] as Obj | undefined)?.["uid"] === undefined).length, 1, "and is kept by the upper half, which holds \"\"");
});

t.test("with the namespace key, a cluster-scoped object hashes as the empty namespace", async (t) => {
  const items = [pod(inA, {}, "beta"), pod(inA, {}, "alpha"), pod(inB)];
  // beta is in NSLOW, alpha is not; "" (0xcbf2…) is in the upper half.
  const low = await run(LOW, "namespace", podList(items));
  t.same((listOf(JSON.parse(low.out.toString()) as Obj).items as Obj[]).map((i) => (i["metadata"] as Obj)["namespace"] ?? ""), ["beta"]);
  const high = await run([makeRange(1n << 63n, 1n << 64n)], "namespace", podList(items));
  t.same((listOf(JSON.parse(high.out.toString()) as Obj).items as Obj[]).map((i) => (i["metadata"] as Obj)["namespace"] ?? ""), ["alpha", ""]);
});

t.test("a Status body passes through unchanged", async (t) => {
  const rec = readCase("kube-apiserver/gate-on/pods", "invalid-bad-hex");
  t.equal(rec.response.status, 500, "a recorded Status");
  const r = await run(LOW, "uid", rec.response.body);
  t.ok(r.out.equals(rec.response.body), "byte-identical");
  t.equal(r.stats.path, "fast");
  t.equal(r.stats.kind, "Status");
  const compact = Buffer.from(JSON.stringify({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", code: 410 }));
  t.ok((await run(LOW, "uid", chunksOf(compact, 3))).out.equals(compact), "compact, in small chunks");
});

t.test("a JSON object with no items or rows array passes through unchanged", async (t) => {
  for (const doc of [{ kind: "Pod", apiVersion: "v1", metadata: { name: "x", uid: outA } }, { kind: "PodList", items: null, metadata: { resourceVersion: "1" } }, {}]) {
    const body = Buffer.from(JSON.stringify(doc, null, 1));
    const r = await run(LOW, "uid", body);
    t.ok(r.out.equals(body), JSON.stringify(doc));
  }
});

t.test("stats.path is final before the first output byte", async (t) => {
  for (const [sent, want] of [["mine", "fast"], ["other", "filter"]] as const) {
    const f = filter(LOW, "uid", { sentSelector: sent });
    let atFirst: string | undefined;
    f.once("data", () => (atFirst = f.stats.path));
    await runTransform(f, chunksOf(podList([pod(inA), pod(outA)], { resourceVersion: "1", shardInfo: { selector: "mine" } }), 5));
    t.equal(atFirst, want, `sent ${sent}`);
  }
});

t.test("on the fast path the rest of the body is not scanned", async (t) => {
  const head = Buffer.from(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1","shardInfo":{"selector":"mine"}},"items":[`);
  // Not JSON after the head: only an unscanned pass-through lets it through.
  const tail = Buffer.from(`this is not scanned]}`);
  const r = await run(LOW, "uid", [head, tail], { sentSelector: "mine" });
  t.equal(r.error, undefined);
  t.ok(r.out.equals(Buffer.concat([head, tail])));
});

// ---------------------------------------------------------------------------
// Bad input

function cutBody(): Buffer {
  return readCase("kube-apiserver/gate-off/leases", "list-uid-low").response.body;
}

t.test("a body cut at any byte fails with SCAN_TRUNCATED and never comes out as a shorter valid list", async (t) => {
  const body = cutBody();
  const whole = await run(LOW, "uid", body);
  const end = body.lastIndexOf("}") + 1; // cuts after this are complete documents
  let bad = 0;
  for (let at = 0; at < end; at++) {
    const r = await run(LOW, "uid", body.subarray(0, at));
    const ok = r.error instanceof ScanError && r.error.code === "SHARDCAR_ERR_SCAN_TRUNCATED" && !r.ended;
    let parses = true;
    try {
      JSON.parse(r.out.toString());
    } catch {
      parses = false;
    }
    const prefix = whole.out.subarray(0, r.out.length).equals(r.out);
    if (!ok || parses || !prefix) {
      bad++;
      t.fail(`cut at ${at}: error=${String(r.error)} parses=${parses} prefix=${prefix}`);
    }
  }
  t.equal(bad, 0, `all ${end} cut points fail closed`);
});

t.test("garbage fails with SCAN_SYNTAX", async (t) => {
  const cases = [
    "<html><body>502 Bad Gateway</body></html>",
    "\u0000\u0001\u0002",
    `{"kind":"PodList","items":[{"metadata":{"uid":"${inA}"}} junk]}`,
    `{"kind":"PodList","items":[1,,2]}`,
    `{"kind":"PodList","items":[{"metadata":{"uid":"${inA}","x":tru}}]}`,
    `{"kind":"PodList","items":[{"metadata":{"uid":"${inA}"},"spec":{"a":01}}]}`,
    `{"kind":"PodList","items":[{"metadata":{"uid":"${inA}"},"spec":{"a":"\\q"}}]}`,
    `{"kind":"PodList","items":[{"metadata":{"uid":"${inA}"},"spec":{"a":"\\u12G4"}}]}`,
    `{"kind":"PodList","items":[{"metadata":{"uid":"${inA}"},"spec":{"a":"raw\ttab"}}]}`,
    `{"kind":"PodList","items":[{"metadata":{"uid":"${inA}"},"spec":{"a":[1}}]}`,
    `{"kind":"PodList","items":[]}}`,
    `{"kind":"PodList","items":[]} {}`,
  ];
  for (const text of cases) {
    // In 1-byte chunks everything before the bad byte has been pushed already.
    for (const chunks of [[Buffer.from(text)], chunksOf(Buffer.from(text), 1)]) {
      const r = await run(LOW, "uid", chunks);
      t.ok(r.error instanceof ScanError && r.error.code === "SHARDCAR_ERR_SCAN_SYNTAX", `${JSON.stringify(text)} in ${chunks.length} chunks → ${String(r.error)}`);
      t.notOk(r.ended, "the stream did not end cleanly");
      // Even with garbage after a complete document: the close is held back,
      // so what went out is never a whole list.
      t.throws(() => void JSON.parse(r.out.toString()), "what went out is not a complete document");
    }
  }
});

t.test("an empty body fails with SCAN_TRUNCATED", async (t) => {
  const r = await run(LOW, "uid", []);
  t.ok(r.error instanceof ScanError && r.error.code === "SHARDCAR_ERR_SCAN_TRUNCATED");
});

t.test("an item larger than maxItemBytes fails with SCAN_ITEM_TOO_LARGE, held or streamed, however it is chunked", async (t) => {
  const big = "x".repeat(5000);
  // Key first: the item streams before it grows too large. Key last: it is held.
  for (const item of [{ metadata: { uid: inA }, spec: { big } }, { spec: { big }, metadata: { uid: inA } }, { spec: { big }, metadata: { uid: outA } }]) {
    const body = podList([pod(inB), item]);
    for (const size of [body.length, 1024]) {
      const r = await run(LOW, "uid", chunksOf(body, size), { maxItemBytes: 4096 });
      t.ok(r.error instanceof ScanError && r.error.code === "SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE", `chunks of ${size}: ${String(r.error)}`);
    }
  }
  const fits = await run(LOW, "uid", podList([{ metadata: { uid: inA }, spec: { big } }]), { maxItemBytes: 8192 });
  t.equal(fits.error, undefined, "an item under the limit passes");
});

t.test("nesting deeper than maxDepth fails with SCAN_DEPTH", async (t) => {
  const nest = (n: number): string => "[".repeat(n) + "]".repeat(n);
  const doc = (n: number): Buffer => Buffer.from(`{"items":[{"metadata":{"uid":"${inA}"},"spec":${nest(n)}}]}`);
  // The top-level object, items and the item make three levels: 47 more is exactly 50.
  const atLimit = await run(LOW, "uid", doc(47), { maxDepth: 50 });
  t.equal(atLimit.error, undefined, "exactly maxDepth levels pass");
  const over = await run(LOW, "uid", doc(48), { maxDepth: 50 });
  t.ok(over.error instanceof ScanError && over.error.code === "SHARDCAR_ERR_SCAN_DEPTH", `one more fails: ${String(over.error)}`);
  const deep = await run(LOW, "uid", doc(500), { maxDepth: 200 });
  t.ok(deep.error instanceof ScanError && deep.error.code === "SHARDCAR_ERR_SCAN_DEPTH", "past a grown stack too");
  // Objects too, with an empty object innermost (`"a":{}` takes a shortcut in the scanner).
  const objs = (n: number): Buffer => Buffer.from(`{"items":[{"metadata":{"uid":"${inA}"},"spec":${'{"a":'.repeat(n - 1)}{}${"}".repeat(n - 1)}}]}`);
  t.equal((await run(LOW, "uid", objs(47), { maxDepth: 50 })).error, undefined, "objects: exactly maxDepth levels pass");
  const objOver = await run(LOW, "uid", objs(48), { maxDepth: 50 });
  t.ok(objOver.error instanceof ScanError && objOver.error.code === "SHARDCAR_ERR_SCAN_DEPTH", "objects: one more fails");
  const dflt = await run(LOW, "uid", doc(10_001));
  t.ok(dflt.error instanceof ScanError && dflt.error.code === "SHARDCAR_ERR_SCAN_DEPTH", "default limit is Go's 10000");
});
