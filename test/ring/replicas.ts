/**
 * The ring with real proxies and real client-node informers, shared by
 * test/ring/proxy.test.ts (overlap) and test/ring/proxy-exclusive.test.ts:
 * each member is a RingMember driven by the real coordinator, followed by its
 * own shardcar proxy, with a pod informer behind that proxy (startPodReplica,
 * as the demo runs a controller replica). Plus a sampler that snapshots the
 * store, every cache and the members' active proxy ranges.
 */
import { connect, createServer, type Socket } from "node:net";
import type { Test } from "tap";
import { seedPods, type KubeObject } from "../../src/devapi/index.ts";
import { startPodReplica, type Replica } from "../../src/demo/replica.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, equal, ratio, union, type Range } from "../../src/shard/range.ts";
import { slotsToRanges } from "../../src/shard/table.ts";
import { parseSlots } from "../../src/ring/table.ts";
import { parseResources, type ShardedResource } from "../../src/shard/spec.ts";
import { RingMember } from "../../src/ring/member.ts";
import type { ProxyFiltering } from "../../src/proxy/request/filtering.ts";
import { cacheContents, keyValue } from "../support/cluster.ts";
import { clusterClock } from "../support/wait.ts";
import { describeProxyHandoff, forgetReplica } from "./handoff-log.ts";
import { memberClient, NS, ringTestLog, RingEnv, TIMINGS, until } from "./harness.ts";

export const FULL_KEYSPACE: readonly Range[] = [{ start: 0n, end: 1n << 64n }];

export interface RingReplica {
  readonly member: RingMember;
  readonly replica: Replica;
}

/** What the sampler saw at one instant (one synchronous pass: a consistent picture). */
export interface Snapshot {
  readonly at: number;
  /** `ns/name@uid` of every pod in the store. */
  readonly store: ReadonlySet<string>;
  /** Each live replica's informer cache, as `ns/name@uid`. */
  readonly caches: ReadonlyMap<string, ReadonlySet<string>>;
  /** The union of the members' active proxy ranges. */
  readonly covered: readonly Range[];
}

export interface ReplicaRingOptions {
  /** The ShardRing's name (one devapi per run, so any name will do). */
  readonly ring: string;
  readonly pods: number;
  readonly namespaces: readonly string[];
  /** Creates the ShardRing with this handoff mode up front; otherwise the leader creates it from the members' hint (overlap). */
  readonly handoff?: "overlap" | "exclusive";
  /** Called for every replica once its proxy and informer run, before its member joins the ring. */
  readonly onReplica?: (name: string, r: RingReplica) => void;
  /** How each member's proxy asks the server to filter (labels mode reads the slot count from the member); default shardselector. */
  readonly filtering?: (member: RingMember) => ProxyFiltering;
  /** The ShardRing's slot count, when it is created up front (with `handoff`). Default 256. */
  readonly slots?: number;
}

export class ReplicaRing {
  readonly env: RingEnv;
  /** The live replicas: a member that left or was killed is removed once its proxy stopped. */
  readonly replicas = new Map<string, RingReplica>();
  readonly #resources: readonly ShardedResource[] = parseResources("pods");
  readonly #onReplica: ((name: string, r: RingReplica) => void) | undefined;
  readonly #filtering: ((member: RingMember) => ProxyFiltering) | undefined;
  readonly #samplers = new Set<() => void>();
  /**
   * Every pod in the store (`ns/name` → `ns/name@uid` and the hash of its
   * uid, read as expectedShard reads it), kept by a synchronous store watch.
   * Listing the store copies (parses) every pod; at every 100 ms sample and
   * every poll for exact caches that was most of these tests' CPU, which a
   * loaded machine cannot spare.
   */
  readonly #pods = new Map<string, { readonly id: string; readonly hash: bigint }>();
  /** Per member, the ownership changes it published (generation 0: fenced), for a wait that times out. */
  readonly #published = new Map<string, Array<{ readonly at: number; readonly generation: number; readonly owned: number }>>();
  readonly #unwatch: () => void;

  private constructor(env: RingEnv, opts: ReplicaRingOptions) {
    this.env = env;
    this.#onReplica = opts.onReplica;
    this.#filtering = opts.filtering;
    const index = (o: KubeObject, deleted = false): void => {
      const key = `${o.metadata?.namespace}/${o.metadata?.name}`;
      if (deleted) this.#pods.delete(key);
      else this.#pods.set(key, { id: `${key}@${o.metadata?.uid}`, hash: fnv1a64(keyValue(o, "uid")) });
    };
    this.#unwatch = env.api.store.watch("pods", ({ type, object }) => index(object, type === "DELETED"));
    for (const o of env.api.store.list("pods")) index(o);
  }

