/**
 * Issue 8, part 2: the differential check. devapi (our stand-in) and the real
 * k8s.io/apiserver get the same corpus of requests, over the same objects
 * (devapi is loaded with copies of the real server's objects, uids included,
 * so hash ranges pick the same objects on both): lists, pages, selectors,
 * invalid selectors, watches with the same scripted writes, watch-list, Table
 * and PartialObjectMetadataList. Compared: status, Content-Type, kind,
 * `shardInfo`, error code/reason/message, and the set of objects by hash range.
 *
 * Every difference is printed as a table. The lane fails on a difference that
 * is not in KNOWN_DIFFERENCES (support/differences.ts, mirrored in
 * docs/testing.md), and on a listed one that no longer shows.
 */
import t from "tap";
import { startDevApi, type DevApi, type KubeObject as DevObject } from "../../src/devapi/index.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, type Range } from "../../src/shard/range.ts";
import { parseSelector } from "../../src/shard/selector.ts";
import { readCase } from "../support/fixture-io.ts";
import { NAMESPACES, WIDGET, WIDGETS_PATH, pod, widget } from "./support/dataset.ts";
import { KNOWN_DIFFERENCES } from "./support/differences.ts";
import { call, callJson, listAll, realApiEnv, type KubeMeta, type KubeObject, type Reply, type Target } from "./support/realapi.ts";
import { openWatch, type OpenWatch, type WatchEvent } from "./support/watch.ts";

const env = realApiEnv();
const real: Target = { url: env.url, caPem: env.caPem, token: env.token };

const LOW = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
const HIGH = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";
const OR = "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')";
const NSLOW = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')";
const NSHIGH = "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')";
const OVERLAP = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x4000000000000000', '0xc000000000000000')";
const FULL = "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')";
const WHITESPACE = "shardRange( object.metadata.uid ,\n  '0x0000000000000000',   '0x8000000000000000' )";
const TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const POM = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
const INVALID = ["bad-hex", "start-gt-end", "empty-range", "unknown-field", "fieldselector-style-path", "garbage", "unterminated", "short-hex", "uppercase-hex", "no-0x-prefix", "end-over-2pow64", "and-operator", "other-function", "mixed-keys", "wrong-arity", "whitespace-only", "double-quoted"];

type Fields = Record<string, string>;

interface Side {
  readonly name: "devapi" | "realapi";
  readonly target: Target;
}

const q = (params: Record<string, string>): string => new URLSearchParams(params).toString();

/** The ranges a selector text picks, or undefined when absent/invalid. */
function rangesOf(sel: string | undefined): { key: "uid" | "namespace"; ranges: readonly Range[] } | undefined {
  if (sel === undefined || sel.trim() === "") return undefined;
  try {
    return parseSelector(sel);
  } catch {
    return undefined;
  }
}

function inSel(sel: ReturnType<typeof rangesOf>, m: KubeMeta): boolean {
  if (sel === undefined) return true;
  return contains(sel.ranges, fnv1a64((sel.key === "uid" ? m.uid : m.namespace) ?? ""));
}

interface ParsedBody {
  kind?: string;
  metadata?: KubeMeta;
  items?: Array<{ metadata?: KubeMeta; kind?: string }>;
  rows?: Array<{ cells?: unknown[]; object?: { kind?: string; metadata?: KubeMeta } }>;
  columnDefinitions?: Array<{ name?: string; type?: string }>;
  code?: number;
  reason?: string;
  message?: string;
}

