import t from "tap";
import { randomUUID } from "node:crypto";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { selectPage } from "../../src/devapi/list.ts";
import { MemoryStore, resolveDef, type StoredObject } from "../../src/devapi/store.ts";
import { PODS, type DevApi } from "../../src/devapi/index.ts";
import { call, HIGH, items, LOW, meta, names, pod, withApi, type Json } from "./helpers.ts";

const HALF = 1n << 63n;
const str = (v: unknown): string => (typeof v === "string" ? v : "");
const isLow = (uid: string): boolean => fnv1a64(uid) < HALF;

/** Seeds `n` pods over namespaces a, b, c and returns name → uid. */
function seed(api: DevApi, n: number, labels: (i: number) => Record<string, string> = () => ({})): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < n; i++) {
    const o = api.store.create("pods", pod(["a", "b", "c"][i % 3] as string, `p-${String(i).padStart(3, "0")}`, labels(i)));
    out.set(String(meta(o).name), String(meta(o).uid));
  }
  return out;
}

async function pages(api: DevApi, path: string, startAfter = ""): Promise<Json[]> {
  const out: Json[] = [];
  let cont = startAfter;
  for (let i = 0; i < 1000; i++) {
    const r = await call(api, "GET", path + (cont === "" ? "" : `&continue=${encodeURIComponent(cont)}`));
    if (r.status !== 200) throw new Error(`page ${i}: ${r.status} ${r.text}`);
    out.push(r.body);
    cont = str(meta(r.body).continue);
    if (cont === "") return out;
  }
  throw new Error("too many pages");
}

// ---------------------------------------------------------------------------
// The page decision, pure.

function objs(n: number): StoredObject[] {
  const def = resolveDef(PODS);
  const store = new MemoryStore({ historyLimit: 10 });
  const state = store.register(def);
  for (let i = 0; i < n; i++) store.createIn(state, pod("ns", `o-${String(i).padStart(3, "0")}`), { keepIdentity: false });
  return state.itemsAt(undefined, undefined, undefined);
}

t.test("selectPage (cache path): remainingItemCount counts every key after the page, matching or not", async (t) => {
  const all = objs(20);
  const even = (o: StoredObject): boolean => Number(o.name.slice(2)) % 2 === 0;
  const p = selectPage({ items: all, matches: even, limit: 3, predicateEmpty: true, path: "cache" });
  t.same(p.items.map((o) => o.name), ["o-000", "o-002", "o-004"]);
  t.equal(p.continueAfter, "ns/o-004");
  // 20 keys in scope minus the limit: the 1.36 bug, which a shard selector does not suppress.
  t.equal(p.remainingItemCount, 17);
  const labelled = selectPage({ items: all, matches: even, limit: 3, predicateEmpty: false, path: "cache" });
  t.equal(labelled.remainingItemCount, undefined, "omitted when a label or field selector is present");
});

t.test("selectPage: no continue when the page's last match is the last key", async (t) => {
  const all = objs(4);
  const p = selectPage({ items: all, matches: () => true, limit: 4, predicateEmpty: true, path: "cache" });
  t.equal(p.items.length, 4);
  t.equal(p.continueAfter, undefined);
  const q = selectPage({ items: all, matches: (o) => o.name !== "o-003", limit: 3, predicateEmpty: true, path: "cache" });
  t.equal(q.continueAfter, "ns/o-002", "a non-matching key after the page still means 'more'");
});

t.test("selectPage (etcd path): batches double, and remainingItemCount is the last batch's key count minus the limit", async (t) => {
  const all = objs(200);
  // One key in four matches, so 40 matches need keys up to 156: batches [0,40) [40,120) [120,280).
  const sparse = (o: StoredObject): boolean => Number(o.name.slice(2)) % 4 === 0;
  const p = selectPage({ items: all, matches: sparse, limit: 40, predicateEmpty: true, path: "etcd" });
  t.equal(p.items.length, 40);
  t.equal(p.items.at(-1)?.name, "o-156");
  // The third batch's range starts at key 120: 80 keys, minus the limit of 40.
  t.equal(p.remainingItemCount, 40);
  const unpaged = selectPage({ items: all, matches: sparse, limit: 0, predicateEmpty: true, path: "etcd" });
  t.equal(unpaged.items.length, 50);
  t.equal(unpaged.continueAfter, undefined);
});

// ---------------------------------------------------------------------------
// Over HTTP.

