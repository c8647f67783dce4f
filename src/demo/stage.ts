/**
 * The demo's stage: devapi, the manager's coordinator, the controller
 * replicas with their unsharded twins, and the sampler that measures them.
 * The scenes (scenes.ts) act on it and the checks (checks.ts) read it; it
 * is apart from the runner (run.ts) because both of those import it, and
 * the runner imports them.
 */
import { KubeConfig } from "@kubernetes/client-node";
import type { Writable } from "node:stream";
import type { DevApi, ObjectIdentity } from "../devapi/index.ts";
import type { Logger } from "../log.ts";
import { StaticOwnership } from "../shard/ownership.ts";
import { runCoordinator, RingMember, RING_GROUP, RING_VERSION } from "../ring/index.ts";
import { fnv1a64 } from "../shard/hash.ts";
import { contains, FULL_RANGE, ratio } from "../shard/range.ts";
import { slotLabelKey } from "../shard/slots.ts";
import { parseResources, type ShardedResource } from "../shard/spec.ts";
import type { ProxyFiltering } from "../proxy/request/filtering.ts";
import { DEPLOYMENTS, familyCensus, REPLICASETS } from "./families.ts";
import type { DemoLabelSlots } from "./label-slots.ts";
import { ParentChildController } from "./parent-child-controller.ts";
import type { Marker } from "./report.ts";
import { startPodReplica, type Replica } from "./replica.ts";

/** What `shardcar demo` passes in. */
export interface DemoOptions {
  readonly out: Writable;
  readonly logger: Logger;
  readonly pods: number;
  /** Replicas to start with; the demo scales to one more, then kills one. Default 3. */
  readonly replicas?: number;
  readonly signal: AbortSignal;
  /** Where to write the HTML report. */
  readonly reportPath: string;
}

/** One replica's line in a scene's table. */
export interface ReplicaRow {
  readonly replica: string;
  /** Share of the keyspace its ranges cover. */
  readonly share: number;
  readonly ranges: string;
  readonly cached: number;
  readonly expected: number;
  /** Bytes its controller received during the scene. */
  readonly bytesToController: number;
  /** Bytes its proxy received from the apiserver during the scene. */
  readonly bytesFromServer: number;
  /** Bytes its unsharded twin received during the scene. */
  readonly twinBytes: number;
  readonly filteredBy: string;
}

/** Where the seeded and churned pods live. */
export const NAMESPACES = ["alpha", "beta", "gamma", "delta", "team-a", "team-b"];
/** The one ShardRing the controllers follow: its namespace, name and resource. */
export const RING_NS = "demo";
export const RING = "controller";
export const RING_REF = { group: RING_GROUP, version: RING_VERSION, resource: "shardrings" } as const;
// Short ring timings so a killed replica's slots move within seconds (the
// defaults are client-go's 15 s / 10 s / 2 s): retry < renew deadline < lease.
// Not shorter: every component shares one event loop here, which stalls for
// most of a second while the unsharded twins parse whole lists, and a member
// that cannot renew within its deadline rightly fences itself.
export const TIMINGS = { leaseDurationSeconds: 5, renewDeadlineMs: 3_500, retryPeriodMs: 500 } as const;
/** How long a scene may take to settle before its coverage counts as broken. */
export const SETTLE_TIMEOUT_MS = 20_000;
/** The sampler's period: the resolution of the charts and of the gaps the checks measure. */
export const SAMPLE_MS = 250;

interface Incarnation {
  readonly replica: Replica;
  readonly twin: Replica;
  /** The Deployment/ReplicaSet controller behind the same proxy, once the controllers run in labels mode. */
  readonly family?: ParentChildController;
  /** How its proxy asks the apiserver to filter. */
  readonly filter: ProxyFiltering["mode"];
}

/** What the controllers are rolled out with: the proxy's filter mode and resources, and whether they also run the Deployment controller. */
interface Wiring {
  readonly filter: ProxyFiltering["mode"];
  readonly resources: readonly ShardedResource[];
  readonly families: boolean;
}

/** One controller replica: its ring member, the current sharded replica and twin, and bytes of earlier incarnations. */
class DemoReplica {
  readonly name: string;
  readonly member: RingMember;
  live: Incarnation | undefined;
  alive = true;
  #done = { client: 0, upstream: 0, twinClient: 0, twinUpstream: 0 };

  constructor(name: string, member: RingMember) {
    this.name = name;
    this.member = member;
  }

  /** Cumulative bytes over every incarnation. */
  bytes(): { client: number; upstream: number; twinClient: number; twinUpstream: number } {
    const s = this.live?.replica.proxy.proxy.stats().get("pods");
    const w = this.live?.twin.proxy.proxy.stats().get("pods");
    return {
      client: this.#done.client + (s?.clientBytes ?? 0),
      upstream: this.#done.upstream + (s?.upstreamBytes ?? 0),
      twinClient: this.#done.twinClient + (w?.clientBytes ?? 0),
      twinUpstream: this.#done.twinUpstream + (w?.upstreamBytes ?? 0),
    };
  }