/** What is compared of one list-like answer. */
function summarise(r: Reply, sel: ReturnType<typeof rangesOf>, gate: "on" | "off"): Fields {
  const f: Fields = { status: String(r.status), "content-type": String(r.headers["content-type"] ?? "-").replace(/;\s*charset=utf-8$/i, "") };
  let b: ParsedBody;
  try {
    b = JSON.parse(r.body.toString("utf8")) as ParsedBody;
  } catch {
    f["body"] = "not JSON";
    return f;
  }
  f["kind"] = b.kind ?? "-";
  if (b.kind === "Status") {
    f["code"] = String(b.code ?? "-");
    f["reason"] = b.reason === undefined || b.reason === "" ? "-" : b.reason;
    f["message"] = b.message ?? "-";
    return f;
  }
  f["format"] = r.body.subarray(0, 3).toString("utf8").startsWith("{\n") ? "pretty" : "compact";
  f["shardInfo"] = b.metadata?.shardInfo?.selector ?? "-";
  f["continue"] = (b.metadata?.continue ?? "") === "" ? "no" : "yes";
  f["remainingItemCount"] = b.metadata?.remainingItemCount === undefined ? "-" : String(b.metadata.remainingItemCount);
  const metas = b.kind === "Table" ? (b.rows ?? []).map((row) => row.object?.metadata ?? {}) : (b.items ?? []).map((i) => i.metadata ?? {});
  f["objects"] = objects(metas);
  f["order"] = metas.map((m) => `${m.namespace ?? ""}/${m.name ?? ""}`).join(" ");
  // Whether every object is in the requested ranges (only meaningful with the gate on).
  if (gate === "on" && sel !== undefined) f["all in range"] = metas.every((m) => inSel(sel, m)) ? "yes" : "no";
  if (b.kind === "Table") {
    f["columns"] = (b.columnDefinitions ?? []).map((c) => `${c.name ?? ""}:${c.type ?? ""}`).join(",");
    f["cell types"] = [...new Set((b.rows ?? []).map((row) => (row.cells ?? []).map((c) => (c === null ? "null" : typeof c)).join(",")))].join(" | ");
    f["row object kind"] = [...new Set((b.rows ?? []).map((row) => row.object?.kind ?? "-"))].join(",");
  }
  return f;
}

/** A sorted, comparable rendering of a set of objects (uids are shared by both servers). */
function objects(metas: readonly KubeMeta[]): string {
  return [...metas.map((m) => m.uid ?? "")].sort().join(",");
}

async function get(side: Side, path: string, accept = "application/json", ua = "shardcar-differential"): Promise<Reply> {
  return call(side.target, path, { headers: { accept, "user-agent": ua } });
}

interface Case {
  readonly id: string;
  run(side: Side): Promise<Fields>;
}

function listCase(id: string, path: string, params: Record<string, string>, accept?: string, ua?: string): Case {
  const sel = rangesOf(params["shardSelector"]);
  const qs = q(params);
  return { id, run: async (side) => summarise(await get(side, qs === "" ? path : `${path}?${qs}`, accept, ua), sel, env.gate) };
}

/** Follows `continue` (the selector resent on every page, as the KEP says a client must). */
function pagesCase(id: string, path: string, params: Record<string, string>, accept?: string, nextParams?: Record<string, string>): Case {
  const sel = rangesOf(params["shardSelector"]);
  return {
    id,
    run: async (side) => {
      const pages: Fields[] = [];
      let cont = "";
      for (let i = 0; i < 40; i++) {
        const p = cont === "" ? params : { ...(nextParams ?? params), continue: cont };
        const r = await get(side, `${path}?${q(p)}`, accept);
        pages.push(summarise(r, sel, env.gate));
        const b = JSON.parse(r.body.toString("utf8")) as ParsedBody;
        cont = b.metadata?.continue ?? "";
        if (cont === "" || r.status !== 200) break;
      }
      const all = pages.map((p) => p["objects"] ?? "").filter((s) => s !== "").join(",");
      return {
        status: pages.map((p) => p["status"]).join(","),
        pages: String(pages.length),
        "page sizes": pages.map((p) => (p["objects"] === "" ? 0 : (p["objects"] ?? "").split(",").length)).join(","),
        remainingItemCount: pages.map((p) => p["remainingItemCount"]).join(","),
        shardInfo: [...new Set(pages.map((p) => p["shardInfo"]))].join(" | "),
        objects: all.split(",").filter((s) => s !== "").sort().join(","),
        ...(env.gate === "on" && sel !== undefined ? { "all in range": pages.every((p) => p["all in range"] !== "no") ? "yes" : "no" } : {}),
      };
    },
  };
}