t.test("limit counts items after the shard filter, and the pages visit every in-range pod exactly once", async (t) => {
  const api = await withApi(t);
  const uids = seed(api, 90);
  const low = [...uids].filter(([, u]) => isLow(u)).map(([n]) => n).sort();
  const got = await pages(api, `/api/v1/pods?limit=7&shardSelector=${LOW}`);
  for (const [i, p] of got.entries()) {
    if (i < got.length - 1) t.equal(items(p).length, 7, `page ${i} is full of matching items`);
    t.same(meta(p).shardInfo, { selector: "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')" }, `shardInfo on page ${i}`);
  }
  const seen = got.flatMap(names);
  t.same([...seen].sort(), low);
  t.equal(new Set(seen).size, seen.length, "no duplicates");
});

t.test("remainingItemCount on a sharded page counts unfiltered keys (the 1.36 bug); a label selector removes it", async (t) => {
  const api = await withApi(t);
  seed(api, 60, () => ({ x: "y" }));
  const r = await call(api, "GET", `/api/v1/pods?limit=5&shardSelector=${LOW}`);
  // The first page's scope is all 60 keys; the server subtracts the limit and ignores the shard filter.
  t.equal(meta(r.body).remainingItemCount, 60 - 5);
  const labelled = await call(api, "GET", `/api/v1/pods?limit=5&labelSelector=x%3Dy&shardSelector=${LOW}`);
  t.equal(meta(labelled.body).remainingItemCount, undefined);
  t.ok(meta(labelled.body).continue, "still paged");
});

t.test("resourceVersion=0 ignores limit", async (t) => {
  const api = await withApi(t);
  seed(api, 30);
  const r = await call(api, "GET", "/api/v1/pods?limit=5&resourceVersion=0");
  t.equal(items(r.body).length, 30);
  t.equal(meta(r.body).continue, undefined);
});

t.test("continue tokens carry no selector: a page requested without one comes back unfiltered", async (t) => {
  const api = await withApi(t);
  const uids = seed(api, 60);
  const first = await call(api, "GET", `/api/v1/pods?limit=5&shardSelector=${LOW}`);
  const cont = encodeURIComponent(String(meta(first.body).continue));
  const plain = await call(api, "GET", `/api/v1/pods?limit=100&continue=${cont}`);
  t.ok(names(plain.body).some((n) => !isLow(uids.get(n) ?? "")), "out-of-range pods appear");
  t.equal(meta(plain.body).shardInfo, undefined);
  const high = await call(api, "GET", `/api/v1/pods?limit=100&continue=${cont}&shardSelector=${HIGH}`);
  t.ok(names(high.body).every((n) => !isLow(uids.get(n) ?? "")), "another selector just resumes after the key");
});

t.test("continue pages are a snapshot: writes between pages do not show up", async (t) => {
  const api = await withApi(t);
  seed(api, 30);
  const first = await call(api, "GET", "/api/v1/pods?limit=10");
  const rv = String(meta(first.body).resourceVersion);
  api.store.create("pods", pod("c", "zz-new"));
  api.store.delete("pods", "c", "p-029");
  api.store.patch("pods", "c", "p-026", { metadata: { labels: { changed: "yes" } } });
  const rest = await pages(api, "/api/v1/pods?limit=10", String(meta(first.body).continue));
  const seen = [...names(first.body), ...rest.flatMap(names)];
  t.equal(seen.length, 30, "the 30 pods that existed at the first page");
  t.notOk(seen.includes("zz-new"));
  t.ok(seen.includes("p-029"), "deleted after the first page, still listed");
  for (const p of rest) t.equal(meta(p).resourceVersion, rv, "every page at the first page's resourceVersion");
  const p26 = rest.flatMap(items).find((i) => meta(i).name === "p-026");
  t.equal((meta(p26).labels as Json | undefined)?.changed, undefined, "the version current at the snapshot");
  t.equal(api.store.get("pods", "c", "p-026")?.metadata?.labels?.changed, "yes", "while the live object has changed");
});