  async stopIncarnation(): Promise<void> {
    const inc = this.live;
    if (inc === undefined) return;
    this.#done = this.bytes();
    this.live = undefined;
    await inc.family?.stop();
    await Promise.all([inc.replica.stop(), inc.twin.stop()]);
  }
}

function podKey(o: { metadata?: { namespace?: string; name?: string; uid?: string } }): string {
  return `${o.metadata?.namespace}/${o.metadata?.name}@${o.metadata?.uid}`;
}

/** {@link podKey} of a store identity (the samplers read devapi without copying its objects). */
function identityKey(o: ObjectIdentity): string {
  return `${o.namespace}/${o.name}@${o.uid}`;
}

function slotsText(ranges: readonly { start: bigint; end: bigint }[]): string {
  // Slot indices of 256, the ring's unit: `0-63,128-140`.
  const parts = ranges.map((r) => {
    const a = Number((r.start * 256n) >> 64n);
    const b = Number((r.end * 256n) >> 64n) - 1;
    return a === b ? `${a}` : `${a}-${b}`;
  });
  return parts.length === 0 ? "(none)" : parts.join(",");
}

/** Resolves after `ms`; not cancellable. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** What the sampler saw at one tick, `t` seconds into the run. */
export interface Sample {
  readonly t: number;
  readonly cached: ReadonlyMap<string, number>;
  readonly bytes: ReadonlyMap<string, number>;
  readonly twinBytes: number;
  /** Bytes the apiserver sent each replica's proxy, and replica-0's unsharded twin. */
  readonly upstream: ReadonlyMap<string, number>;
  readonly twinUpstream: number;
  readonly coverage: number;
  readonly doubled: number;
}

/** The stage: devapi, the coordinator, the replicas and their samples; scenes call its methods, checks read its state. */
export class Demo {
  readonly api: DevApi;
  readonly opts: DemoOptions;
  /** The operator's (and the manager's) view of devapi. */
  readonly kc: KubeConfig;
  readonly replicas = new Map<string, DemoReplica>();
  readonly samples: Sample[] = [];
  readonly markers: Marker[] = [];
  readonly t0 = Date.now();
  wiring: Wiring = { filter: "shardselector", resources: parseResources("pods"), families: false };
  labelSlots: DemoLabelSlots | undefined;
  #coordinator: { abort: AbortController; done: Promise<void> } | undefined;
  #sampler: NodeJS.Timeout | undefined;
  #previous = new Set<string>();
  #churn = 0;

  constructor(api: DevApi, opts: DemoOptions) {
    this.api = api;
    this.opts = opts;
    this.kc = this.kubeConfig("demo-manager");
  }