/** The recorded selector of an invalid-* case in the kube-apiserver transcripts. */
function recordedSelector(name: string): string {
  return readCase("kube-apiserver/gate-on/pods", `invalid-${name}`).request.query.get("shardSelector") ?? "";
}

const LIST_CASES: Case[] = [
  listCase("pods/list-all", "/api/v1/pods", {}),
  listCase("pods/list-uid-low", "/api/v1/pods", { shardSelector: LOW }),
  listCase("pods/list-uid-high", "/api/v1/pods", { shardSelector: HIGH }),
  listCase("pods/list-uid-or", "/api/v1/pods", { shardSelector: OR }),
  listCase("pods/list-uid-overlapping-or", "/api/v1/pods", { shardSelector: OVERLAP }),
  listCase("pods/list-uid-full-range", "/api/v1/pods", { shardSelector: FULL }),
  listCase("pods/list-uid-whitespace-variant", "/api/v1/pods", { shardSelector: WHITESPACE }),
  listCase("pods/list-ns-low", "/api/v1/pods", { shardSelector: NSLOW }),
  listCase("pods/list-ns-high", "/api/v1/pods", { shardSelector: NSHIGH }),
  listCase("pods/list-ns-alpha-uid-low", "/api/v1/namespaces/alpha/pods", { shardSelector: LOW }),
  listCase("pods/list-uid-low-rv0", "/api/v1/pods", { resourceVersion: "0", shardSelector: LOW }),
  listCase("pods/list-uid-low-rvempty", "/api/v1/pods", { resourceVersion: "", shardSelector: LOW }),
  listCase("pods/list-uid-low-labelsel", "/api/v1/pods", { labelSelector: "tier=web", shardSelector: LOW }),
  listCase("pods/list-uid-low-fieldsel", "/api/v1/pods", { fieldSelector: "metadata.namespace=beta", shardSelector: LOW }),
  listCase("pods/list-uid-low-notolderthan-limit0", "/api/v1/pods", { resourceVersion: "0", resourceVersionMatch: "NotOlderThan", limit: "0", shardSelector: LOW }),
  listCase("pods/empty-param", "/api/v1/pods", { shardSelector: "" }),
  listCase("pods/list-uid-low-curl-pretty", "/api/v1/pods", { shardSelector: LOW }, "application/json", "curl/8.5.0"),
  listCase("pods/get-single-with-shardselector", "/api/v1/namespaces/alpha/pods/pod-000", { shardSelector: LOW }),
  listCase("pods/get-single-with-invalid-shardselector", "/api/v1/namespaces/alpha/pods/pod-000", { shardSelector: recordedSelector("bad-hex") }),
  ...INVALID.map((name) => listCase(`pods/invalid-${name}`, "/api/v1/pods", { shardSelector: recordedSelector(name) })),
  listCase("pods/table-uid-low", "/api/v1/pods", { shardSelector: LOW }, "application/json;as=Table;v=v1;g=meta.k8s.io"),
  listCase("pods/kubectl-table-list-uid-low", "/api/v1/pods", { limit: "500", shardSelector: LOW }, TABLE, "kubectl-1.36/v1.36.4 (linux/amd64) kubernetes/bb826b1"),
  listCase("pods/kubectl-table-list-uid-low-includeObject-Object", "/api/v1/pods", { includeObject: "Object", limit: "500", shardSelector: LOW }, TABLE),
  listCase("pods/pom-uid-low", "/api/v1/pods", { shardSelector: LOW }, POM),
  listCase("pods/pom-uid-high", "/api/v1/pods", { shardSelector: HIGH }, POM),
  pagesCase("pods/page-uid-low-etcd", "/api/v1/pods", { limit: "50", shardSelector: LOW }),
  pagesCase("pods/page-uid-high-etcd", "/api/v1/pods", { limit: "50", shardSelector: HIGH }),
  pagesCase("pods/page-uid-low-rv0", "/api/v1/pods", { limit: "50", resourceVersion: "0", shardSelector: LOW }),
  pagesCase("pods/page-narrow-range-limit5", "/api/v1/pods", { limit: "5", shardSelector: "shardRange(object.metadata.uid, '0x0000000000000000', '0x0800000000000000')" }),
  pagesCase("pods/page-labelselector-only-limit50", "/api/v1/pods", { labelSelector: "shard-test=true", limit: "50" }),
  pagesCase("pods/page-uid-low-plus-labelselector-limit50", "/api/v1/pods", { labelSelector: "shard-test=true", limit: "50", shardSelector: LOW }),
  pagesCase("pods/table-page-uid-low-limit50", "/api/v1/pods", { limit: "50", shardSelector: LOW }, TABLE),
  pagesCase("pods/continue-mismatch-low-then-high", "/api/v1/pods", { limit: "50", shardSelector: LOW }, undefined, { limit: "50", shardSelector: HIGH }),
  pagesCase("pods/continue-mismatch-low-then-none", "/api/v1/pods", { limit: "50", shardSelector: LOW }, undefined, { limit: "50" }),
  listCase("configmaps/list-uid-low", "/api/v1/configmaps", { shardSelector: LOW }),
  listCase("configmaps/list-ns-high", "/api/v1/configmaps", { shardSelector: NSHIGH }),
  listCase("configmaps/table-uid-low", "/api/v1/configmaps", { shardSelector: LOW }, TABLE),
  listCase("leases/list-uid-low", "/apis/coordination.k8s.io/v1/leases", { shardSelector: LOW }),
  listCase("leases/pom-uid-low", "/apis/coordination.k8s.io/v1/leases", { shardSelector: LOW }, POM),
  listCase("widgets/list-all", WIDGETS_PATH, {}),
  listCase("widgets/list-uid-low", WIDGETS_PATH, { shardSelector: LOW }),
  listCase("widgets/list-ns-high", WIDGETS_PATH, { shardSelector: NSHIGH }),
  listCase("widgets/table-uid-low", WIDGETS_PATH, { shardSelector: LOW }, TABLE),
  listCase("widgets/pom-uid-low", WIDGETS_PATH, { shardSelector: LOW }, POM),
  listCase("widgets/invalid-bad-hex", WIDGETS_PATH, { shardSelector: recordedSelector("bad-hex") }),
  pagesCase("widgets/page-uid-low-limit40", WIDGETS_PATH, { limit: "40", shardSelector: LOW }),
];

