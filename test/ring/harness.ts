/**
 * Test harness for the ring against devapi: a coordinator, members each with
 * a stub proxy that "relists" after a delay, and a checker that samples the
 * members' caches every 100 ms.
 *
 * The stub proxy models what the real one guarantees:
 * - its *cache* (what the controller holds) changes only when a relist
 *   completes, `relistMs` after the last change of the ranges; then it calls
 *   `markApplied` for the ranges it relisted under;
 * - it *delivers* only `intersect(cache, current ranges)`: narrowing filters
 *   at once, widening counts only once relisted.
 *
 * While sampling is on, the checker also runs at every such change, so the
 * samples include every instant at which the answer could have changed.
 */
import { KubeConfig } from "@kubernetes/client-node";
import { connect, createServer, type Server, type Socket } from "node:net";
import { Registry } from "prom-client";
import { startDevApi, type DevApi, type KubeObject } from "../../src/devapi/index.ts";
import { ApiClient, directConnection } from "../../src/kube/client.ts";
import type { Ownership } from "../../src/shard/ownership.ts";
import { pino } from "pino";
import { createLogger, type Logger } from "../../src/log.ts";
import { complement, equal, intersect, ratio, size, union, type Range } from "../../src/shard/range.ts";
import { slotsToRanges } from "../../src/shard/table.ts";
import { runCoordinator, type CoordinatorOptions } from "../../src/ring/coordinator.ts";
import { RingMember, type RingMemberOptions } from "../../src/ring/member.ts";
import { APPLIED_ANNOTATION, LEAVING_ANNOTATION, memberLeaseName, RING_GROUP, RING_KIND, RING_VERSION, SLOTS_ANNOTATION } from "../../src/ring/names.ts";
import { parseSlots, type ShardRingStatusJson } from "../../src/ring/table.ts";
import { clusterClock, until } from "../support/wait.ts";
import { handoffLog } from "./handoff-log.ts";

export const SHARDRING_REF = { group: RING_GROUP, version: RING_VERSION, resource: "shardrings" } as const;
export const LEASE_REF = { group: "coordination.k8s.io", version: "v1", resource: "leases" } as const;

export const NS = "ring-test";
// Short enough for a fast suite, long enough that a loaded CI box does not
// miss renewals: 300 ms renewals against a 1.2 s deadline and 2 s leases.
export const TIMINGS = { leaseDurationSeconds: 2, renewDeadlineMs: 1_200, retryPeriodMs: 300 } as const;
export const RELIST_MS = 150;

export function kubeConfig(url: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "dev", server: url, skipTLSVerify: true }],
    users: [{ name: "u", token: "ring-test" }],
    contexts: [{ name: "c", cluster: "dev", user: "u" }],
    currentContext: "c",
  });
  return kc;
}

/**
 * A member's own client, as `shardcar proxy` builds it (src/kube/client.ts,
 * no client-node); the coordinator keeps the client-node {@link kubeConfig}.
 * Its calls time out on {@link clusterClock}, as the member's renew deadline does.
 */
export function memberClient(url: string): ApiClient {
  return new ApiClient(directConnection({ server: url, token: "ring-test" }), (ms, fn) => clusterClock.timer(ms, fn));
}

/**
 * The log of every coordinator, member and (in test/ring/replicas.ts) proxy:
 * at info level into {@link handoffLog}, which a timed-out wait reads to say
 * what it waited for; with RING_TEST_LOG=<file>, also the debug log appended
 * to that file (each line with this process's pid: test files run in
 * parallel and may share the file).
 */
export function ringTestLog(name: string): Logger {
  const file = process.env["RING_TEST_LOG"];
  const fileStream = file ? pino.destination({ dest: file, append: true, sync: true }) : undefined;
  const destination = {
    write(line: string): void {
      handoffLog.write(line);
      fileStream?.write(line);
    },
  };
  return createLogger({ level: file ? "debug" : "info", name, destination }).child({ pid: process.pid });
}

