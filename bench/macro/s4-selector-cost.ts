/**
 * S4, what label selectors cost the apiserver: the real k8s.io/apiserver
 * kit (gate on), ConfigMaps of ~3 KB that each carry their slot label
 * `shard.shardcar.io/s4` (the slot of their uid, src/shard/slots.ts, as
 * the manager writes it), N watchers, and churn: merge patches of one data
 * key at a fixed rate. For each configuration, realapi-server's CPU time
 * (and etcd's, separately) over its churn, less the same processes idle
 * over the same time, per write:
 *
 * - labels: each watcher behind `shardcar proxy --filter labels --ring s4
 *   --shards i/N`, which asks for `shard.shardcar.io/s4 in (<its slots>)`;
 * - shardselector: behind `shardcar proxy --shards i/N`, which asks for
 *   `shardSelector=shardRange(object.metadata.uid, …)`;
 * - unfiltered: behind a proxy that passes ConfigMaps through
 *   (`--resources pods`), so each watcher receives every event, as in
 *   shardselector mode where the gate is off;
 * - writes alone: no watcher, the write's own cost. A configuration's
 *   delivery part is what it costs above this, from the neighbouring window.
 *
 * Each configuration has its own namespace, holding the same number of
 * objects, and its watchers watch only that namespace. The watch cache
 * hands an event only to the watchers of its namespace (and the
 * cluster-wide ones: k8s.io/apiserver cacher.go, startDispatching), so all
 * configurations stay open together and the churn moves from namespace to
 * namespace in short windows, in rounds (forward, then backward): drift on
 * a shared machine falls on every configuration alike, and no proxy has to
 * restart between them. Figures are medians over rounds.
 *
 * The watchers are the smallest client there is (bench/lib/watch-clients.ts:
 * a protobuf watch that counts frames). With `direct` clients the same
 * watchers talk to the apiserver themselves and send exactly the query a
 * proxy sends (the proxy's own rewriteFor), so that N proxy processes on
 * the same two cores cannot distort the server's figure; both are
 * reported, each row says which.
 *
 * A run fails when any watcher receives other than exactly its share of
 * the events, or when the server's own count of events sent disagrees.
 * No target (issue 25 asks for the figures); the quick run bounds two
 * ratios so that a regression fails CI (`quickMinRatio`, set in
 * lib/gates.ts, enforced by lib/checks.ts).
 *
 * Usage: node bench/macro/s4-selector-cost.ts [--quick]
 *   S4_NS ("8,32"), S4_CLIENTS ("proxies,direct"), S4_WRITES (per window),
 *   S4_RATE, S4_OBJECTS, S4_ROUNDS, S4_IDLE_MS, S4_BYTES override the sizes.
 */
import { rewriteFor, SHARDSELECTOR, type ProxyFiltering } from "../../src/proxy/request/filtering.ts";
import { HashMatcher } from "../../src/shard/range.ts";
import { slotAlignedRanges, slotLabelKey, slotOfValue, slotsOfRanges } from "../../src/shard/slots.ts";
import { parseShardSpec, staticRanges } from "../../src/shard/spec.ts";
import { DEFAULT_SLOT_COUNT } from "../../src/shard/table.ts";
import type { Bench, BenchResult } from "../lib/bench.ts";
import { s4Ratios } from "../lib/gates.ts";
import { sleep, stopAll, until } from "../lib/proc.ts";
import { startProxyProc, type ProxyProc } from "../lib/proxy-proc.ts";
import { callRealApi, seedConfigMaps, startRealApi, stopRealApi, type RealApi } from "../lib/realapi.ts";
import { idleFor, lessIdle, paced, snapshot, spent, watchTotals, type Spent } from "../lib/server-cost.ts";
import { benchTls, type BenchTls } from "../lib/tls.ts";
import { openWatch, type WatchClient } from "../lib/watch-clients.ts";

export const S4_RING = "s4";
const RESOURCE = "configmaps";
const LABEL_KEY = slotLabelKey(S4_RING);
const SLOTS = DEFAULT_SLOT_COUNT;
export const FILTERS = ["labels", "shardselector", "unfiltered"] as const;

export type Filter = (typeof FILTERS)[number];
export type Clients = "proxies" | "direct";
type Scene = Filter | "none";

interface Sizes {
  readonly ns: readonly number[];
  readonly clients: readonly Clients[];
  /** Writes per window. */
  readonly writes: number;
  readonly rate: number;
  readonly objects: number;
  readonly rounds: number;
  readonly idleMs: number;
  readonly bytes: number;
}

