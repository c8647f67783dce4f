/**
 * Conformance: replays every JSON case of the recorded transcripts in
 * `test/fixtures/kube-apiserver/` against a devapi seeded with the exact
 * recorded objects (names, namespaces, labels and uids), and compares what
 * matters to shardcar: status code, error text, `shardInfo`, the set of
 * returned objects (by name and uid, hence by hash range), paging metadata,
 * the serialisation shape (key order), and for watches the initial set and
 * the sequence of events while the recorded writes are replayed.
 *
 * Protobuf cases (a `.body.bin` next to the response) belong to the proxy's
 * protobuf path and are skipped here; the JSON cases deliberately not
 * replayed are listed, with reasons, in docs/devapi.md and in SKIPPED below.
 */
import t, { type Test } from "tap";
import { join } from "node:path";
import { CONFIGMAPS, CUSTOMRESOURCEDEFINITIONS, LEASES, PODS, startDevApi, type DevApi, type GateMode, type KubeObject, type ResourceDef } from "../../src/devapi/index.ts";
import { fixturePath, hasFixture, readFixtureText } from "../support/fixtures.ts";
import {
  caseNames,
  hasProtobufBody,
  jsonLines,
  readActions,
  readRequest,
  readResponse,
  recordedHeaders,
  send,
  WatchClient,
  type RecordedAction,
  type RecordedRequest,
} from "./transcript.ts";

/** JSON cases not replayed, and why. Keep in sync with docs/devapi.md. */
const SKIPPED: Readonly<Record<string, string>> = {
  "apiextensions-apiserver/gate-off/widgets/list-all-first-after-restart-429":
    "a 429 'storage is (re)initializing' from a cache still filling after a restart; devapi has no such window",
};

const WIDGETS: ResourceDef = {
  group: "example.com",
  version: "v1",
  resource: "widgets",
  kind: "Widget",
  namespaced: true,
  encoding: "unstructured",
  columns: [
    {
      name: "Color",
      type: "string",
      format: "",
      description: "Custom resource definition column (in JSONPath format): .spec.color",
      priority: 0,
      cell: (o) => {
        const spec = o.spec;
        return typeof spec === "object" && spec !== null && "color" in spec && typeof spec.color === "string" ? spec.color : null;
      },
    },
  ],
};

/** The sample-apiserver's typed Flunder (the recordings use v1beta1). */
const FLUNDERS: ResourceDef = { group: "wardle.example.com", version: "v1beta1", resource: "flunders", kind: "Flunder", namespaced: true };

/** minicore serves pods and configmaps through the generic registry: default Table columns, no pod deletion strategy. */
const MINICORE_PODS: ResourceDef = { ...PODS, columns: undefined, twoPhaseDelete: false, generation: false };
const MINICORE_CONFIGMAPS: ResourceDef = { ...CONFIGMAPS, columns: undefined };

interface DirSpec {
  dir: string;
  gate: GateMode;
  def: ResourceDef;
  /** The recorded full list to seed from, when it is not this directory's `list-all`. */
  seedFrom?: { dir: string; name: string };
  /** The server-level directory holding `version.*`, replayed once. */
  versionDir?: string;
}

const DIRS: DirSpec[] = [
  { dir: "minicore/gate-on/pods", gate: "on", def: MINICORE_PODS, versionDir: "minicore/gate-on" },
  { dir: "minicore/gate-on/configmaps", gate: "on", def: MINICORE_CONFIGMAPS },
  { dir: "minicore/gate-off/pods", gate: "off", def: MINICORE_PODS, versionDir: "minicore/gate-off" },
  { dir: "apiextensions-apiserver/gate-on/widgets", gate: "on", def: WIDGETS, versionDir: "apiextensions-apiserver/gate-on" },
  { dir: "apiextensions-apiserver/gate-off/widgets", gate: "off", def: WIDGETS, versionDir: "apiextensions-apiserver/gate-off" },
  { dir: "apiextensions-apiserver/gate-on/customresourcedefinitions", gate: "on", def: CUSTOMRESOURCEDEFINITIONS },
  { dir: "apiextensions-apiserver/gate-off/customresourcedefinitions", gate: "off", def: CUSTOMRESOURCEDEFINITIONS },
  { dir: "sample-apiserver/gate-on/flunders", gate: "on", def: FLUNDERS, versionDir: "sample-apiserver/gate-on" },
  { dir: "sample-apiserver/gate-off/flunders", gate: "off", def: FLUNDERS, versionDir: "sample-apiserver/gate-off" },
  { dir: "kube-apiserver/gate-on/pods", gate: "on", def: PODS },
  { dir: "kube-apiserver/gate-on/configmaps", gate: "on", def: CONFIGMAPS },
  { dir: "kube-apiserver/gate-on/leases", gate: "on", def: LEASES },
  { dir: "kube-apiserver/gate-off/pods", gate: "off", def: PODS },
  // No list-all was recorded here, and the apiserver identity lease was recreated by the restart;
  // with the gate off, list-uid-low is the whole list.
  { dir: "kube-apiserver/gate-off/leases", gate: "off", def: LEASES, seedFrom: { dir: "kube-apiserver/gate-off/leases", name: "list-uid-low" } },
];

