/**
 * A ring at scale, as S1 and S5 run it: devapi seeded with pods (gate on,
 * shardselector mode), the `shardcar manager` whose leader coordinates the
 * ring, a watch on the ShardRing, and members that are real `shardcar proxy
 * --shards ring` processes, each with a client-node reflector in one fleet
 * process (bench/children/reflector-fleet.ts) as its controller.
 *
 * Members and their controllers run below the control plane (`asWorkload`,
 * `asControlPlane`): on a cluster the apiserver has nodes of its own.
 *
 * Exact coverage (`unsettled`): the committed table holds exactly the live
 * members with nothing pending, every proxy enforces its committed slots at
 * the committed generation (its /debug/shardcar), and every cache holds
 * exactly the pods of its slots.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ApiClient, directConnection } from "../../src/kube/client.ts";
import { silentLogger } from "../../src/log.ts";
import { systemClock } from "../../src/ring/clock.ts";
import { decodeRing, RingApi, watchObjects, type RingObject } from "../../src/ring/kube.ts";
import { decodeTables, type RingTables } from "../../src/ring/table.ts";
import { formatBound } from "../../src/shard/hash.ts";
import { canonicalSelector } from "../../src/shard/selector.ts";
import { slotOfValue } from "../../src/shard/slots.ts";
import { DEFAULT_SLOT_COUNT, slotsOf, slotsToRanges } from "../../src/shard/table.ts";
import { ask, asControlPlane, asWorkload, CLI, forkTs, httpGet, sleep, start, stopAll, type Child } from "./proc.ts";
import { benchTls, type BenchTls } from "./tls.ts";

const DEVAPI = fileURLToPath(new URL("../children/scale-devapi.ts", import.meta.url));
const FLEET = fileURLToPath(new URL("../children/reflector-fleet.ts", import.meta.url));
export const NS = "bench";
export const RING = "bench";

export interface Replica {
  readonly name: string;
  readonly proxy: Child;
  readonly url: string;
  readonly admin: string;
}

interface Debug {
  generation: number;
  ranges: Array<{ start: string; end: string }>;
  resources: { pods?: { lists: number } };
}

/** One status the ring watch delivered. */
export interface RingSeen {
  /** Epoch ms. */
  readonly at: number;
  readonly bytes: number;
  readonly tables: RingTables | undefined;
}

/** Copies a child's lines that match `re` to stderr, prefixed by its name. */
export function traceLines(child: Child, re: RegExp): void {
  for (const st of [child.proc.stdout, child.proc.stderr]) st?.on("data", (b: Buffer) => {
    for (const line of b.toString("utf8").split("\n")) if (re.test(line)) process.stderr.write(`${child.name}: ${line.slice(0, 400)}\n`);
  });
}

export const epoch = (): number => performance.timeOrigin + performance.now();

function writeKubeconfig(tls: BenchTls, server: string, user: string): string {
  const file = join(tls.dir, `kubeconfig-${user}.json`);
  const kc = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "devapi", cluster: { server, "certificate-authority": tls.caFile } }],
    users: [{ name: "sidecar", user: { token: `bench-${user}` } }],
    contexts: [{ name: "bench", context: { cluster: "devapi", user: "sidecar", namespace: NS } }],
    "current-context": "bench",
  };
  writeFileSync(file, JSON.stringify(kc));
  return file;
}

async function startProxy(name: string, kubeconfig: string, tls: BenchTls, trace: boolean): Promise<Replica> {
  const args = ["proxy", "--kubeconfig", kubeconfig, "--resources", "pods", "--shards", "ring", "--ring", RING, "--pod-name", name, "--pod-namespace", NS];
  const proxy = asWorkload(start(`proxy-${name}`, process.execPath, [CLI, ...args, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--tls-cert", tls.certFile, "--tls-key", tls.keyFile, "--log-level", "info"]));
  // What a member says of its Lease and its relists (stderr).
  if (trace) traceLines(proxy, /fenc|renew|lease|expired|relist|wait-for-ranges|released|level":[45]0/i);
  const m = await proxy.waitLine(/"msg":"proxy ready"/, 120_000);
  const line = JSON.parse(m.input) as { url?: string; admin?: string };
  if (line.url === undefined || line.admin === undefined) throw new Error(`proxy ready line without url/admin: ${m.input}`);
  return { name, proxy, url: line.url, admin: line.admin };
}

async function debugOf(r: Replica): Promise<Debug | undefined> {
  try {
    return JSON.parse((await httpGet(`${r.admin}/debug/shardcar`, 10_000)).body) as Debug;
  } catch {
    return undefined;
  }
}

/** `fn` over `items`, at most `limit` at a time. */
export async function pool<T, R>(items: readonly T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i] as T);
    }),
  );
  return out;
}

const rangeKey = (rs: ReadonlyArray<{ start: string; end: string }>): string => rs.map((r) => `${r.start}-${r.end}`).join(",");