/** One namespace of objects, and where the churn stands in it. */
interface Space {
  readonly namespace: string;
  readonly names: readonly string[];
  readonly uids: readonly string[];
  cursor: number;
}

interface Setup {
  readonly api: RealApi;
  readonly tls: BenchTls;
  readonly spaces: Readonly<Record<Scene, Space>>;
  readonly sizes: Sizes;
  /** Makes every write's value new: a patch that changes nothing is no write and sends no event. */
  seq: number;
}

/** One configuration's watchers, open for a whole group of rounds. */
interface Watchers {
  readonly filter: Filter;
  readonly clients: readonly WatchClient[];
  readonly proxies: readonly ProxyProc[];
  /** Which watcher each object of the namespace goes to; undefined: all of them. */
  readonly owners: readonly number[] | undefined;
}

/** One window: a configuration's churn, less idle. */
interface Sample {
  readonly work: Spent;
  readonly idle: Spent;
  /** Events the watchers' shares add up to (the server's own count agrees, or the run fails). */
  readonly events: number;
  /** Their encoded size as the server counted it (its /metrics), before framing and TLS. */
  readonly eventBytes: number;
  /** What the watchers received (after the proxies, if any). */
  readonly clientBytes: number;
}

const envStr = (name: string): string | undefined => {
  const v = process.env[name];
  return v === undefined || v === "" ? undefined : v;
};
const envNum = (name: string, dflt: number): number => Number(envStr(name) ?? dflt);

function sizesFor(quick: boolean): Sizes {
  return {
    ns: (envStr("S4_NS") ?? (quick ? "4" : "8,32")).split(",").map(Number),
    clients: (envStr("S4_CLIENTS") ?? (quick ? "proxies" : "proxies,direct")).split(",") as Clients[],
    writes: envNum("S4_WRITES", quick ? 200 : 300),
    rate: envNum("S4_RATE", 100),
    objects: envNum("S4_OBJECTS", quick ? 256 : 512),
    rounds: envNum("S4_ROUNDS", quick ? 3 : 8),
    idleMs: envNum("S4_IDLE_MS", 2000),
    bytes: envNum("S4_BYTES", 3000),
  };
}

/** Which of the N watchers each uid belongs to (`undefined`: every watcher gets every object). */
function ownersOf(filter: Filter, n: number, uids: readonly string[]): number[] | undefined {
  if (filter === "unfiltered") return undefined;
  const shards = Array.from({ length: n }, (_, i) => staticRanges(parseShardSpec(`${i}/${n}`)) ?? []);
  if (filter === "labels") {
    const slotOwner = new Map<number, number>();
    shards.forEach((r, i) => slotsOfRanges(slotAlignedRanges(r, SLOTS), SLOTS).forEach((s) => slotOwner.set(s, i)));
    return uids.map((u) => slotOwner.get(slotOfValue(u, SLOTS)) ?? -1);
  }
  const matchers = shards.map((r) => new HashMatcher(r));
  return uids.map((u) => matchers.findIndex((m) => m.matchesString(u)));
}

/**
 * The query watcher `i` of `n` sends upstream: what `shardcar proxy
 * --shards i/N` (labels: `--filter labels`) sends for the client's query,
 * by the proxy's own function.
 */
export function upstreamQuery(filter: Filter, i: number, n: number, clientQuery: URLSearchParams): URLSearchParams {
  if (filter === "unfiltered") return clientQuery;
  const given = staticRanges(parseShardSpec(`${i}/${n}`)) ?? [];
  const filtering: ProxyFiltering = filter === "labels" ? { mode: "labels", labelKey: LABEL_KEY, slotCount: () => SLOTS } : SHARDSELECTOR;
  // The proxy's CLI aligns a static spec to whole slots in labels mode.
  const ranges = filter === "labels" ? slotAlignedRanges(given, SLOTS) : given;
  const rw = rewriteFor(clientQuery, "uid", ranges, filtering);
  if (!rw.ok) throw new Error(`rewriting the watch query for ${i}/${n} (${filter}): ${rw.message}`);
  return rw.query;
}