  /**
   * devapi on loopback over plain HTTP (client-node requires skipTLSVerify
   * for http://; there is no TLS to verify). One per identity, as each pod
   * has its own token: client-node keeps one connection pool per
   * KubeConfig, so a member's renewals never queue behind another's watches.
   */
  kubeConfig(token: string): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "devapi", server: this.api.url, skipTLSVerify: true }],
      users: [{ name: token, token }],
      contexts: [{ name: "demo", cluster: "devapi", user: token }],
      currentContext: "demo",
    });
    return kc;
  }

  log(s: string): void {
    this.opts.out.write(s);
  }

  startCoordinator(): void {
    const abort = new AbortController();
    const done = runCoordinator(
      { kubeConfig: this.kc, namespace: RING_NS, ringNamespace: RING_NS, identity: "manager-0", election: TIMINGS, log: this.opts.logger.child({ component: "manager" }), tasks: this.labelSlots === undefined ? [] : [this.labelSlots.labeller] },
      abort.signal,
    );
    this.#coordinator = { abort, done };
  }

  async stopCoordinator(): Promise<void> {
    this.#coordinator?.abort.abort();
    await this.#coordinator?.done;
  }

  async #incarnate(r: DemoReplica): Promise<void> {
    const logger = this.opts.logger;
    const w = this.wiring;
    const member = r.member;
    // Labels mode: the slot label of this ring, in the slots of the member's table.
    const filtering: ProxyFiltering | undefined = w.filter === "labels" ? { mode: "labels", labelKey: slotLabelKey(RING), slotCount: () => member.slotCount } : undefined;
    const [replica, twin] = await Promise.all([
      startPodReplica({ name: r.name, upstreamUrl: this.api.url, resources: w.resources, ownership: r.member, logger, token: `controller-${r.name}`, ...(filtering === undefined ? {} : { filtering }) }),
      // The unsharded twin: the same pod informer, in shardselector mode over the whole keyspace, as before sharding.
      startPodReplica({ name: `${r.name}-twin`, upstreamUrl: this.api.url, resources: parseResources("pods"), ownership: new StaticOwnership([FULL_RANGE]), logger, token: `twin-${r.name}` }),
    ]);
    let family: ParentChildController | undefined;
    if (w.families) {
      family = new ParentChildController({ identity: r.name, kubeConfig: replica.kubeConfig, parent: DEPLOYMENTS, child: REPLICASETS });
      // Not awaited: a joining member's proxy holds the first LISTs until the member has slots, which it gets after this.
      family.start().catch(() => undefined);
    }
    r.live = { replica, twin, filter: w.filter, ...(family === undefined ? {} : { family }) };
  }

  async addReplica(name: string): Promise<void> {
    const member = new RingMember({ kubeConfig: this.kubeConfig(`sidecar-${name}`), namespace: RING_NS, ring: RING, member: name, timings: TIMINGS, leaveTimeoutMs: 20_000, log: this.opts.logger.child({ member: name }) });
    const r = new DemoReplica(name, member);
    this.replicas.set(name, r);
    // The proxy is the member's OwnershipSource consumer: it must subscribe
    // before the member publishes its first ranges.
    await this.#incarnate(r);
    await member.start(this.opts.signal);
  }

  /** SIGKILL: the process is gone; no Lease release, no goodbye. */
  async killReplica(name: string): Promise<void> {
    const r = this.replicas.get(name);
    if (r === undefined) return;
    r.alive = false;
    r.member.halt();
    await r.stopIncarnation();
  }

  /**
   * A rolling restart: each live controller in turn gets a new proxy and a
   * new informer (a container restart); ring membership is kept, so only
   * the restarting replica's pods are briefly in no cache.
   */
  async restartReplicas(): Promise<void> {
    for (const r of this.live()) {
      await r.stopIncarnation();
      await this.#incarnate(r);
    }
  }

  live(): DemoReplica[] {
    return [...this.replicas.values()].filter((r) => r.alive);
  }

  cache(r: DemoReplica): Set<string> {
    return new Set(r.live?.replica.informer.list().map(podKey) ?? []);
  }

  /** `pods`: the store's pods, when the caller has read them already. */
  expected(r: DemoReplica, pods: readonly ObjectIdentity[] = this.api.store.identities("pods")): Set<string> {
    const ranges = r.member.current().ranges;
    return new Set(pods.filter((o) => contains(ranges, fnv1a64(o.uid))).map(identityKey));
  }

  startSampling(): void {
    this.#sampler = setInterval(() => this.sample(), SAMPLE_MS);
  }

  stopSampling(): void {
    if (this.#sampler !== undefined) clearInterval(this.#sampler);
  }

  /**
   * Coverage counts the pods that existed at the previous sample and still
   * exist: a pod created a moment ago may not have reached any cache yet,
   * which is latency, not a gap.
   */
  sample(): void {
    const now = new Set(this.api.store.identities("pods").map(identityKey));
    const seen = new Map<string, number>();
    const cached = new Map<string, number>();
    const bytes = new Map<string, number>();
    const upstream = new Map<string, number>();
    let twinBytes = 0;
    let twinUpstream = 0;
    for (const r of this.replicas.values()) {
      const c = r.alive ? this.cache(r) : new Set<string>();
      cached.set(r.name, c.size);
      for (const k of c) seen.set(k, (seen.get(k) ?? 0) + 1);
      const b = r.bytes();
      bytes.set(r.name, b.client);
      upstream.set(r.name, b.upstream);
      if (r.name === "replica-0") {
        twinBytes = b.twinClient;
        twinUpstream = b.twinUpstream;
      }
    }
    let stable = 0;
    let covered = 0;
    let doubled = 0;
    for (const k of this.#previous) {
      if (!now.has(k)) continue;
      stable++;
      const n = seen.get(k) ?? 0;
      if (n > 0) covered++;
      if (n > 1) doubled++;
    }
    this.#previous = now;
    if (stable === 0) return;
    this.samples.push({ t: (Date.now() - this.t0) / 1000, cached, bytes, twinBytes, upstream, twinUpstream, coverage: covered / stable, doubled: doubled / stable });
  }

  churn(writes: number): void {
    for (let i = 0; i < writes; i++) {
      const n = this.#churn++;
      const ns = NAMESPACES[n % NAMESPACES.length] ?? "alpha";
      const o = this.api.store.create("pods", { metadata: { name: `churn-${n}`, namespace: ns, labels: { app: "churn" } }, spec: { containers: [{ name: "c", image: "registry.invalid/pause:3.10" }] } });
      this.api.store.patch("pods", ns, o.metadata?.name ?? "", { metadata: { labels: { touched: "yes" } } });
      if (n % 2 === 0) this.api.store.delete("pods", ns, o.metadata?.name ?? "");
    }
  }

  ringSettled(names: readonly string[]): boolean {
    const st = this.api.store.get(RING_REF, RING_NS, RING)?.status;
    if (typeof st !== "object" || st === null) return false;
    const committed = "committed" in st && typeof st.committed === "object" && st.committed !== null ? st.committed : undefined;
    if (committed === undefined || ("pending" in st && st.pending !== undefined && st.pending !== null)) return false;
    const gen = "generation" in committed ? committed.generation : undefined;
    const members = "members" in committed && Array.isArray(committed.members) ? committed.members.map((m: unknown) => (typeof m === "object" && m !== null && "name" in m ? String(m.name) : "")) : [];
    if ([...members].sort().join() !== [...names].sort().join()) return false;
    return this.live().every((r) => r.member.current().generation === gen);
  }

  /** Every live cache holds exactly its ranges' pods, together every pod, none twice. */
  exact(): { exact: boolean; covered: number; twice: number; total: number } {
    const pods = this.api.store.identities("pods");
    const all = new Set(pods.map(identityKey));
    const count = new Map<string, number>();
    let exact = true;
    for (const r of this.live()) {
      const got = this.cache(r);
      const want = this.expected(r, pods);
      if (got.size !== want.size || [...got].some((k) => !want.has(k))) exact = false;
      for (const k of got) count.set(k, (count.get(k) ?? 0) + 1);
    }
    let covered = 0;
    let twice = 0;
    for (const k of all) {
      const n = count.get(k) ?? 0;
      if (n > 0) covered++;
      if (n > 1) twice++;
    }
    return { exact, covered, twice, total: all.size };
  }

  /** Parents and children as the store holds them, against the live replicas' caches. */
  census(): ReturnType<typeof familyCensus> {
    const controllers = new Map<string, ParentChildController>();
    for (const r of this.live()) if (r.live?.family !== undefined) controllers.set(r.name, r.live.family);
    return familyCensus(this.api, controllers);
  }

  /** The ShardRing's `Labelled` condition: its status and message, once the labeller reported. */
  labelled(): { status: string; message: string } | undefined {
    const st = this.api.store.get(RING_REF, RING_NS, RING)?.status;
    const conds = typeof st === "object" && st !== null && "conditions" in st && Array.isArray(st.conditions) ? (st.conditions as unknown[]) : [];
    for (const c of conds) {
      if (typeof c === "object" && c !== null && "type" in c && c.type === "Labelled") {
        return { status: "status" in c ? String(c.status) : "", message: "message" in c ? String(c.message) : "" };
      }
    }
    return undefined;
  }

  /** `also`: a scene's own condition for having settled. */
  async settle(names: readonly string[], also: () => boolean = () => true): Promise<boolean> {
    const end = Date.now() + SETTLE_TIMEOUT_MS;
    while (Date.now() < end && !this.opts.signal.aborted) {
      if (this.ringSettled(names) && also()) {
        const e = this.exact();
        if (e.exact && e.covered === e.total && e.twice === 0) return true;
      }
      await sleep(100);
    }
    return false;
  }

  bytesNow(): { controllers: number; twins: number; upstream: number; twinUpstream: number } {
    let controllers = 0;
    let twins = 0;
    let upstream = 0;
    let twinUpstream = 0;
    for (const r of this.replicas.values()) {
      const b = r.bytes();
      controllers += b.client;
      twins += b.twinClient;
      upstream += b.upstream;
      twinUpstream += b.twinUpstream;
    }
    return { controllers, twins, upstream, twinUpstream };
  }

  rows(before: Map<string, ReturnType<DemoReplica["bytes"]>>): ReplicaRow[] {
    return this.live().map((r) => {
      const b = r.bytes();
      const a = before.get(r.name) ?? { client: 0, upstream: 0, twinClient: 0, twinUpstream: 0 };
      const verdict = r.live?.replica.proxy.proxy.stats().get("pods")?.lastVerdict;
      const labels = r.live?.filter === "labels";
      const ranges = r.member.current().ranges;
      return {
        replica: r.name,
        share: ratio(ranges),
        ranges: slotsText(ranges),
        cached: this.cache(r).size,
        expected: this.expected(r).size,
        bytesToController: b.client - a.client,
        bytesFromServer: b.upstream - a.upstream,
        twinBytes: b.twinClient - a.twinClient,
        filteredBy: labels && verdict !== undefined && verdict !== "no" ? "server (slot label)" : verdict === "confirmed" ? "server (shardInfo)" : verdict === "no" ? "proxy (fallback)" : verdict === "inferred" ? "server (inferred)" : "-",
      };
    });
  }
}