/** Members that own a slot in `pending` they do not own in `committed`. */
export function gainersOf(t: RingTables): string[] {
  const p = t.pending;
  if (p === undefined) return [];
  const out = new Set<string>();
  p.owners.forEach((o, s) => {
    if (o !== undefined && t.committed.owners[s] !== o) out.add(o);
  });
  return [...out].sort();
}

/** The most intervals open at one instant. */
export function maxConcurrent(intervals: ReadonlyArray<readonly [number, number]>): number {
  const edges = intervals.flatMap(([a, b]) => [[a, 1] as const, [b, -1] as const]).sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let open = 0;
  let most = 0;
  for (const [, d] of edges) {
    open += d;
    most = Math.max(most, open);
  }
  return most;
}

export interface RingRigOptions {
  readonly name: string;
  readonly members: number;
  readonly pods: number;
  /** Copy the leader's and the members' log lines to stderr. */
  readonly trace: boolean;
}

export class RingRig {
  readonly slotCount = DEFAULT_SLOT_COUNT;
  readonly live = new Map<string, Replica>();
  readonly seen: RingSeen[] = [];
  latest: RingSeen | undefined;
  /** Pods per slot in the store. */
  perSlot: number[] = [];
  uids: readonly string[] = [];
  devapi!: Child;
  fleet!: Child;
  coordinator!: Child;
  metricsUrl = "";
  /** One member's share straight from devapi, and one full list (one unsharded replica's start). */
  probe = { ms: Number.NaN, items: 0 };
  fullProbe = { ms: Number.NaN, items: 0 };
  readonly #o: RingRigOptions;
  #tls: BenchTls | undefined;
  #kubeconfig = "";
  #ringWatch: { stop: () => void } | undefined;
  // One question to the fleet at a time: its replies carry no name, so two
  // "add"s in flight could each take the other's "added".
  #fleetTurn = Promise.resolve();

  constructor(o: RingRigOptions) {
    this.#o = o;
  }