// ------------------------------------------------------------------ watches

interface WatchSpec {
  readonly id: string;
  readonly path: string;
  readonly params: (rv: string) => Record<string, string>;
  readonly accept?: string;
  /** Which resource the scripted writes go to. */
  readonly writes: "pods" | "widgets";
}

const WATCHES: WatchSpec[] = [
  { id: "pods/watch-uid-low", path: "/api/v1/pods", params: (rv) => ({ allowWatchBookmarks: "true", resourceVersion: rv, shardSelector: LOW, watch: "true" }), writes: "pods" },
  { id: "pods/watch-uid-high", path: "/api/v1/pods", params: (rv) => ({ resourceVersion: rv, shardSelector: HIGH, watch: "1" }), writes: "pods" },
  { id: "pods/watch-ns-high", path: "/api/v1/pods", params: (rv) => ({ resourceVersion: rv, shardSelector: NSHIGH, watch: "true" }), writes: "pods" },
  { id: "pods/watch-noselector", path: "/api/v1/pods", params: (rv) => ({ resourceVersion: rv, watch: "true" }), writes: "pods" },
  { id: "pods/watch-namespaced-alpha-uid-low", path: "/api/v1/namespaces/alpha/pods", params: (rv) => ({ resourceVersion: rv, shardSelector: LOW, watch: "true" }), writes: "pods" },
  { id: "pods/watch-rv0-uid-low", path: "/api/v1/pods", params: () => ({ resourceVersion: "0", shardSelector: LOW, watch: "true" }), writes: "pods" },
  { id: "pods/watchlist-uid-low", path: "/api/v1/pods", params: () => ({ allowWatchBookmarks: "true", resourceVersionMatch: "NotOlderThan", sendInitialEvents: "true", shardSelector: LOW, watch: "true" }), writes: "pods" },
  { id: "pods/kubectl-table-watch-uid-low", path: "/api/v1/pods", params: (rv) => ({ resourceVersion: rv, shardSelector: LOW, watch: "true" }), accept: TABLE, writes: "pods" },
  { id: "pods/pom-watch-uid-low", path: "/api/v1/pods", params: (rv) => ({ resourceVersion: rv, shardSelector: LOW, watch: "true" }), accept: "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io", writes: "pods" },
  { id: "widgets/watch-uid-low", path: WIDGETS_PATH, params: (rv) => ({ allowWatchBookmarks: "true", resourceVersion: rv, shardSelector: LOW, watch: "true" }), writes: "widgets" },
  { id: "widgets/watchlist-uid-low", path: WIDGETS_PATH, params: () => ({ allowWatchBookmarks: "true", resourceVersionMatch: "NotOlderThan", sendInitialEvents: "true", shardSelector: LOW, watch: "true" }), writes: "widgets" },
];