/** Waits `ms` of the members' and the leader's time (see test/support/wait.ts). */
export const sleep = (ms: number): Promise<void> => clusterClock.sleep(ms);
export { until };

export class StubProxy {
  cache: readonly Range[] = [];
  relists = 0;
  #cancel: (() => void) | undefined;
  readonly #member: RingMember;
  readonly #relistMs: number;
  readonly #onChange: () => void;
  constructor(member: RingMember, relistMs: number, onChange: () => void) {
    this.#member = member;
    this.#relistMs = relistMs;
    this.#onChange = onChange;
    member.subscribe((next) => this.#changed(next));
  }
  #changed(next: Ownership): void {
    this.#onChange(); // narrowing takes effect at once: check right now
    this.#cancel?.();
    this.#cancel = clusterClock.timer(this.#relistMs, () => {
      this.#cancel = undefined;
      // The relist started after the latest change, so it reflects `next`.
      this.cache = next.ranges;
      this.relists++;
      this.#onChange();
      this.#member.markApplied(next.generation);
    });
  }
  /** What the controller can reconcile right now. */
  delivering(): Range[] {
    return intersect(this.cache, this.#member.current().ranges);
  }
  stop(): void {
    this.#cancel?.();
  }
}

export interface TestMember {
  readonly name: string;
  readonly member: RingMember;
  readonly proxy: StubProxy;
  killed: boolean;
  left: boolean;
}

export interface Sample {
  readonly at: number;
  readonly phase: string;
  readonly uncovered: number;
  readonly doubled: number;
  /** Share of the keyspace two proxies deliver (reconcile) at once. */
  readonly deliveredTwice: number;
  /** Taken by the 100 ms timer (the others at a cache or range change). */
  readonly periodic: boolean;
}

export class RingEnv {
  readonly api: DevApi;
  readonly kc: KubeConfig;
  readonly ring: string;
  readonly members = new Map<string, TestMember>();
  readonly samples: Sample[] = [];
  /** Ownership changes whose generation did not grow (must stay empty). */
  readonly generationRegressions: string[] = [];
  phase = "setup";
  #coordinators: Array<{ abort: AbortController; done: Promise<void> }> = [];
  #sampler: (() => void) | undefined;

  private constructor(api: DevApi, ring: string) {
    this.api = api;
    this.kc = kubeConfig(api.url);
    this.ring = ring;
  }

  static async start(ring = "web"): Promise<RingEnv> {
    return new RingEnv(await startDevApi({ gate: "on" }), ring);
  }

  /** Creates the ShardRing up front (otherwise the leader creates it with the members' hint). */
  createRing(spec: Record<string, unknown>): void {
    this.api.store.create(SHARDRING_REF, { apiVersion: `${RING_GROUP}/${RING_VERSION}`, kind: RING_KIND, metadata: { name: this.ring, namespace: NS }, spec });
  }

  ringObject(): KubeObject | undefined {
    return this.api.store.get(SHARDRING_REF, NS, this.ring);
  }

  /** The ShardRing's status as the leader writes it (unvalidated: tests also write broken ones). */
  ringStatus(): Partial<ShardRingStatusJson> | undefined {
    const st = this.ringObject()?.status;
    return typeof st === "object" && st !== null ? st : undefined;
  }

  startCoordinator(over: Partial<CoordinatorOptions> = {}): { registry: Registry; stop: () => Promise<void> } {
    const abort = new AbortController();
    const registry = over.registry ?? new Registry();
    const done = runCoordinator(
      {
        kubeConfig: this.kc,
        namespace: NS,
        ringNamespace: NS,
        identity: `mgr-${this.#coordinators.length}`,
        election: TIMINGS,
        clock: clusterClock,
        registry,
        log: ringTestLog("coordinator"),
        ...over,
      },
      abort.signal,
    );
    const c = { abort, done };
    this.#coordinators.push(c);
    return {
      registry,
      stop: async () => {
        abort.abort();
        await done;
      },
    };
  }