function startProxy(s: Setup, filter: Filter, i: number, n: number): Promise<ProxyProc> {
  const base = { name: `s4-${filter}-${i}/${n}`, upstream: s.api.url, tls: s.tls, upstreamCaFile: s.api.caFile };
  switch (filter) {
    case "labels":
      return startProxyProc({ ...base, shards: `${i}/${n}`, resources: RESOURCE, extraArgs: ["--filter", "labels", "--ring", S4_RING] });
    case "shardselector":
      return startProxyProc({ ...base, shards: `${i}/${n}`, resources: RESOURCE });
    case "unfiltered":
      // ConfigMaps are not this proxy's resource: it passes their watches through untouched.
      return startProxyProc({ ...base, shards: "0/1", resources: "pods" });
  }
}

/** At most `limit` at once: 32 proxies starting together on two cores take longer, not less. */
async function inBatches<T>(count: number, limit: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < count; i += limit) out.push(...(await Promise.all(Array.from({ length: Math.min(limit, count - i) }, (_, k) => make(i + k)))));
  return out;
}

async function collectionRv(api: RealApi, namespace: string): Promise<string> {
  const r = await callRealApi(api, "GET", `/api/v1/namespaces/${namespace}/${RESOURCE}?limit=1`);
  const rv = (JSON.parse(r.body) as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
  if (r.status !== 200 || rv === undefined) throw new Error(`listing ${RESOURCE} in ${namespace} for a resourceVersion: HTTP ${r.status} ${r.body.slice(0, 300)}`);
  return rv;
}

function openWatches(api: RealApi, count: number): Promise<boolean> {
  return until(async () => (await watchTotals(api, RESOURCE)).open === count, 60_000, 100);
}

/** Opens the N watchers of `filter` on its namespace, through proxies or straight to the server. */
async function openConfiguration(s: Setup, filter: Filter, n: number, clients: Clients, proxies: ProxyProc[]): Promise<Watchers> {
  const space = s.spaces[filter];
  // From now, so no watcher starts with a replay of every object.
  const query = new URLSearchParams({ watch: "true", allowWatchBookmarks: "true", resourceVersion: await collectionRv(s.api, space.namespace), timeoutSeconds: "3600" });
  const path = `/api/v1/namespaces/${space.namespace}/${RESOURCE}`;
  const mine = clients === "proxies" ? await inBatches(n, 8, (i) => startProxy(s, filter, i, n)) : [];
  proxies.push(...mine);
  const watchers = await inBatches(n, 8, (i) => {
    const p = mine[i];
    const url = p === undefined ? `${s.api.url}${path}?${upstreamQuery(filter, i, n, query).toString()}` : `${p.url}${path}?${query.toString()}`;
    return openWatch({ url, token: s.api.token, ca: p === undefined ? s.api.caPem : s.tls.caPem });
  });
  return { filter, clients: watchers, proxies: mine, owners: ownersOf(filter, n, space.uids) };
}

/** One window: idle, then the churn on `scene`'s namespace until every watcher has exactly its share. */
async function churnWindow(s: Setup, scene: Scene, w: Watchers | undefined, label: string): Promise<Sample> {
  const { writes, rate, idleMs } = s.sizes;
  const space = s.spaces[scene];
  const from = space.cursor;
  space.cursor += writes;
  const n = w?.clients.length ?? 0;
  const expected = Array.from({ length: n }, (_, i) => {
    if (w?.owners === undefined) return writes;
    let k = 0;
    for (let x = from; x < from + writes; x++) if (w.owners[x % space.uids.length] === i) k++;
    return k;
  });
  const start = w?.clients.map((c) => ({ ...c.counts })) ?? [];
  const before = await watchTotals(s.api, RESOURCE);
  const idle = await idleFor(s.api, idleMs);
  const t0 = snapshot(s.api);
  await paced(writes, rate, async (x) => {
    const name = space.names[(from + x) % space.names.length] ?? "";
    const r = await callRealApi(s.api, "PATCH", `/api/v1/namespaces/${space.namespace}/${RESOURCE}/${name}`, { data: { rev: String(s.seq++) } }, "application/merge-patch+json");
    if (r.status !== 200) throw new Error(`PATCH ${space.namespace}/${name}: HTTP ${r.status} ${r.body.slice(0, 300)}`);
  });
  const got = (): number[] => (w?.clients ?? []).map((c, i) => c.counts.events - (start[i]?.events ?? 0));
  const delivered = await until(() => got().every((g, i) => g >= (expected[i] ?? 0)) || w?.clients.some((c) => c.failure() !== undefined) === true, 120_000, 10);
  const t1 = snapshot(s.api);
  const after = await watchTotals(s.api, RESOURCE);
  const failed = w?.clients.map((c) => c.failure()).find((f) => f !== undefined);
  if (failed !== undefined) throw new Error(`${label}: ${failed}`);
  const want = expected.reduce((a, b) => a + b, 0);
  const sent = after.events - before.events;
  if (!delivered || got().some((g, i) => g !== expected[i])) throw new Error(`${label}: watchers received ${got().join(",")} events, expected ${expected.join(",")} (the server counted ${sent} sent)`);
  // Bookmarks count as events sent too: about one a minute to every open
  // watcher of the resource, including the other configurations' idle ones.
  if (sent < want || sent > want + 4 * before.open) throw new Error(`${label}: the server counted ${sent} watch events sent, the watchers' shares add up to ${want}`);
  const clientBytes = (w?.clients ?? []).reduce((a, c, i) => a + c.counts.bytes - (start[i]?.bytes ?? 0), 0);
  return { work: lessIdle(spent(t0, t1), idle), idle, events: want, eventBytes: after.bytes - before.bytes, clientBytes };
}

async function seed(api: RealApi, namespace: string, sizes: Sizes): Promise<Space> {
  await seedConfigMaps(api, namespace, 0, sizes.objects, sizes.bytes);
  const r = await callRealApi(api, "GET", `/api/v1/namespaces/${namespace}/${RESOURCE}`);
  const items = (JSON.parse(r.body) as { items: Array<{ metadata: { name: string; uid: string } }> }).items;
  if (items.length !== sizes.objects) throw new Error(`seeded ${items.length} ${RESOURCE} in ${namespace}, wanted ${sizes.objects}`);
  // The slot label, as the labeller writes it: one metadata patch per object, once its uid exists.
  await paced(items.length, Number.POSITIVE_INFINITY, async (i) => {
    const m = items[i]?.metadata;
    if (m === undefined) return;
    const p = await callRealApi(api, "PATCH", `/api/v1/namespaces/${namespace}/${RESOURCE}/${m.name}`, { metadata: { labels: { [LABEL_KEY]: String(slotOfValue(m.uid, SLOTS)) } } }, "application/merge-patch+json");
    if (p.status !== 200) throw new Error(`labelling ${namespace}/${m.name}: HTTP ${p.status} ${p.body.slice(0, 300)}`);
  });
  return { namespace, names: items.map((o) => o.metadata.name), uids: items.map((o) => o.metadata.uid), cursor: 0 };
}

/**
 * Rounds over one group (N, clients): every configuration's watchers open
 * at once, then the scenes in turn, forward and backward.
 */
async function group(s: Setup, n: number, clients: Clients): Promise<Map<Scene, Sample[]>> {
  const proxies: ProxyProc[] = [];
  const open: Watchers[] = [];
  const out = new Map<Scene, Sample[]>();
  try {
    for (const filter of FILTERS) open.push(await openConfiguration(s, filter, n, clients, proxies));
    // Every proxy's upstream watch is open before anything is measured.
    if (!(await openWatches(s.api, FILTERS.length * n))) throw new Error(`N=${n} ${clients}: the server never had exactly ${FILTERS.length * n} watches of ${RESOURCE} open`);
    await sleep(1000);
    const scenes: Scene[] = ["none", ...FILTERS];
    for (let round = 0; round < s.sizes.rounds; round++) {
      for (const scene of round % 2 === 0 ? scenes : [...scenes].reverse()) {
        const label = `N=${n} ${clients} ${scene}, round ${round + 1}/${s.sizes.rounds}`;
        const x = await churnWindow(s, scene, open.find((w) => w.filter === scene), label);
        out.set(scene, [...(out.get(scene) ?? []), x]);
        process.stderr.write(`s4 ${label}: ${((x.work.serverCpuMs * 1000) / s.sizes.writes).toFixed(0)} µs server CPU per write, ${x.events} events, idle ${((100 * x.idle.serverCpuMs) / x.idle.ms).toFixed(1)}% of a core\n`);
      }
    }
    return out;
  } finally {
    for (const w of open) for (const c of w.clients) c.close();
    await Promise.all(proxies.map((p) => p.child.stop()));
    // The next group counts its own open watches: these must be gone.
    if (!(await openWatches(s.api, 0))) process.stderr.write(`s4: watches of ${RESOURCE} still open 60 s after N=${n} ${clients} closed them\n`);
  }
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] ?? Number.NaN) : ((s[m - 1] ?? Number.NaN) + (s[m] ?? Number.NaN)) / 2;
};
const r1 = (x: number): number => Math.round(x * 10) / 10;
const r3 = (x: number): number => Math.round(x * 1000) / 1000;