t.test("a continue token older than the history is 410 Expired with a fresh inconsistent token", async (t) => {
  const api = await withApi(t, { watchHistory: 3 });
  seed(api, 20);
  const first = await call(api, "GET", "/api/v1/pods?limit=5");
  for (let i = 0; i < 5; i++) api.store.patch("pods", "a", "p-000", { metadata: { labels: { n: String(i) } } });
  const r = await call(api, "GET", `/api/v1/pods?limit=5&continue=${encodeURIComponent(String(meta(first.body).continue))}`);
  t.equal(r.status, 410);
  t.match(r.body, { kind: "Status", reason: "Expired", code: 410 });
  const next = str(meta(r.body).continue);
  t.not(next, "", "the Status carries a continue token");
  const resumed = await call(api, "GET", `/api/v1/pods?limit=100&continue=${encodeURIComponent(next)}`);
  t.equal(resumed.status, 200);
  t.equal(items(resumed.body).length, 15, "resumes after the first page, at the latest version");
});

t.test("resourceVersionMatch=Exact lists the state at that version, with type meta on items (the etcd path)", async (t) => {
  const api = await withApi(t);
  seed(api, 10);
  const rv = api.store.resourceVersion;
  api.store.create("pods", pod("a", "later"));
  api.store.delete("pods", "b", "p-001");
  api.store.patch("pods", "c", "p-002", { metadata: { labels: { v: "2" } } });
  const r = await call(api, "GET", `/api/v1/pods?resourceVersion=${rv}&resourceVersionMatch=Exact`);
  t.equal(r.status, 200);
  t.equal(meta(r.body).resourceVersion, rv);
  t.same(names(r.body).sort(), [...Array(10).keys()].map((i) => `p-${String(i).padStart(3, "0")}`));
  t.equal((meta(items(r.body).find((i) => meta(i).name === "p-002")).labels as Json | undefined)?.v, undefined, "p-002 as it was");
  t.equal(items(r.body)[0]?.kind, "Pod");
  const now = await call(api, "GET", `/api/v1/pods?resourceVersion=${rv}&resourceVersionMatch=NotOlderThan`);
  t.equal(meta(now.body).resourceVersion, api.store.resourceVersion, "NotOlderThan serves the latest");
  t.ok(names(now.body).includes("later"));
});

t.test("Exact at a version older than the history is 410; newer than the server is 504", async (t) => {
  const api = await withApi(t, { watchHistory: 2 });
  seed(api, 5);
  const r = await call(api, "GET", "/api/v1/pods?resourceVersion=1&resourceVersionMatch=Exact");
  t.equal(r.status, 410);
  t.match(r.body, { reason: "Expired" });
  const future = await call(api, "GET", `/api/v1/pods?resourceVersion=${Number(api.store.resourceVersion) + 10}`);
  t.equal(future.status, 504);
  t.match(future.body, { reason: "Timeout", details: { causes: [{ reason: "ResourceVersionTooLarge" }] } });
});

t.test("forbidden option combinations are 422 Invalid ListOptions", async (t) => {
  const api = await withApi(t);
  for (const q of ["resourceVersionMatch=Exact", "resourceVersion=0&resourceVersionMatch=Exact", "sendInitialEvents=true", "watch=1&resourceVersionMatch=NotOlderThan"]) {
    const r = await call(api, "GET", `/api/v1/pods?${q}`);
    t.equal(r.status, 422, q);
    t.match(r.body, { reason: "Invalid", message: /^ListOptions\.meta\.k8s\.io "" is invalid: / }, q);
  }
  const badLimit = await call(api, "GET", "/api/v1/pods?limit=x");
  t.equal(badLimit.status, 400);
});

t.test("shardInfo: on typed lists only; Table, PartialObjectMetadataList and custom resources are filtered without it", async (t) => {
  const api = await withApi(t);
  const uids = seed(api, 40);
  api.store.create("namespaces", { metadata: { name: "a" } });
  for (let i = 0; i < 20; i++) api.store.create("shardrings", { apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { namespace: "a", name: `r-${i}` }, spec: {} });
  const table = await call(api, "GET", `/api/v1/pods?shardSelector=${LOW}`, undefined, { accept: "application/json;as=Table;v=v1;g=meta.k8s.io" });
  t.equal(table.body.kind, "Table");
  t.equal(meta(table.body).shardInfo, undefined);
  const rows = table.body.rows as Json[];
  t.ok(rows.every((r) => isLow(String(meta(r.object).uid))), "Table rows filtered");
  t.equal(rows.length, [...uids.values()].filter(isLow).length);
  const pom = await call(api, "GET", `/api/v1/pods?shardSelector=${LOW}`, undefined, { accept: "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1" });
  t.equal(pom.body.kind, "PartialObjectMetadataList");
  t.equal(meta(pom.body).shardInfo, undefined);
  t.ok(items(pom.body).every((i) => i.kind === "PartialObjectMetadata" && isLow(String(meta(i).uid))));
  const cr = await call(api, "GET", `/apis/shardcar.io/v1alpha1/shardrings?shardSelector=${LOW}`);
  t.same(Object.keys(cr.body), ["apiVersion", "items", "kind", "metadata"], "unstructured list: sorted keys, metadata last");
  t.equal(meta(cr.body).shardInfo, undefined);
  t.ok(items(cr.body).every((i) => isLow(String(meta(i).uid))));
  const typed = await call(api, "GET", `/api/v1/pods?shardSelector=${LOW}&limit=1000`);
  t.same(Object.keys(typed.body), ["kind", "apiVersion", "metadata", "items"], "typed list: metadata before items");
  t.ok(meta(typed.body).shardInfo);
});