const podsPath = (ns: string): string => `/api/v1/namespaces/${ns}/pods`;
const widgetsPath = (ns: string): string => `/apis/${WIDGET.group}/${WIDGET.version}/namespaces/${ns}/${WIDGET.plural}`;

/** The same writes on both servers: the real one first, then devapi with the uid the real one chose. */
class Writer {
  readonly #api: DevApi;
  readonly names = new Set<string>();
  constructor(api: DevApi) {
    this.#api = api;
  }
  async create(kind: "pods" | "widgets", obj: KubeObject): Promise<KubeObject> {
    const ns = obj.metadata?.namespace ?? "";
    const made = await callJson(real, "POST", kind === "pods" ? podsPath(ns) : widgetsPath(ns), obj);
    this.#api.store.create(kind === "pods" ? "pods" : WIDGET_GVR, copyForDevapi(made));
    this.names.add(`${ns}/${obj.metadata?.name ?? ""}`);
    return made;
  }
  async patch(kind: "pods" | "widgets", ns: string, name: string, patch: KubeObject): Promise<void> {
    await callJson(real, "PATCH", `${kind === "pods" ? podsPath(ns) : widgetsPath(ns)}/${name}`, patch, "application/merge-patch+json");
    this.#api.store.patch(kind === "pods" ? "pods" : WIDGET_GVR, ns, name, patch, "merge");
  }
  async delete(kind: "pods" | "widgets", ns: string, name: string): Promise<void> {
    await callJson(real, "DELETE", `${kind === "pods" ? podsPath(ns) : widgetsPath(ns)}/${name}`);
    this.#api.store.delete(kind === "pods" ? "pods" : WIDGET_GVR, ns, name);
  }
}

const WIDGET_GVR = { group: WIDGET.group, version: WIDGET.version, resource: WIDGET.plural };

/** A real object as devapi should hold it: same uid, name, labels, content; devapi picks its own resourceVersion. */
function copyForDevapi(o: KubeObject): DevObject {
  const meta: KubeMeta & { resourceVersion?: string } = { ...(o.metadata ?? {}) };
  delete meta.resourceVersion;
  return { ...(o as DevObject), metadata: meta as DevObject["metadata"] };
}