const SCENE_LABEL: Readonly<Record<Scene, string>> = {
  labels: "labels mode (`in (slots)`)",
  shardselector: "shardselector mode (`shardRange`)",
  unfiltered: "unfiltered (every event to every watcher)",
  none: "writes alone (no watcher)",
};

/** A scene's figures over its rounds; its delivery part against writes alone in the same rounds. */
function figures(samples: readonly Sample[], alone: readonly Sample[], writes: number, n: number): Record<string, number> {
  const us = (f: (x: Spent) => number, xs: readonly Sample[]): number[] => xs.map((x) => (f(x.work) * 1000) / writes);
  const server = us((w) => w.serverCpuMs, samples);
  const base = us((w) => w.serverCpuMs, alone);
  const delivery = server.map((v, i) => v - (base[i] ?? Number.NaN));
  const events = median(samples.map((x) => x.events)) / writes;
  return {
    serverUsPerWrite: r1(median(server)),
    serverUsMin: r1(Math.min(...server)),
    serverUsMax: r1(Math.max(...server)),
    etcdUsPerWrite: r1(median(us((w) => w.etcdCpuMs, samples))),
    deliveryUsPerWrite: r1(median(delivery)),
    deliveryUsMin: r1(Math.min(...delivery)),
    deliveryUsMax: r1(Math.max(...delivery)),
    deliveryUsPerWatcher: n === 0 ? 0 : r1(median(delivery) / n),
    eventsPerWrite: r3(events),
    serverUsPerEvent: events === 0 ? 0 : r1(median(server) / events),
    eventKBPerWrite: r3(median(samples.map((x) => x.eventBytes)) / writes / 1000),
    writtenKBPerWrite: r3(median(samples.map((x) => x.work.serverWritten)) / writes / 1000),
    clientKBPerWrite: r3(median(samples.map((x) => x.clientBytes)) / writes / 1000),
    idleServerPct: r1(median(samples.map((x) => (100 * x.idle.serverCpuMs) / x.idle.ms))),
  };
}