t.test("the gate: off ignores even garbage; mixed alternates per request; changes apply at once", async (t) => {
  const api = await withApi(t, { gate: "off" });
  const uids = seed(api, 30);
  const lowCount = [...uids.values()].filter(isLow).length;
  const garbage = await call(api, "GET", "/api/v1/pods?shardSelector=this%20is%20not%20cel");
  t.equal(garbage.status, 200);
  t.equal(items(garbage.body).length, 30);
  api.gate = "on";
  const bad = await call(api, "GET", "/api/v1/pods?shardSelector=this%20is%20not%20cel");
  t.equal(bad.status, 500);
  t.match(bad.body, { message: /^invalid shard selector: CEL parse error: / });
  t.equal(bad.body.reason, undefined, "no reason, as recorded");
  api.gate = "mixed";
  const counts: number[] = [];
  for (let i = 0; i < 4; i++) counts.push(items((await call(api, "GET", `/api/v1/pods?shardSelector=${LOW}`)).body).length);
  t.same(counts, [lowCount, 30, lowCount, 30]);
});

t.test("namespaced URL, field and label selectors are ANDed with the shard selector", async (t) => {
  const api = await withApi(t);
  const uids = seed(api, 60, (i) => ({ even: String(i % 2 === 0) }));
  const want = [...uids]
    .filter(([n, u]) => isLow(u) && Number(n.slice(2)) % 3 === 1 && Number(n.slice(2)) % 2 === 0)
    .map(([n]) => n)
    .sort();
  const ns = await call(api, "GET", `/api/v1/namespaces/b/pods?labelSelector=even%3Dtrue&shardSelector=${LOW}`);
  t.same(names(ns.body).sort(), want);
  const fs = await call(api, "GET", `/api/v1/pods?fieldSelector=metadata.namespace%3Db&labelSelector=even%3Dtrue&shardSelector=${LOW}`);
  t.same(names(fs.body).sort(), want);
  const one = await call(api, "GET", "/api/v1/pods?fieldSelector=metadata.name%3Dp-004");
  t.same(names(one.body), ["p-004"]);
});

t.test("|| is a union without duplicates, and namespace ranges shard by namespace", async (t) => {
  const api = await withApi(t);
  seed(api, 50);
  const overlap = encodeURIComponent(
    "shardRange(object.metadata.uid, '0x0000000000000000', '0xc000000000000000') || shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')",
  );
  const r = await call(api, "GET", `/api/v1/pods?shardSelector=${overlap}`);
  const n = names(r.body);
  t.equal(new Set(n).size, n.length);
  const all = await call(api, "GET", "/api/v1/pods");
  t.equal(n.length, items(all.body).filter((i) => fnv1a64(String(meta(i).uid)) < 0xc000000000000000n).length);
  const nsHigh = encodeURIComponent("shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')");
  const byNs = await call(api, "GET", `/api/v1/pods?shardSelector=${nsHigh}`);
  const want = items(all.body).filter((i) => fnv1a64(String(meta(i).namespace)) >= HALF).length;
  t.equal(items(byNs.body).length, want);
});

t.test("a random uid lands in exactly one half", async (t) => {
  const api = await withApi(t);
  const o = api.store.create("pods", { metadata: { name: "x", namespace: "a", uid: randomUUID() } });
  const low = names((await call(api, "GET", `/api/v1/pods?shardSelector=${LOW}`)).body);
  const high = names((await call(api, "GET", `/api/v1/pods?shardSelector=${HIGH}`)).body);
  t.equal(low.length + high.length, 1);
  t.equal(low.length === 1, isLow(String(meta(o).uid)));
});