  async addMember(name: string, over: Partial<RingMemberOptions> = {}, relistMs = RELIST_MS): Promise<TestMember> {
    const member = new RingMember({
      client: memberClient(this.api.url),
      namespace: NS,
      ring: this.ring,
      member: name,
      timings: TIMINGS,
      clock: clusterClock,
      leaveTimeoutMs: 15_000,
      log: ringTestLog(name),
      ...over,
    });
    // Besides the 100 ms sampler, every cache or range change is checked the
    // instant it happens, so a short violation cannot fall between samples.
    const proxy = new StubProxy(member, relistMs, () => {
      if (this.#sampler !== undefined) this.sample();
    });
    // The proxy tells new ranges from old by their generation: every change
    // must carry a higher one, except into and out of the fenced state (0).
    member.subscribe((next, prev) => {
      if (next.generation !== 0 && prev.generation !== 0 && next.generation <= prev.generation) {
        this.generationRegressions.push(`${name}: ${prev.generation} → ${next.generation}`);
      }
    });
    const m: TestMember = { name, member, proxy, killed: false, left: false };
    this.members.set(name, m);
    await member.start();
    return m;
  }

  async leave(name: string): Promise<void> {
    const m = this.members.get(name);
    if (m === undefined) throw new Error(`no member ${name}`);
    await m.member.leave();
    m.left = true;
    m.proxy.stop();
  }

  /** SIGKILL: the process is gone; its proxy delivers nothing from this instant. */
  kill(name: string): void {
    const m = this.members.get(name);
    if (m === undefined) throw new Error(`no member ${name}`);
    m.killed = true;
    m.member.halt();
    m.proxy.stop();
  }

  live(): TestMember[] {
    return [...this.members.values()].filter((m) => !m.killed && !m.left);
  }

  /** Share of the keyspace no live member delivers. */
  uncovered(): number {
    let all: Range[] = [];
    for (const m of this.live()) all = union(all, m.proxy.delivering());
    return ratio(complement(all));
  }

  /** Share of the keyspace held in two caches at once. */
  doubled(): number {
    const live = this.live();
    let twice: Range[] = [];
    for (let i = 0; i < live.length; i++)
      for (let j = i + 1; j < live.length; j++) twice = union(twice, intersect(live[i]?.proxy.cache ?? [], live[j]?.proxy.cache ?? []));
    return size(twice) === 0n ? 0 : ratio(twice);
  }

  /** Share of the keyspace two live proxies deliver at once. */
  deliveredTwice(): number {
    const live = this.live();
    let twice: Range[] = [];
    for (let i = 0; i < live.length; i++)
      for (let j = i + 1; j < live.length; j++) twice = union(twice, intersect(live[i]?.proxy.delivering() ?? [], live[j]?.proxy.delivering() ?? []));
    return size(twice) === 0n ? 0 : ratio(twice);
  }

  startSampling(everyMs = 100): void {
    this.#sampler = clusterClock.every(everyMs, () => this.sample(true));
  }

  sample(periodic = false): Sample {
    const s = { at: clusterClock.now(), phase: this.phase, uncovered: this.uncovered(), doubled: this.doubled(), deliveredTwice: this.deliveredTwice(), periodic };
    this.samples.push(s);
    return s;
  }

  /** Waits until the committed table has exactly `names`, nothing is pending, and every live cache has settled. */
  async settled(names: string[], timeoutMs = 10_000): Promise<void> {
    const want = [...names].sort().join(",");
    await until(
      `a committed table with exactly [${want}]`,
      () => {
        const st = this.ringStatus();
        if (st?.committed === undefined || st.pending !== undefined) return false;
        const got = st.committed.members.map((m) => m.name).sort().join(",");
        if (got !== want) return false;
        const committed = st.committed;
        const slotCount = st.slotCount ?? 256;
        return this.live().every((m) => {
          const cur = m.member.current();
          const entry = committed.members.find((x) => x.name === m.name);
          const slots = entry === undefined ? { ok: true as const, value: [] } : parseSlots(entry.slots, slotCount);
          // Exactly its committed slots (not still widened), and relisted.
          return slots.ok && cur.generation === committed.generation && equal(cur.ranges, slotsToRanges(slots.value, slotCount)) && equal(m.proxy.cache, cur.ranges);
        });
      },
      timeoutMs,
    ).catch((e: unknown) => {
      const members = this.live().map((m) => `${this.describeMember(m.name, m.member)}; stub proxy's cache ${ratio(m.proxy.cache).toFixed(3)} of the keyspace`);
      throw new Error([String(e instanceof Error ? e.message : e), this.describeTables(), ...members].join("\n  "));
    });
  }

  /** The ShardRing's tables, for a wait that timed out. */
  describeTables(): string {
    const st = this.ringStatus();
    const table = (tb: { generation: number; members: Array<{ name: string; slots: string }> } | undefined): string =>
      tb === undefined ? "none" : `g${tb.generation} [${tb.members.map((m) => `${m.name}: ${m.slots || "no slots"}`).join("; ")}]`;
    return `ShardRing ${this.ring}: committed ${table(st?.committed)}; pending ${st?.pending === undefined ? "none" : `${table(st.pending)} in phase ${st.pending.phase}`}`;
  }

  /** A member's ranges and what its Lease tells the leader, for a wait that timed out. */
  describeMember(name: string, member: RingMember): string {
    const cur = member.current();
    const lease = this.api.store.get(LEASE_REF, NS, memberLeaseName(this.ring, name));
    const ann = lease?.metadata?.annotations ?? {};
    const spec = (lease?.spec ?? {}) as { holderIdentity?: string; renewTime?: string };
    const leaving = ann[LEAVING_ANNOTATION] === "true" ? ", leaving" : "";
    return (
      `${name}: enforces g${cur.generation} (${ratio(cur.ranges).toFixed(3)} of the keyspace); ` +
      `its Lease: holder ${spec.holderIdentity ?? "none"}, applied g${ann[APPLIED_ANNOTATION] ?? "?"}, slots ${ann[SLOTS_ANNOTATION] || "none"}${leaving}, renewed ${spec.renewTime ?? "never"}`
    );
  }

  async stop(): Promise<void> {
    this.#sampler?.();
    for (const m of this.members.values()) {
      m.member.halt();
      m.proxy.stop();
    }
    for (const c of this.#coordinators) c.abort.abort();
    await Promise.all(this.#coordinators.map((c) => c.done));
    await this.api.close();
  }
}

/**
 * A TCP relay in front of devapi that can be partitioned: while partitioned
 * it forwards nothing in either direction (requests hang, as behind a real
 * partition).
 */
export class Link {
  readonly url: string;
  readonly #server: Server;
  readonly #sockets: Set<Socket>;
  readonly #state: { partitioned: boolean };
  private constructor(server: Server, url: string, sockets: Set<Socket>, state: { partitioned: boolean }) {
    this.#server = server;
    this.url = url;
    this.#sockets = sockets;
    this.#state = state;
  }
  static async to(target: string): Promise<Link> {
    const { hostname, port } = new URL(target);
    const sockets = new Set<Socket>();
    const state = { partitioned: false };
    const server = createServer((client) => {
      const upstream = connect(Number(port), hostname);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on("close", () => sockets.delete(s));
        s.on("error", () => s.destroy());
      }
      client.on("data", (b) => {
        if (!state.partitioned) upstream.write(b);
      });
      upstream.on("data", (b) => {
        if (!state.partitioned) client.write(b);
      });
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const addr = server.address();
    return new Link(server, `http://127.0.0.1:${typeof addr === "object" && addr !== null ? addr.port : 0}`, sockets, state);
  }
  partition(): void {
    this.#state.partitioned = true;
  }
  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }
}