function groupResults(n: number, clients: Clients, samples: ReadonlyMap<Scene, readonly Sample[]>, sizes: Sizes): BenchResult[] {
  const alone = samples.get("none") ?? [];
  const common = { n, clients, writesPerWindow: sizes.writes, windows: alone.length, rate: sizes.rate, objects: sizes.objects, objectBytes: sizes.bytes };
  const f = Object.fromEntries((["none", ...FILTERS] as const).map((sc) => [sc, figures(samples.get(sc) ?? [], alone, sizes.writes, sc === "none" ? 0 : n)])) as Record<Scene, Record<string, number>>;
  const get = (sc: Scene, k: string): number => f[sc][k] ?? Number.NaN;
  const out: BenchResult[] = (["none", ...FILTERS] as const).map((sc) => ({
    id: "S4",
    name: `server CPU per write, ${sc === "none" ? "writes alone" : sc}, N=${n}, ${clients}`,
    candidate: { label: sc === "none" ? SCENE_LABEL[sc] : `${SCENE_LABEL[sc]}, ${n} watchers`, value: get(sc, "serverUsPerWrite"), unit: "µs" },
    baseline: { label: SCENE_LABEL.none, value: get("none", "serverUsPerWrite"), unit: "µs" },
    ratio: get("none", "serverUsPerWrite") / get(sc, "serverUsPerWrite"),
    extra: { metric: "cpu-per-write", filter: sc, ...common, ...f[sc] },
  }));
  out.push(...s4Ratios(n, clients, f, common));
  return out;
}

export const bench: Bench = async ({ quick }) => {
  const sizes = sizesFor(quick);
  const tls = await benchTls("s4");
  const api = await startRealApi("on");
  try {
    const spaces = {} as Record<Scene, Space>;
    for (const sc of ["none", ...FILTERS] as const) spaces[sc] = await seed(api, `s4-${sc}`, sizes);
    const s: Setup = { api, tls, spaces, sizes, seq: 0 };
    const results: BenchResult[] = [];
    for (const clients of sizes.clients) for (const n of sizes.ns) results.push(...groupResults(n, clients, await group(s, n, clients), sizes));
    return results;
  } finally {
    await stopAll();
    await stopRealApi(api, true).catch(() => undefined);
    tls.remove();
  }
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