function watchFields(w: OpenWatch, spec: WatchSpec, sel: ReturnType<typeof rangesOf>, scripted: ReadonlySet<string>, sentinel: string): Fields {
  const f: Fields = { status: String(w.status), "content-type": String(w.headers["content-type"] ?? "-").replace(/;\s*charset=utf-8$/i, "") };
  if (w.status !== 200) {
    const b = JSON.parse(w.body.toString("utf8")) as ParsedBody;
    return { ...f, kind: b.kind ?? "-", code: String(b.code ?? "-"), reason: b.reason === undefined || b.reason === "" ? "-" : b.reason, message: b.message ?? "-" };
  }
  const meta = (e: WatchEvent): KubeMeta => e.rowMeta ?? e.meta;
  const name = (e: WatchEvent): string => `${meta(e).namespace ?? ""}/${meta(e).name ?? ""}`;
  const ofScript = (e: WatchEvent): boolean => scripted.has(name(e)) || name(e) === sentinel;
  const deletionModified = (e: WatchEvent): boolean => e.type === "MODIFIED" && deletionSet(e);
  const mutations = w.events.filter((e) => e.type !== "BOOKMARK" && e.type !== "ERROR");
  const initial = mutations.filter((e) => !ofScript(e));
  f["event kinds"] = [...new Set(w.events.filter((e) => e.type !== "BOOKMARK").map((e) => e.kind))].join(",") || "-";
  f["initial objects"] = initial.length === 0 ? "-" : objects(initial.map(meta));
  f["initial types"] = [...new Set(initial.map((e) => e.type))].join(",") || "-";
  f["events"] = mutations.filter((e) => ofScript(e) && !deletionModified(e)).map((e) => `${e.type} ${name(e)}`).join("; ");
  f["deletion MODIFIED events"] = String(mutations.filter((e) => ofScript(e) && deletionModified(e)).length);
  if (env.gate === "on" && sel !== undefined) f["all in range"] = mutations.every((e) => inSel(sel, meta(e))) ? "yes" : "no";
  const end = w.events.find((e) => e.type === "BOOKMARK" && e.meta.annotations?.["k8s.io/initial-events-end"] === "true");
  f["initial-events-end bookmark"] = end === undefined ? "-" : `after ${w.events.indexOf(end)} events; annotations ${JSON.stringify(end.meta.annotations)}`;
  f["errors"] = String(w.events.filter((e) => e.type === "ERROR").length);
  if (spec.accept === TABLE) {
    const tables = w.events.filter((e) => e.kind === "Table");
    f["columnDefinitions per event"] = tables.length === 0 ? "-" : `first ${tables[0]?.columns ?? 0}, later ${[...new Set(tables.slice(1).map((e) => e.columns ?? 0))].join(",") || "-"}`;
  }
  return f;
}

function deletionSet(e: WatchEvent): boolean {
  const m = (e.rowMeta ?? e.meta) as KubeMeta & { deletionTimestamp?: string };
  return m.deletionTimestamp !== undefined && m.deletionTimestamp !== "";
}

// ------------------------------------------------------------------ the check

interface Difference {
  readonly id: string;
  readonly field: string;
  readonly devapi: string;
  readonly realapi: string;
  known?: string;
}

function short(v: string, n = 70): string {
  const one = v.replace(/\s+/g, " ");
  return one.length <= n ? one : `${one.slice(0, n - 1)}…`;
}

function describe(field: string, a: string, b: string): [string, string] {
  if (field === "objects" || field === "initial objects" || field === "order") {
    const sa = new Set(a.split(field === "order" ? " " : ",").filter((x) => x !== "" && x !== "-"));
    const sb = new Set(b.split(field === "order" ? " " : ",").filter((x) => x !== "" && x !== "-"));
    const onlyA = [...sa].filter((x) => !sb.has(x)).length;
    const onlyB = [...sb].filter((x) => !sa.has(x)).length;
    if (onlyA === 0 && onlyB === 0 && field === "order") return [`same ${sa.size}, other order`, `same ${sb.size}`];
    return [`${sa.size} (${onlyA} only here)`, `${sb.size} (${onlyB} only here)`];
  }
  return [short(a), short(b)];
}

/** `SHARDCAR_DIFF_DUMP=1`: print every compared field of every case (for whoever fixes devapi). */
const DUMP = process.env["SHARDCAR_DIFF_DUMP"] === "1";

function compare(id: string, d: Fields, r: Fields): Difference[] {
  if (DUMP) console.log(`# ${id}\n${Object.keys({ ...d, ...r }).map((k) => `#   ${k}: devapi ${short(d[k] ?? "(absent)", 120)} | real ${short(r[k] ?? "(absent)", 120)}`).join("\n")}`);
  const out: Difference[] = [];
  for (const field of new Set([...Object.keys(d), ...Object.keys(r)])) {
    const a = d[field] ?? "(absent)";
    const b = r[field] ?? "(absent)";
    if (a === b) continue;
    const [da, db] = describe(field, a, b);
    out.push({ id, field, devapi: da, realapi: db });
  }
  return out;
}

function table(diffs: readonly Difference[]): string {
  if (diffs.length === 0) return "no differences";
  const rows = [["case", "field", "devapi", "real k8s.io/apiserver", "known"], ...diffs.map((x) => [x.id, x.field, x.devapi, x.realapi, x.known === undefined ? "NEW" : "yes"])];
  const w = rows[0]?.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? "").length))) ?? [];
  return rows.map((row) => row.map((c, i) => c.padEnd(w[i] ?? 0)).join(" | ")).join("\n");
}