  async start(): Promise<void> {
    const tls = (this.#tls = await benchTls(this.#o.name));
    this.devapi = asControlPlane(forkTs("devapi", DEVAPI, ["--pods", String(this.#o.pods), "--cert", tls.certFile, "--key", tls.keyFile], ["--max-old-space-size=8192"]));
    const ready = await ask<{ url: string }>(this.devapi, { type: "" }, "ready", 600_000);
    const { uids } = await ask<{ uids: string[] }>(this.devapi, { type: "inventory" }, "inventory", 120_000);
    this.uids = uids;
    this.perSlot = Array.from({ length: this.slotCount }, () => 0);
    for (const u of uids) {
      const s = slotOfValue(u, this.slotCount);
      this.perSlot[s] = (this.perSlot[s] ?? 0) + 1;
    }
    this.#kubeconfig = writeKubeconfig(tls, ready.url, "sidecar");
    this.fleet = asWorkload(forkTs("reflectors", FLEET, ["--ca", tls.caFile], ["--max-old-space-size=4096"]));
    await ask(this.fleet, { type: "" }, "ready", 60_000);
    // The manager as deployed (cert-manager mode: it reads tls.crt/tls.key from the bench's directory).
    this.coordinator = asControlPlane(start(
      "manager",
      process.execPath,
      [CLI, "manager", "--image", "shardcar:bench", "--cert-mode", "cert-manager", "--cert-dir", tls.dir, "--namespace", NS, "--webhook-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
      { ...process.env, KUBECONFIG: writeKubeconfig(tls, ready.url, "manager") },
    ));
    this.metricsUrl = (await this.coordinator.waitLine(/serving metrics on (\S+)/, 60_000))[1] ?? "";
    // The leader's own account of its terms and tables (stderr).
    if (this.#o.trace) traceLines(this.coordinator, /leader|abandon|refus|rebuil|step|lost|publish|commit|settl/i);

    const share = slotsToRanges(Array.from({ length: Math.ceil(this.slotCount / this.#o.members) }, (_, i) => i), this.slotCount);
    this.probe = await ask<{ ms: number; items: number }>(this.fleet, { type: "probe", server: ready.url, token: "bench-probe", selector: canonicalSelector("uid", share) ?? "" }, "probe", 120_000);
    this.fullProbe = await ask<{ ms: number; items: number }>(this.fleet, { type: "probe", server: ready.url, token: "bench-probe", selector: "" }, "probe", 300_000);

    // The ShardRing as the members see it, every write.
    const api = new ApiClient(directConnection({ server: ready.url, ca: tls.caPem, token: "bench-observer" }));
    this.#ringWatch = watchObjects<RingObject>({
      api,
      path: RingApi.path(NS),
      list: () => new RingApi(api).list(NS),
      decode: decodeRing,
      clock: systemClock,
      log: silentLogger(),
      onChange: (objs) => {
        const obj = objs.get(`${NS}/${RING}`);
        if (obj === undefined) return;
        const t = decodeTables(obj.status, this.slotCount);
        this.latest = { at: epoch(), bytes: Buffer.byteLength(JSON.stringify(obj)), tables: t.ok ? t.value : undefined };
        this.seen.push(this.latest);
      },
    });
  }

  askFleet<T = unknown>(msg: { type: string } & Record<string, unknown>, reply: string, timeoutMs = 10_000): Promise<T> {
    const turn = this.#fleetTurn.then(() => ask<T>(this.fleet, msg, reply, timeoutMs));
    this.#fleetTurn = turn.then(
      () => undefined,
      () => undefined,
    );
    return turn;
  }

  /** A member's proxy starts, then its controller (the fleet's reflector). */
  async join(name: string): Promise<Replica> {
    const r = await startProxy(name, this.#kubeconfig, this.#tls as BenchTls, this.#o.trace);
    this.live.set(name, r);
    await this.askFleet({ type: "add", name, server: r.url, token: `bench-${name}` }, "added");
    return r;
  }

  /** The member's controller stops; it is no longer live. */
  async drop(name: string): Promise<void> {
    this.live.delete(name);
    await this.askFleet({ type: "remove", name }, "removed");
  }

  /** Undefined once coverage is exact for the live members; else what is still missing. */
  async unsettled(): Promise<string | undefined> {
    const t = this.latest?.tables;
    if (t === undefined) return "no committed table";
    if (t.pending !== undefined) return `generation ${t.pending.generation} pending (${gainersOf(t).length} gainers)`;
    const names = [...this.live.keys()].sort();
    const inTable = [...new Set(t.committed.owners.filter((o): o is string => o !== undefined))].sort();
    if (inTable.join(",") !== names.join(",")) return `committed generation ${t.committed.generation} has ${inTable.length} members, ${names.length} live`;
    const slots = Object.fromEntries(names.map((n) => [n, slotsOf(t.committed.owners, n)]));
    const exact = await this.askFleet<{ wrong: Array<{ name: string; objects: number; outside: number; expected: number }> }>({ type: "exact", slotCount: this.slotCount, members: slots, perSlot: this.perSlot }, "exact", 60_000);
    const w = exact.wrong[0];
    if (w !== undefined) return `${exact.wrong.length} caches not exact, e.g. ${w.name}: ${w.objects} pods (${w.outside} outside its slots), expected ${w.expected}`;
    const dbg = await pool([...this.live.values()], 8, async (r) => ({ r, d: await debugOf(r) }));
    for (const { r, d } of dbg) {
      if (d === undefined) return `${r.name}: no /debug/shardcar`;
      if (d.generation !== t.committed.generation) return `${r.name}: proxy at generation ${d.generation}, committed ${t.committed.generation}`;
      const want = slotsToRanges(slots[r.name] ?? [], this.slotCount).map((x) => ({ start: formatBound(x.start), end: formatBound(x.end) }));
      if (rangeKey(d.ranges) !== rangeKey(want)) return `${r.name}: proxy enforces other ranges than its committed slots`;
    }
    return undefined;
  }

  /** Waits for exact coverage; throws with the last reason and the newest log lines after `timeoutMs`. */
  async settle(what: string, timeoutMs: number): Promise<void> {
    const end = performance.now() + timeoutMs;
    let why: string | undefined = "not checked";
    const t0 = performance.now();
    while (performance.now() < end) {
      const was: string | undefined = why;
      why = await this.unsettled();
      // What coverage still waits for, each time it changes (stderr).
      if (this.#o.trace && why !== was) process.stderr.write(`${this.#o.name} ${what} +${Math.round(performance.now() - t0)} ms: ${why ?? "exact"}\n`);
      if (why === undefined) return;
      await sleep(200);
    }
    const logs = [...this.live.values()].slice(0, 4).map((r) => `${r.name}:\n  ${r.proxy.lines.slice(-6).join("\n  ")}`);
    throw new Error(`${this.#o.name} ${what}: coverage not exact within ${timeoutMs / 1000} s: ${why}\ncoordinator:\n  ${this.coordinator.lines.slice(-10).join("\n  ")}\n${logs.join("\n")}`);
  }

  /** Pod LISTs devapi served so far. */
  async podLists(): Promise<number> {
    return (await ask<{ lists: number }>(this.devapi, { type: "stats" }, "stats", 30_000)).lists;
  }

  /** Pod LISTs each live proxy sent so far (its /debug/shardcar). */
  async proxyLists(): Promise<Map<string, number>> {
    return new Map((await pool([...this.live.values()], 8, async (r) => [r.name, (await debugOf(r))?.resources.pods?.lists ?? 0] as const)).map(([n, v]) => [n, v]));
  }

  /** Stops every process the bench started (bench/lib/proc.ts) and removes the certificates. */
  async close(): Promise<void> {
    this.#ringWatch?.stop();
    await stopAll();
    this.#tls?.remove();
  }
}