type Json = Record<string, unknown>;

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

function isObj(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function obj(v: unknown): Json {
  return isObj(v) ? v : {};
}

function gvr(def: ResourceDef) {
  return { group: def.group, version: def.version, resource: def.resource };
}

function basePath(def: ResourceDef): string {
  return def.group === "" ? `/api/${def.version}` : `/apis/${def.group}/${def.version}`;
}

function objectPath(def: ResourceDef, namespace: string, name: string): string {
  return def.namespaced ? `${basePath(def)}/namespaces/${namespace}/${def.resource}/${name}` : `${basePath(def)}/${def.resource}/${name}`;
}

/** `namespace/name uid` of each object a response carries (list items, Table rows, or a single object). */
function identities(body: Json): string[] {
  const id = (m: unknown): string => {
    const meta = obj(m);
    return `${str(meta.namespace)}/${str(meta.name)} ${str(meta.uid)}`;
  };
  if (body.kind === "Table") return (Array.isArray(body.rows) ? body.rows : []).map((r) => id(obj(obj(r).object).metadata));
  if (Array.isArray(body.items)) return body.items.map((i) => id(obj(i).metadata));
  return [id(body.metadata)];
}

function setOf(xs: string[]): string[] {
  return [...new Set(xs)].sort();
}

function parseBody(text: string | undefined): Json {
  if (text === undefined || text.trim() === "") return {};
  const v: unknown = JSON.parse(text);
  return obj(v);
}

/** The seed objects: the recorded `list-all`, with kind/apiVersion restored for typed lists. */
function seedObjects(spec: DirSpec): KubeObject[] {
  const from = spec.seedFrom ?? { dir: spec.dir, name: "list-all" };
  const body = parseBody(readResponse(fixturePath(from.dir), from.name).body);
  return (Array.isArray(body.items) ? body.items : []).map((i) => obj(i) as KubeObject);
}

function queryOf(target: string): URLSearchParams {
  const q = target.indexOf("?");
  return new URLSearchParams(q < 0 ? "" : target.slice(q + 1));
}

/** Replaces one query parameter's raw value, keeping every other byte of the target. */
function withParam(target: string, key: string, value: string): string {
  const re = new RegExp(`([?&]${key}=)[^&]*`);
  return target.replace(re, (_m, p: string) => p + encodeURIComponent(value));
}

function isWatch(target: string): boolean {
  const w = queryOf(target).get("watch");
  return w === "1" || w === "true";
}

/** A list read at an older, recorded resourceVersion: replayed at the version devapi had right after seeding. */
function readsOldVersion(target: string): boolean {
  const rv = queryOf(target).get("resourceVersion");
  return !isWatch(target) && rv !== null && rv !== "" && rv !== "0";
}

interface Ctx {
  api: DevApi;
  spec: DirSpec;
  seedRv: string;
  /** Recorded continue token → the token devapi issued for the same page. */
  tokens: Map<string, string>;
}

async function replayRequest(t: Test, ctx: Ctx, name: string, req: RecordedRequest): Promise<void> {
  const dir = fixturePath(ctx.spec.dir);
  const rec = readResponse(dir, name);
  let target = req.target;
  const cont = queryOf(target).get("continue");
  if (cont !== null && cont !== "") {
    const ours = ctx.tokens.get(cont);
    if (ours === undefined) {
      t.fail(`no devapi continue token for the recorded one (the page that issued it was not replayed)`);
      return;
    }
    target = withParam(target, "continue", ours);
  }
  if (readsOldVersion(target)) target = withParam(target, "resourceVersion", ctx.seedRv);

  const got = await send(ctx.api.url, target, { method: req.method, headers: recordedHeaders(req) });
  t.equal(got.status, rec.status, "status code");
  t.match(got.headers["content-type"], /^application\/json/, "JSON response");
  const want = parseBody(rec.body);
  const ours = parseBody(got.body);
  if (rec.status !== 200) {
    t.equal(ours.kind, "Status", "a Status body");
    t.equal(ours.message, want.message, "error message");
    t.equal(ours.reason, want.reason, "reason");
    t.equal(ours.code, want.code, "code in the body");
    return;
  }
  if (name === "version" || target.startsWith("/version")) {
    t.equal(ours.major, want.major, "major");
    t.equal(ours.minor, want.minor, "minor");
    return;
  }
  t.equal(ours.kind, want.kind, "kind");
  t.same(Object.keys(ours), Object.keys(want), "top-level key order (typed: metadata before items; unstructured: sorted)");
  const wm = obj(want.metadata);
  const om = obj(ours.metadata);
  t.same(Object.keys(om), Object.keys(wm), "list metadata keys and order");
  t.same(om.shardInfo, wm.shardInfo, "shardInfo (presence and echoed selector)");
  t.equal(typeof om.continue === "string" && om.continue !== "", typeof wm.continue === "string" && wm.continue !== "", "continue token present");
  t.equal(om.remainingItemCount, wm.remainingItemCount, "remainingItemCount");
  const wantIds = identities(want);
  const oursIds = identities(ours);
  t.equal(oursIds.length, wantIds.length, "number of objects (no duplicates)");
  t.same(setOf(oursIds), setOf(wantIds), "the same objects, by namespace/name and uid");
  const firstKeys = (b: Json): string[] => {
    const first = b.kind === "Table" ? (b.rows as unknown[] | undefined)?.[0] : (b.items as unknown[] | undefined)?.[0];
    return Object.keys(obj(first));
  };
  if (Array.isArray(want.items) || want.kind === "Table") t.same(firstKeys(ours), firstKeys(want), "first item's key order");
  if (want.kind === "Table") {
    const names = (b: Json): unknown[] => (Array.isArray(b.columnDefinitions) ? b.columnDefinitions.map((c) => obj(c).name) : []);
    t.same(names(ours), names(want), "Table column names");
  }
  if (typeof wm.continue === "string" && wm.continue !== "" && typeof om.continue === "string") ctx.tokens.set(wm.continue, om.continue);
}

interface EventView {
  type: string;
  id: string;
  initialEnd: boolean;
  hasColumns: boolean;
}

function viewEvents(events: unknown[]): EventView[] {
  return events.map((e) => {
    const ev = obj(e);
    const o = obj(ev.object);
    const meta = o.kind === "Table" ? obj(obj(obj((o.rows as unknown[] | undefined)?.[0]).object).metadata) : obj(o.metadata);
    const annotations = obj(meta.annotations);
    const tableMeta = obj(o.metadata);
    return {
      type: String(ev.type),
      id: `${str(meta.namespace)}/${str(meta.name)} ${str(meta.uid)}`,
      initialEnd: annotations["k8s.io/initial-events-end"] === "true" || obj(tableMeta.annotations)["k8s.io/initial-events-end"] === "true",
      hasColumns: Array.isArray(o.columnDefinitions),
    };
  });
}

/** Initial ADDED events (before the initial-events-end bookmark) and the later non-bookmark events, in order. */
function splitEvents(views: EventView[]): { initial: string[]; endMarker: boolean; live: string[]; errors: number } {
  const end = views.findIndex((v) => v.type === "BOOKMARK" && v.initialEnd);
  const initial = end < 0 ? [] : views.slice(0, end).filter((v) => v.type === "ADDED").map((v) => v.id);
  const rest = end < 0 ? views : views.slice(end + 1);
  return {
    initial,
    endMarker: end >= 0,
    live: rest.filter((v) => v.type !== "BOOKMARK" && v.type !== "ERROR").map((v) => `${v.type} ${v.id}`),
    errors: views.filter((v) => v.type === "ERROR").length,
  };
}

function actionObject(def: ResourceDef, a: RecordedAction): KubeObject {
  const metadata = { name: a.name, namespace: a.namespace, uid: a.uid, labels: { "watch-test": "true" } };
  if (def.resource === "pods") return { metadata, spec: { containers: [{ name: "c", image: "registry.invalid/pause:3.10" }] } };
  if (def.resource === "widgets") return { metadata, spec: { color: "red" } };
  return { metadata, spec: {} };
}

async function replayActions(t: Test, ctx: Ctx, actions: RecordedAction[]): Promise<void> {
  const def = ctx.spec.def;
  for (const a of actions) {
    if (a.verb === "create") {
      // Through the store, to keep the recorded uid (an HTTP create gets a fresh one, as on a real server).
      ctx.api.store.create(gvr(def), actionObject(def, a));
      continue;
    }
    const path = objectPath(def, a.namespace, a.name);
    const res =
      a.verb === "update"
        ? await send(ctx.api.url, path, {
            method: "PATCH",
            headers: { "content-type": "application/merge-patch+json" },
            body: JSON.stringify({ metadata: { labels: { "watch-test": "updated" } } }),
          })
        : await send(ctx.api.url, path, { method: "DELETE" });
    t.equal(res.status, a.status, `${a.verb} ${a.namespace}/${a.name}`);
  }
}

async function replayWatch(t: Test, ctx: Ctx, name: string, req: RecordedRequest): Promise<void> {
  const dir = fixturePath(ctx.spec.dir);
  const rec = readResponse(dir, name);
  const recorded = viewEvents(jsonLines(rec.body ?? ""));
  const want = splitEvents(recorded);
  const q = queryOf(req.target);
  let target = req.target;
  const rv = q.get("resourceVersion");
  // A recorded "watch from resourceVersion N" starts from devapi's current version instead.
  if (rv !== null && rv !== "" && rv !== "0") target = withParam(target, "resourceVersion", ctx.api.store.resourceVersion);
  const bookmarks = q.get("allowWatchBookmarks") === "true";

  const w = new WatchClient(ctx.api.url, target, recordedHeaders(req));
  t.teardown(() => w.abort());
  t.equal(await w.ready, rec.status, "status code");
  if (want.endMarker) {
    t.ok(await w.waitFor(() => viewEvents(w.events).some((v) => v.initialEnd), 30_000), "initial-events-end bookmark arrives");
  }
  await replayActions(t, ctx, readActions(dir, name)?.actions ?? []);
  const last = Number(ctx.api.store.resourceVersion);
  if (bookmarks) {
    const caughtUp = (): boolean =>
      w.events.some((e) => {
        const ev = obj(e);
        return ev.type === "BOOKMARK" && Number(obj(obj(ev.object).metadata).resourceVersion) >= last;
      });
    t.ok(await w.waitFor(caughtUp, 30_000), "a bookmark at or after the last write arrives");
  } else {
    // Without bookmarks there is no marker for "caught up": wait for as many
    // events as the recording has, then a moment for any extra one (it would
    // follow at once: every write is done). Load can only shorten what that
    // moment catches, never fail a correct run.
    const all = (): boolean => {
      const s = splitEvents(viewEvents(w.events));
      return s.live.length >= want.live.length && s.errors >= want.errors;
    };
    t.ok(await w.waitFor(all, 30_000), "every recorded event arrives");
    await w.settle(300, 3000);
  }
  w.abort();

  const ours = splitEvents(viewEvents(w.events));
  t.equal(ours.endMarker, want.endMarker, "initial-events-end bookmark present as recorded");
  t.equal(ours.initial.length, want.initial.length, "number of initial ADDED events");
  t.same(setOf(ours.initial), setOf(want.initial), "initial ADDED events: the same objects");
  t.same(ours.live, want.live, "events for the replayed writes: same types, objects and order");
  t.equal(ours.errors, want.errors, "no ERROR events unless recorded");
  const cols = (vs: EventView[]): boolean[] => vs.filter((v) => v.type !== "BOOKMARK").map((v) => v.hasColumns);
  const recordedCols = cols(recorded);
  if (recordedCols.some((c) => c)) t.same(cols(viewEvents(w.events)), recordedCols, "columnDefinitions only on the first Table event");
}

let replayed = 0;

for (const spec of DIRS) {
  t.test(spec.dir, async (t) => {
    const api = await startDevApi({ gate: spec.gate, bookmarkIntervalMs: 100 });
    t.teardown(() => api.close());
    api.registerResource(spec.def);
    for (const o of seedObjects(spec)) api.store.create(gvr(spec.def), o);
    const ctx: Ctx = { api, spec, seedRv: api.store.resourceVersion, tokens: new Map() };
    const dir = fixturePath(spec.dir);

    if (spec.versionDir !== undefined && hasFixture(join(fixturePath(spec.versionDir), "version.request.txt"))) {
      const vdir = spec.versionDir;
      await t.test(`${vdir}/version`, async (t) => {
        const rec = readResponse(fixturePath(vdir), "version");
        const got = await send(api.url, "/version");
        const want = parseBody(rec.body);
        const ours = parseBody(got.body);
        t.equal(got.status, rec.status, "status code");
        t.same(Object.keys(ours), Object.keys(want), "the same fields, in order");
        t.equal(ours.major, want.major, "major");
        // sample-apiserver reports its own component version (1.2, which maps to kube 1.36).
        if (want.emulationMinor === "36") t.equal(ours.minor, want.minor, "minor");
        replayed++;
      });
    }

    const lists: string[] = [];
    const watches: string[] = [];
    const oldVersion: string[] = [];
    for (const name of caseNames(dir)) {
      const key = `${spec.dir}/${name}`;
      if (hasProtobufBody(dir, name)) continue; // protobuf: the proxy's concern, not devapi's
      if (SKIPPED[key] !== undefined) {
        t.comment(`skipped ${key}: ${SKIPPED[key]}`);
        continue;
      }
      const req = readRequest(dir, name);
      const status = readResponse(dir, name).status;
      if (isWatch(req.target) && status === 200) watches.push(name);
      else if (readsOldVersion(req.target)) oldVersion.push(name);
      else lists.push(name);
    }

    // Pages that need a continue token from another page wait for it.
    const pending = [...lists];
    while (pending.length > 0) {
      const i = pending.findIndex((n) => {
        const c = queryOf(readRequest(dir, n).target).get("continue");
        return c === null || c === "" || ctx.tokens.has(c);
      });
      const name = pending.splice(i < 0 ? 0 : i, 1)[0] as string;
      await t.test(`${spec.dir}/${name}`, (t) => replayRequest(t, ctx, name, readRequest(dir, name)));
      replayed++;
    }
    for (const name of watches) {
      await t.test(`${spec.dir}/${name}`, (t) => replayWatch(t, ctx, name, readRequest(dir, name)));
      replayed++;
    }
    // After the watches' writes, so these reads come from the history, not the live state.
    for (const name of oldVersion) {
      await t.test(`${spec.dir}/${name}`, (t) => replayRequest(t, ctx, name, readRequest(dir, name)));
      replayed++;
    }
  });
}

t.test("every JSON case in the fixtures is either replayed or listed as skipped", async (t) => {
  const checks = JSON.parse(readFixtureText("checks.json")) as { lists: Record<string, Record<string, { encoding: string }>> };
  let jsonCases = 0;
  for (const spec of DIRS) {
    const dir = fixturePath(spec.dir);
    jsonCases += caseNames(dir).filter((n) => !hasProtobufBody(dir, n)).length;
  }
  jsonCases += DIRS.filter((s) => s.versionDir !== undefined && hasFixture(join(fixturePath(s.versionDir), "version.request.txt"))).length;
  const skipped = Object.keys(SKIPPED).length;
  t.equal(replayed + skipped, jsonCases, `${replayed} replayed + ${skipped} skipped`);
  // Every directory checks.json knows about is covered by DIRS.
  for (const d of Object.keys(checks.lists)) t.ok(DIRS.some((s) => s.dir === d), `${d} is replayed`);
});