t.test(`gate ${env.gate}: devapi answers the differential corpus like the real k8s.io/apiserver, except for the documented differences`, async (t) => {
  const api = await startDevApi({ gate: env.gate });
  t.teardown(() => api.close());
  api.registerResource({ group: WIDGET.group, version: WIDGET.version, resource: WIDGET.plural, kind: WIDGET.kind, namespaced: true, encoding: "unstructured" });
  // The real server's objects, copied with their uids.
  const copied: Record<string, number> = {};
  for (const [res, path] of [["pods", "/api/v1/pods"], ["configmaps", "/api/v1/configmaps"], ["leases", "/apis/coordination.k8s.io/v1/leases"]] as const) {
    const { items } = await listAll(real, path);
    for (const o of items) api.store.create(res, copyForDevapi({ ...o, kind: res === "pods" ? "Pod" : res === "configmaps" ? "ConfigMap" : "Lease", apiVersion: res === "leases" ? "coordination.k8s.io/v1" : "v1" }));
    copied[res] = items.length;
  }
  const widgets = await listAll(real, WIDGETS_PATH);
  for (const o of widgets.items) api.store.create(WIDGET_GVR, copyForDevapi(o));
  copied["widgets"] = widgets.items.length;
  t.comment(`devapi holds copies of the real server's objects: ${JSON.stringify(copied)}`);
  t.ok((copied["pods"] ?? 0) >= 300 && (copied["widgets"] ?? 0) >= 150, "the corpus has objects to shard");

  const sides: Side[] = [
    { name: "devapi", target: { url: api.url } },
    { name: "realapi", target: real },
  ];
  const diffs: Difference[] = [];
  let compared = 0;
  for (const c of LIST_CASES) {
    const [d, r] = await Promise.all(sides.map((s) => c.run(s)));
    diffs.push(...compare(c.id, d ?? {}, r ?? {}));
    compared++;
  }

  // Watches: all open at once on both servers, one script of writes, then a
  // sentinel patch that every watch's selector matches (a LOW-uid pod in a
  // namespace of the upper half): once it arrived everywhere, nothing is in flight.
  const writer = new Writer(api);
  const { items: realPods, resourceVersion: realRv } = await listAll(real, "/api/v1/pods");
  const realWidgets = await listAll(real, WIDGETS_PATH);
  const devRv = api.store.resourceVersion;
  const lowSel = rangesOf(LOW);
  const nsHighSel = rangesOf(NSHIGH);
  const pickSentinel = (items: readonly KubeObject[]): KubeObject | undefined => items.find((o) => o.metadata?.namespace === "alpha" && inSel(lowSel, o.metadata) && inSel(nsHighSel, o.metadata));
  const podSentinel = pickSentinel(realPods);
  const widgetSentinel = pickSentinel(realWidgets.items);
  if (podSentinel === undefined || widgetSentinel === undefined) throw new Error("no sentinel object (alpha, LOW uid) in the data set");
  const opened: Array<{ spec: WatchSpec; dev: OpenWatch; real: OpenWatch }> = [];
  t.teardown(() => {
    for (const o of opened) {
      o.dev.close();
      o.real.close();
    }
  });
  for (const spec of WATCHES) {
    const rvReal = spec.writes === "pods" ? realRv : realWidgets.resourceVersion;
    const accept = spec.accept ?? "application/json";
    const dev = await openWatch(sides[0]?.target ?? real, `${spec.path}?${q(spec.params(devRv))}`, { accept });
    const rw = await openWatch(real, `${spec.path}?${q(spec.params(rvReal))}`, { accept });
    opened.push({ spec, dev, real: rw });
  }
  const invalidWatch = listCase("pods/invalid-watch-bad-hex", "/api/v1/pods", { watch: "1", timeoutSeconds: "2", shardSelector: recordedSelector("bad-hex") });
  const [iwD, iwR] = await Promise.all(sides.map((s) => invalidWatch.run(s)));
  diffs.push(...compare(invalidWatch.id, iwD ?? {}, iwR ?? {}));
  compared++;
  // Let the initial events of rv=0 watches and watch-lists arrive before writing.
  await new Promise((r) => setTimeout(r, 500));
  const tag = Date.now().toString(36);
  for (const kind of ["pods", "widgets"] as const) {
    const made: KubeObject[] = [];
    for (let i = 0; i < 12; i++) {
      const ns = NAMESPACES[i % NAMESPACES.length] ?? "alpha";
      made.push(await writer.create(kind, kind === "pods" ? pod(`diff-${tag}-${i}`, ns, i) : widget(`diff-${tag}-${i}`, ns, i)));
    }
    for (const o of made) await writer.patch(kind, o.metadata?.namespace ?? "", o.metadata?.name ?? "", { metadata: { labels: { patched: tag } } });
    for (const o of made) await writer.delete(kind, o.metadata?.namespace ?? "", o.metadata?.name ?? "");
    const s = kind === "pods" ? podSentinel : widgetSentinel;
    await writer.patch(kind, s.metadata?.namespace ?? "", s.metadata?.name ?? "", { metadata: { labels: { sentinel: tag } } });
  }
  for (const o of opened) {
    const s = o.spec.writes === "pods" ? podSentinel : widgetSentinel;
    const seen = (evs: readonly WatchEvent[]): boolean => evs.some((e) => e.type === "MODIFIED" && (e.rowMeta ?? e.meta).uid === s.metadata?.uid && (e.rowMeta ?? e.meta).labels?.["sentinel"] === tag);
    const [a, b] = await Promise.all([o.dev.waitFor(seen, 10_000), o.real.waitFor(seen, 10_000)]);
    if (!a || !b) t.comment(`${o.spec.id}: the sentinel did not arrive on ${!a ? "devapi" : ""} ${!b ? "realapi" : ""} (compared as is)`);
    const sel = rangesOf(o.spec.params("0")["shardSelector"]);
    const sentinelName = `${s.metadata?.namespace ?? ""}/${s.metadata?.name ?? ""}`;
    diffs.push(...compare(o.spec.id, watchFields(o.dev, o.spec, sel, writer.names, sentinelName), watchFields(o.real, o.spec, sel, writer.names, sentinelName)));
    compared++;
  }

  // Classify against the documented differences.
  const used = new Set<number>();
  for (const d of diffs) {
    const i = KNOWN_DIFFERENCES.findIndex((k) => k.field === d.field && k.cases.test(d.id) && (k.gates ?? ["on", "off"]).includes(env.gate));
    if (i >= 0) {
      d.known = KNOWN_DIFFERENCES[i]?.why ?? "";
      used.add(i);
    }
  }
  t.comment(`differential, gate ${env.gate}: ${compared} cases, ${diffs.length} differences (${diffs.filter((d) => d.known === undefined).length} not documented); the table is printed above`);
  console.log(`\n# devapi vs real k8s.io/apiserver, gate ${env.gate}: ${compared} cases, ${diffs.length} differences\n${table(diffs).replace(/^/gm, "#   ")}\n`);
  t.ok(compared >= 60, `${compared} cases compared`);
  t.same(
    diffs.filter((d) => d.known === undefined).map((d) => `${d.id} ${d.field}: devapi ${d.devapi} / real ${d.realapi}`),
    [],
    "every difference is documented in test/real/support/differences.ts and docs/testing.md",
  );
  const stale = KNOWN_DIFFERENCES.map((k, i) => ({ k, i })).filter(({ k, i }) => (k.gates ?? ["on", "off"]).includes(env.gate) && !used.has(i));
  t.same(stale.map(({ k }) => `${k.cases.source} ${k.field}`), [], "every documented difference still shows (remove fixed ones)");
});