  /** devapi with `pods` seeded pods and a running coordinator; stopped at `t`'s teardown. */
  static async start(t: Test, opts: ReplicaRingOptions): Promise<ReplicaRing> {
    const ring = new ReplicaRing(await RingEnv.start(opts.ring), opts);
    t.teardown(() => {
      // tap's own timeout ends the test without a word about the ring: say where it stood.
      if (t.timedOut) process.stderr.write(`${t.name}: timed out; the ring then:\n  ${ring.describe().join("\n  ")}\n`);
      return ring.stop();
    });
    if (opts.handoff !== undefined) ring.env.createRing({ handoff: opts.handoff, slots: opts.slots ?? 256 });
    seedPods(ring.env.api, { count: opts.pods, namespaces: opts.namespaces });
    ring.env.startCoordinator();
    return ring;
  }

  /**
   * A new replica joins: its proxy and informer start (owning nothing), then
   * its member. The proxy reaches devapi at `upstreamUrl` (default: directly);
   * the member always talks to devapi directly.
   */
  async add(name: string, opts: { upstreamUrl?: string } = {}): Promise<void> {
    forgetReplica(name);
    const log = ringTestLog(name);
    const member = new RingMember({ client: memberClient(this.env.api.url), namespace: NS, ring: this.env.ring, member: name, timings: TIMINGS, clock: clusterClock, log });
    const filtering = this.#filtering?.(member);
    const replica = await startPodReplica({ name, upstreamUrl: opts.upstreamUrl ?? this.env.api.url, resources: this.#resources, ownership: member, logger: log, ...(filtering === undefined ? {} : { filtering }) });
    const r = { member, replica };
    this.replicas.set(name, r);
    const published: Array<{ at: number; generation: number; owned: number }> = [];
    this.#published.set(name, published);
    member.subscribe((next) => published.push({ at: clusterClock.now(), generation: next.generation, owned: ratio(next.ranges) }));
    this.#onReplica?.(name, r);
    await member.start();
  }

  /** Scale-down: the member leaves gracefully, then its process (proxy and informer) exits. */
  async leave(name: string): Promise<void> {
    const leaving = this.replicas.get(name);
    await leaving?.member.leave();
    await leaving?.replica.stop();
    this.replicas.delete(name);
  }

  /** SIGKILL: the member stops renewing and its proxy vanishes, with no goodbye. */
  async kill(name: string): Promise<void> {
    const killed = this.replicas.get(name);
    killed?.member.halt();
    await killed?.replica.stop();
    this.replicas.delete(name);
  }

  /**
   * Waits until the committed table has exactly `names`, nothing is pending,
   * and every one of them enforces exactly its committed slots under the
   * committed generation. (Their informers may still be relisting.)
   */
  async settled(names: readonly string[], timeoutMs = 15_000): Promise<void> {
    await until(
      `members [${names.join(",")}] with exact caches`,
      () => {
        const st = this.env.ringStatus();
        if (st?.committed === undefined || st.pending !== undefined) return false;
        if (st.committed.members.map((m) => m.name).sort().join(",") !== [...names].sort().join(",")) return false;
        const slotCount = st.slotCount ?? 256;
        return names.every((n) => {
          const entry = st.committed?.members.find((m) => m.name === n);
          const slots = entry === undefined ? undefined : parseSlots(entry.slots, slotCount);
          const cur = this.replicas.get(n)?.member.current();
          return slots?.ok === true && cur !== undefined && cur.generation === st.committed?.generation && equal(cur.ranges, slotsToRanges(slots.value, slotCount));
        });
      },
      timeoutMs,
    ).catch((e: unknown) => {
      throw new Error([String(e instanceof Error ? e.message : e), ...this.describe()].join("\n  "));
    });
  }

  /**
   * The state a handoff waits on: the ShardRing's tables, and per member its
   * ranges, its Lease (the applied generation the leader reads), its proxy's
   * last range change and owed lineages, and its informer's cache against
   * its ranges.
   */
  describe(): string[] {
    const lines = [this.env.describeTables()];
    for (const [name, { member, replica }] of this.replicas) {
      const { extra, missing } = this.cacheDiff(name);
      const pods = replica.proxy.proxy.stats().get("pods");
      const traffic = pods === undefined ? "no pod requests" : `${pods.lists} LISTs, ${pods.watches} WATCHes, ${pods.forcedRelists} forced relists, ${pods.narrowedWatches} narrowed`;
      lines.push(
        this.env.describeMember(name, member),
        `  ${describeProxyHandoff(name)}; ${traffic}`,
        `  ${this.#describeLedger(name, replica)}`,
        `  informer: ${cacheContents(replica).size} objects, ${extra.length} outside its ranges, ${missing.length} of its ranges missing`,
      );
    }
    return lines;
  }

  /**
   * What the proxy's handoff ledger waits for right now (each owed lineage:
   * how long owed, what of it is open or in flight, when its quiet bound
   * lets it go), and the ownership the member published in the last 20 s: a
   * run of generation 0 is a member fencing itself again and again.
   */
  #describeLedger(name: string, replica: Replica): string {
    const h = replica.proxy.proxy.handoff();
    const now = clusterClock.now();
    const owed = h.waiting.map((o) => `${o.lineage} owed ${Math.round(o.owedMs)} ms (${o.open} open, ${o.inFlight} in flight, ${o.releaseInMs === undefined ? "busy" : `released in ${Math.round(o.releaseInMs)} ms`})`);
    const published = (this.#published.get(name) ?? []).filter((p) => p.at >= now - 20_000).map((p) => `g${p.generation}:${p.owned.toFixed(2)}@-${Math.round(now - p.at)}ms`);
    return `ledger: g${h.generation} epoch ${h.epoch}, ${h.applied ? "applied" : "not applied"}, ${h.held} held, owes ${owed.length === 0 ? "nothing" : owed.join("; ")}; published in the last 20 s: ${published.join(" ") || "nothing"}`;
  }

  /** Pod LISTs devapi has served so far (every informer's relists, through its proxy). */
  podLists(): number {
    return this.env.api.stats.lists.get("pods") ?? 0;
  }

  /** The union of the live members' active proxy ranges. */
  covered(): Range[] {
    let all: Range[] = [];
    for (const { member } of this.replicas.values()) all = union(all, member.current().ranges);
    return all;
  }

  snapshot(): Snapshot {
    const store = new Set([...this.#pods.values()].map((p) => p.id));
    const caches = new Map<string, Set<string>>();
    for (const [name, { replica }] of this.replicas) caches.set(name, cacheContents(replica));
    return { at: clusterClock.now(), store, caches, covered: this.covered() };
  }

  /** Calls `fn` with a snapshot every `everyMs` until the returned function is called (or the ring stops). */
  sampleEvery(everyMs: number, fn: (s: Snapshot) => void): () => void {
    const stop = clusterClock.every(everyMs, () => fn(this.snapshot()));
    this.#samplers.add(stop);
    return () => {
      stop();
      this.#samplers.delete(stop);
    };
  }

  /** What `name`'s cache holds outside its member's ranges, and what it lacks inside them. */
  cacheDiff(name: string): { extra: string[]; missing: string[] } {
    const r = this.replicas.get(name);
    if (r === undefined) throw new Error(`no replica ${name}`);
    const ranges = r.member.current().ranges;
    const want = new Set([...this.#pods.values()].filter((p) => contains(ranges, p.hash)).map((p) => p.id));
    const got = cacheContents(r.replica);
    return { extra: [...got].filter((k) => !want.has(k)), missing: [...want].filter((k) => !got.has(k)) };
  }

  /** Whether every live cache holds exactly its member's ranges of the store. */
  cachesExact(): boolean {
    return [...this.replicas.keys()].every((n) => {
      const d = this.cacheDiff(n);
      return d.extra.length === 0 && d.missing.length === 0;
    });
  }

  async stop(): Promise<void> {
    this.#unwatch();
    for (const stop of this.#samplers) stop();
    this.#samplers.clear();
    for (const { member, replica } of this.replicas.values()) {
      member.halt();
      await replica.stop();
    }
    await this.env.stop();
  }
}

/**
 * A TCP relay to `target` that delivers everything the server sends
 * `delayMs` late (in order): a proxy behind it sees every response, and so
 * finishes every LIST, that much later. Closed at `t`'s teardown.
 */
export async function slowLink(t: Test, target: string, delayMs: number): Promise<string> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
    }
    const later = (f: () => void): void => void setTimeout(f, delayMs);
    client.on("data", (b) => upstream.write(b));
    upstream.on("data", (b) => later(() => client.destroyed || client.write(b)));
    upstream.on("end", () => later(() => client.end()));
    upstream.on("close", () => later(() => client.destroy()));
    client.on("close", () => upstream.destroy());
    for (const s of [client, upstream]) s.on("error", () => s.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  const addr = server.address();
  return `http://127.0.0.1:${typeof addr === "object" && addr !== null ? addr.port : 0}`;
}
