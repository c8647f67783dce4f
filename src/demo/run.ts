/**
 * The demo behind `npm start`, in ring mode: devapi seeded with pods, the
 * manager's ring coordinator, and controller replicas, each a real
 * client-node informer behind its own shardcar proxy whose ranges come from
 * a RingMember. Each replica has an unsharded twin (an informer behind a
 * proxy that owns everything) that starts, restarts and dies with it, so the
 * bytes saved are measured against a real baseline, not assumed.
 *
 * Scenes: start N replicas; scale to N+1; kill one (no goodbye: its Lease
 * expires and the manager moves its slots); the apiserver's gate off (the
 * proxies fall back to filtering: the apiserver still sends every byte);
 * labels mode with the gate still off, as on a managed cluster (the manager
 * labels every pod with its slot, the controllers roll out with `--filter
 * labels`, and the apiserver sends each proxy only its share); and a
 * scale-out while parents are created, whose owner-keyed children an
 * unmodified controller creates exactly once. Each scene prints the
 * per-replica table, checks coverage in plain words, and shows bytes saved.
 * A sampler records objects and bytes per replica and coverage every 250 ms
 * for the report's charts. Exits 0 only if every invariant held.
 */
import { KubeConfig } from "@kubernetes/client-node";
import { writeFile } from "node:fs/promises";
import type { Writable } from "node:stream";
import { seedPods, startDevApi, type DevApi, type ObjectIdentity } from "../devapi/index.ts";
import type { Logger } from "../log.ts";
import { formatAudit } from "../ops/audit.ts";
import { loadRing, runAudit } from "../ops/audit-run.ts";
import { formatCanary } from "../ops/canary.ts";
import { httpProbe, runCanary } from "../ops/canary-run.ts";
import { ApiClient, kubeConfigConnection } from "../kube/client.ts";
import { resolveResource } from "../ops/kube.ts";
import { StaticOwnership } from "../shard/ownership.ts";
import { runCoordinator, RingMember, RING_GROUP, RING_KIND, RING_VERSION } from "../ring/index.ts";
import { fnv1a64 } from "../shard/hash.ts";
import { contains, FULL_RANGE, ratio } from "../shard/range.ts";
import { slotLabelKey } from "../shard/slots.ts";
import { parseResources, type ShardedResource } from "../shard/spec.ts";
import type { ProxyFiltering } from "../proxy/filtering.ts";
import { createParent, DEPLOYMENTS, familyCensus, FAMILY_RESOURCES, registerFamilyResources, REPLICASETS } from "./families.ts";
import { startDemoLabelSlots, type DemoLabelSlots } from "./label-slots.ts";
import { ParentChildController } from "./parent-child-controller.ts";
import { fmtBytes, fmtPct, renderReport, textTable, type ChartOptions, type Marker, type ReportInvariant, type ReportScene } from "./report.ts";
import { startPodReplica, type Replica } from "./replica.ts";

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

/** A {@link ReportInvariant} of one scene. */
export interface Invariant extends ReportInvariant {
  readonly scene: string;
}

export interface SceneResult {
  readonly scene: string;
  readonly ok: boolean;
  readonly rows: readonly ReplicaRow[];
  /** Pods in the store when the scene settled. */
  readonly total: number;
  readonly invariants: readonly Invariant[];
  readonly bytes: { readonly controllers: number; readonly twins: number; readonly upstream: number; readonly twinUpstream: number };
  readonly durationMs: number;
}

export interface DemoResult {
  readonly ok: boolean;
  readonly scenes: readonly SceneResult[];
  readonly reportPath: string;
  readonly durationMs: number;
}

const NAMESPACES = ["alpha", "beta", "gamma", "delta", "team-a", "team-b"];
const RING_NS = "demo";
const RING = "controller";
const RING_REF = { group: RING_GROUP, version: RING_VERSION, resource: "shardrings" } as const;
// The last scene's parents: created one by one while the ring hands off.
const PARENTS = 40;
const PARENT_EVERY_MS = 60;
const LABELLED_TIMEOUT_MS = 20_000;
// Short ring timings so a killed replica's slots move within seconds (the
// defaults are client-go's 15 s / 10 s / 2 s): retry < renew deadline < lease.
// Not shorter: every component shares one event loop here, which stalls for
// most of a second while the unsharded twins parse whole lists, and a member
// that cannot renew within its deadline rightly fences itself.
const TIMINGS = { leaseDurationSeconds: 5, renewDeadlineMs: 3_500, retryPeriodMs: 500 } as const;
// A killed member's gap: its Lease must expire (lease duration after its last
// renewal), then the leader fences it and hands its slots on, and the
// gainers relist. Allowance beyond the lease for that and a loaded machine.
const KILL_GAP_BOUND_MS = TIMINGS.leaseDurationSeconds * 1000 + 6_000;
const SETTLE_TIMEOUT_MS = 20_000;
const SAMPLE_MS = 250;

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

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Sample {
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

class Demo {
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

function printTable(rows: readonly ReplicaRow[]): string {
  return textTable(
    ["replica", "ring slots (of 256)", "keyspace", "cached", "expected", "to controller", "from apiserver", "unsharded twin", "filtered by"],
    rows.map((r) => [r.replica, r.ranges, fmtPct(r.share), String(r.cached), String(r.expected), fmtBytes(r.bytesToController), fmtBytes(r.bytesFromServer), fmtBytes(r.twinBytes), r.filteredBy]),
  );
}

interface SceneSpec {
  readonly title: string;
  /** A few words for the charts' scene markers. */
  readonly short: string;
  readonly action: () => Promise<void>;
  /** Ring members the scene must end with. */
  readonly members: () => string[];
  /** Scene-specific claims, checked after it settled. */
  readonly checks?: (ctx: { rows: readonly ReplicaRow[]; startedAt: number; settledAt: number }) => Invariant[];
  /** Said after the bytes line (e.g. why a scene costs more than unsharded). */
  readonly bytesNote?: string;
  /** Runs once the scene settled; its lines are printed and its invariants count (e.g. an operator's audit). */
  readonly after?: () => Promise<{ lines: string[]; invariants: Invariant[] }>;
  /** Runs before the scene's bytes are counted (e.g. the manager's backfill, which is not the controllers' traffic); its lines are printed first. */
  readonly prepare?: () => Promise<string[]>;
  /** The scene's own condition for having settled, beside the ring's and the pods' caches. */
  readonly settledWhen?: () => boolean;
}

async function runScene(demo: Demo, spec: SceneSpec, reportScenes: ReportScene[]): Promise<SceneResult> {
  const startedAt = Date.now();
  demo.markers.push({ at: (startedAt - demo.t0) / 1000, label: spec.short });
  demo.log(`\n== ${spec.title}\n`);
  for (const l of (await spec.prepare?.()) ?? []) demo.log(`${l}\n`);
  const before = new Map([...demo.replicas.values()].map((r) => [r.name, r.bytes()]));
  const totalsBefore = demo.bytesNow();
  await spec.action();
  const settled = await demo.settle(spec.members(), spec.settledWhen);
  const settledAt = Date.now();
  const e = demo.exact();
  const rows = demo.rows(before);
  const table = printTable(rows);
  demo.log(table + "\n");
  const invariants: Invariant[] = [];
  const coverageHeld = settled && e.exact && e.covered === e.total && e.twice === 0;
  const coverageLine = coverageHeld
    ? `coverage holds: every one of ${e.total} pods is cached by exactly one replica, the one whose ring slots hold its uid (settled in ${((settledAt - startedAt) / 1000).toFixed(1)} s)`
    : `COVERAGE BROKEN: ${e.total - e.covered} of ${e.total} pods are cached by no replica, ${e.twice} by two or more${e.exact ? "" : "; some cache differs from its ranges"}${settled ? "" : ` (the ring did not settle within ${SETTLE_TIMEOUT_MS / 1000} s)`}`;
  invariants.push({ scene: spec.title, claim: "once settled, the caches hold every pod exactly once, each in the replica that owns it", held: coverageHeld, detail: coverageLine });
  invariants.push(...(spec.checks?.({ rows, startedAt, settledAt }) ?? []));
  const now = demo.bytesNow();
  const bytes = { controllers: now.controllers - totalsBefore.controllers, twins: now.twins - totalsBefore.twins, upstream: now.upstream - totalsBefore.upstream, twinUpstream: now.twinUpstream - totalsBefore.twinUpstream };
  const saved = (a: number, b: number): string => (b === 0 ? "-" : fmtPct(1 - a / b));
  const bytesLine = `bytes this scene: controllers received ${fmtBytes(bytes.controllers)}, unsharded they would have received ${fmtBytes(bytes.twins)} (saved ${saved(bytes.controllers, bytes.twins)}); the apiserver sent ${fmtBytes(bytes.upstream)} instead of ${fmtBytes(bytes.twinUpstream)} (saved ${saved(bytes.upstream, bytes.twinUpstream)})`;
  const lines = [coverageLine, bytesLine, ...(spec.bytesNote === undefined ? [] : [spec.bytesNote]), ...invariants.slice(1).map((i) => `${i.held ? "" : "BROKEN: "}${i.detail}`)];
  if (spec.after !== undefined) {
    const extra = await spec.after();
    lines.push(...extra.lines);
    invariants.push(...extra.invariants);
  }
  for (const l of lines) demo.log(`${l}\n`);
  const ok = invariants.every((i) => i.held);
  reportScenes.push({ title: spec.title, ok, table, lines });
  return { scene: spec.title, ok, rows, total: e.total, invariants, bytes, durationMs: settledAt - startedAt };
}

function charts(demo: Demo): ChartOptions[] {
  const names = [...demo.replicas.keys()];
  const series = (f: (s: Sample, n: string) => number | undefined): { name: string; points: [number, number][] }[] =>
    names.map((n) => ({ name: n, points: demo.samples.flatMap((s): [number, number][] => (s.cached.has(n) ? [[s.t, f(s, n) ?? 0]] : [])) }));
  const bytesChart = (id: string, title: string, perReplica: (s: Sample, n: string) => number | undefined, twin: (s: Sample) => number): ChartOptions => ({
    id,
    title,
    yLabel: "MiB",
    series: [...series((s, n) => (perReplica(s, n) ?? 0) / (1 << 20)), { name: "unsharded (twin of replica-0)", points: demo.samples.map((s): [number, number] => [s.t, twin(s) / (1 << 20)]), dashed: true }],
    markers: demo.markers,
    format: (v) => v.toFixed(1),
  });
  return [
    { id: "objects", title: "Pods cached per replica", yLabel: "pods", series: series((s, n) => s.cached.get(n)), markers: demo.markers, format: (v) => v.toFixed(0) },
    bytesChart("bytes", "Bytes received per controller (cumulative), and one unsharded replica", (s, n) => s.bytes.get(n), (s) => s.twinBytes),
    bytesChart("upstream", "Bytes the apiserver sent per proxy (cumulative), and to one unsharded replica", (s, n) => s.upstream.get(n), (s) => s.twinUpstream),
    {
      id: "coverage",
      title: "Coverage: share of pods cached by some replica, and by two",
      yLabel: "share of pods",
      series: [
        { name: "cached by ≥ 1", points: demo.samples.map((s): [number, number] => [s.t, s.coverage]) },
        { name: "cached by ≥ 2", points: demo.samples.map((s): [number, number] => [s.t, s.doubled]), dashed: true },
      ],
      markers: demo.markers,
      format: (v) => fmtPct(v),
      yMin: 0,
      yMax: 1,
    },
  ];
}

/** Runs the demo and writes the report; resolves to whether every invariant held. */
export async function runDemo(opts: DemoOptions): Promise<DemoResult> {
  const n = opts.replicas ?? 3;
  const api = await startDevApi({ gate: "on" });
  const demo = new Demo(api, opts);
  const scenes: SceneResult[] = [];
  const reportScenes: ReportScene[] = [];
  const out = opts.out;
  try {
    seedPods(api, { count: opts.pods, namespaces: NAMESPACES, podBytes: 2048 });
    registerFamilyResources(api);
    api.store.create(RING_REF, { apiVersion: `${RING_GROUP}/${RING_VERSION}`, kind: RING_KIND, metadata: { name: RING, namespace: RING_NS }, spec: { handoff: "overlap", slots: 256 } });
    out.write(
      `devapi on ${api.url}: ${opts.pods} pods in ${NAMESPACES.length} namespaces; ShardRing ${RING_NS}/${RING} (256 slots, overlap handoff); ` +
        `controller replicas are client-node informers, each behind its own shardcar proxy following the ring, each with an unsharded twin as the baseline\n`,
    );
    demo.labelSlots = await startDemoLabelSlots(demo.kc, opts.logger);
    demo.startCoordinator();
    demo.startSampling();
    const names = (k: number): string[] => Array.from({ length: k }, (_, i) => `replica-${i}`);
    const killed = "replica-1";
    const kept = (): string[] => names(n + 1).filter((x) => x !== killed);
    const gapOf = (startedAt: number): { ms: number; worst: number } => {
      const since = demo.samples.filter((s) => s.t * 1000 >= startedAt - demo.t0);
      const gaps = since.filter((s) => s.coverage < 1);
      const first = gaps[0];
      const last = gaps[gaps.length - 1];
      return { ms: first === undefined || last === undefined ? 0 : (last.t - first.t) * 1000 + SAMPLE_MS, worst: Math.min(1, ...since.map((s) => s.coverage)) };
    };
    const noGap = (title: string) => (c: { startedAt: number }): Invariant[] => {
      const g = gapOf(c.startedAt);
      return [{ scene: title, claim: "overlap handoff: no pod went uncached at any sample", held: g.ms === 0, detail: g.ms === 0 ? `no pod was uncached at any ${SAMPLE_MS} ms sample during the handoff (overlap mode widens before it narrows)` : `pods went uncached for about ${(g.ms / 1000).toFixed(1)} s (worst coverage ${fmtPct(g.worst)})` }];
    };
    const verdicts = (title: string, want: string) => (c: { rows: readonly ReplicaRow[] }): Invariant[] => [
      { scene: title, claim: `every replica's lists were filtered by: ${want}`, held: c.rows.every((r) => r.filteredBy === want), detail: `filtered by: ${c.rows.map((r) => `${r.replica} ${r.filteredBy}`).join(", ")}` },
    ];
    // Reported, not asserted: exclusive handoff trades gaps for never two owners, and the sampler reads informer caches, which lag their proxies.
    const exclusiveGap = (startedAt: number): string => {
      const g = gapOf(startedAt);
      const doubled = demo.samples.filter((s) => s.t * 1000 >= startedAt - demo.t0 && s.doubled > 0).length;
      return `exclusive handoff: ${g.ms === 0 ? "no pod was uncached at any sample" : `the moving slots' pods were uncached for about ${(g.ms / 1000).toFixed(1)} s`}; ${doubled === 0 ? "no pod was cached by two replicas at any sample" : `${doubled} samples saw a pod in two caches`}`;
    };
    const play = async (spec: SceneSpec): Promise<void> => {
      scenes.push(await runScene(demo, spec, reportScenes));
    };
    /** Scenes 4 and 5: the apiserver's gate turned `gate`, then every controller restarted under it. */
    const regate = async (gate: "on" | "off"): Promise<void> => {
      api.gate = gate;
      await demo.restartReplicas();
    };

    const t1 = `scene 1: start ${n} replicas — the manager assigns the ring's slots; the apiserver filters`;
    await play({
      title: t1,
      short: `1 start ${n}`,
      action: async () => {
        await Promise.all(names(n).map((x) => demo.addReplica(x)));
        demo.churn(100);
      },
      members: () => names(n),
      checks: verdicts(t1, "server (shardInfo)"),
    });
    const t2 = `scene 2: scale to ${n + 1} — the new replica widens first, the others narrow after the commit`;
    await play({ title: t2, short: `2 scale to ${n + 1}`, action: () => demo.addReplica(`replica-${n}`), members: () => names(n + 1), checks: noGap(t2) });
    const t3 = `scene 3: kill ${killed} — no goodbye: its Lease expires, the manager fences it and hands its slots on`;
    await play({
      title: t3,
      short: "3 kill one",
      action: () => demo.killReplica(killed),
      members: kept,
      bytesNote: "(the survivors relisted to take over the killed replica's slots, which unsharded replicas never need to: the price of sharding a failure)",
      checks: (c) => {
        const g = gapOf(c.startedAt);
        return [
          {
            scene: t3,
            claim: `the killed replica's pods were uncached for less than its lease (${TIMINGS.leaseDurationSeconds} s) plus ${(KILL_GAP_BOUND_MS / 1000 - TIMINGS.leaseDurationSeconds).toFixed(0)} s for fencing and one relist`,
            held: g.ms <= KILL_GAP_BOUND_MS,
            detail: `the gap lasted about ${(g.ms / 1000).toFixed(1)} s (worst coverage ${fmtPct(g.worst)}); bound ${(KILL_GAP_BOUND_MS / 1000).toFixed(0)} s: lease duration + fencing + one relist`,
          },
        ];
      },
    });
    const t4 = "scene 4: the apiserver's ShardedListAndWatch gate is turned off — it ignores shardSelector; the controllers restart one by one and their proxies filter";
    await play({
      title: t4,
      short: "4 gate off",
      action: async () => {
        await regate("off");
        demo.churn(100);
      },
      members: kept,
      checks: (c) => [
        ...verdicts(t4, "proxy (fallback)")(c),
        {
          scene: t4,
          claim: "with the gate off each proxy received the whole list but passed on only its shard",
          held: c.rows.every((r) => r.bytesFromServer > 2 * r.bytesToController),
          detail: `from the apiserver vs to the controller: ${c.rows.map((r) => `${r.replica} ${fmtBytes(r.bytesFromServer)} / ${fmtBytes(r.bytesToController)}`).join(", ")}`,
        },
      ],
    });
    const t5 = "scene 5: labels mode, the gate still off (as on EKS, AKS, GKE) — the manager labels every pod with its slot, the controllers roll out with --filter labels, and the apiserver sends each proxy only its share";
    const label = slotLabelKey(RING);
    await play({
      title: t5,
      short: "5 labels mode",
      prepare: () => switchToLabels(demo, label),
      action: async () => {
        demo.wiring = { filter: "labels", resources: parseResources(`pods, ${FAMILY_RESOURCES}`), families: true };
        await demo.restartReplicas();
        demo.churn(100);
      },
      members: kept,
      checks: (c) => [
        ...verdicts(t5, "server (slot label)")(c),
        {
          scene: t5,
          claim: "with the gate still off, the apiserver sent each proxy about its share of what it sent an unsharded replica",
          // Its share of the keyspace, with room for the churn's watch events, which arrive unevenly.
          held: c.rows.every((r) => r.twinBytes > 0 && r.bytesFromServer <= r.twinBytes * (r.share * 1.25 + 0.02)),
          detail: `from the apiserver, sharded vs unsharded twin: ${c.rows.map((r) => `${r.replica} ${fmtBytes(r.bytesFromServer)} of ${fmtBytes(r.twinBytes)} (${fmtPct(r.twinBytes === 0 ? 0 : r.bytesFromServer / r.twinBytes)}; its keyspace ${fmtPct(r.share)})`).join(", ")}`,
        },
      ],
    });
    const joiner = `replica-${n + 1}`;
    let t6Started = Date.now();
    const t6 = `scene 6: scale to ${n + 1} while ${PARENTS} Deployments are created — each gets one ReplicaSet, from the replica that owns it; children keyed by owner carry their parent's slot and move with it`;
    await play({
      title: t6,
      short: `6 scale, families`,
      action: async () => {
        t6Started = Date.now();
        const joining = demo.addReplica(joiner);
        for (let i = 0; i < PARENTS; i++) {
          createParent(api, `web-${i}`);
          await sleep(PARENT_EVERY_MS);
        }
        await joining;
      },
      members: () => [...kept(), joiner],
      bytesNote:
        "(every member relisted its pods: while owner-keyed children are sharded beside them, a handoff moves uid-keyed resources as possible parents, in order with their children, and that costs a relist also where slots only shrink; docs/rings.md)",
      settledWhen: () => {
        const c = demo.census();
        return c.parents === PARENTS && c.childless === 0 && c.split.length === 0;
      },
      checks: () => familyChecks(demo, t6),
      after: async () => {
        const gap = exclusiveGap(t6Started);
        const audit = await operatorCheck(demo, t6);
        return { lines: [gap, ...audit.lines], invariants: audit.invariants };
      },
    });
    demo.stopSampling();
    const durationMs = Date.now() - demo.t0;
    const total = scenes.reduce((a, s) => ({ c: a.c + s.bytes.controllers, w: a.w + s.bytes.twins }), { c: 0, w: 0 });
    const bytesHeld: Invariant = {
      scene: "whole run",
      claim: "over the run, the sharded controllers received fewer bytes than their unsharded twins",
      held: total.c < total.w,
      detail: `${fmtBytes(total.c)} sharded vs ${fmtBytes(total.w)} unsharded`,
    };
    const all = [...scenes.flatMap((s) => s.invariants), bytesHeld];
    const ok = all.every((i) => i.held);
    const summary = [
      `${opts.pods} pods, ${n} → ${n + 1} → ${n} → ${n + 1} controller replicas in ring mode, shardselector then labels mode, ${scenes.length} scenes in ${(durationMs / 1000).toFixed(1)} s.`,
      `Over the whole run the controllers received ${fmtBytes(total.c)}; their unsharded twins received ${fmtBytes(total.w)} (saved ${total.w === 0 ? "-" : fmtPct(1 - total.c / total.w)}).`,
      `${all.filter((i) => i.held).length} of ${all.length} invariants held.`,
    ];
    const html = renderReport({ title: "shardcar demo: ring mode", generatedAt: new Date().toISOString(), summary, ok, charts: charts(demo), scenes: reportScenes, invariants: all });
    await writeFile(opts.reportPath, html);
    out.write(`\n${ok ? "every invariant held" : "some invariant did NOT hold"}: ${all.filter((i) => i.held).length} of ${all.length} across ${scenes.length} scenes, in ${(durationMs / 1000).toFixed(1)} s\n`);
    out.write(`report: ${opts.reportPath}\n`);
    return { ok, scenes, reportPath: opts.reportPath, durationMs };
  } finally {
    demo.stopSampling();
    for (const r of demo.replicas.values()) {
      r.member.halt();
      await r.stopIncarnation();
    }
    await demo.stopCoordinator();
    await demo.labelSlots?.stop();
    await api.close();
  }
}

/**
 * The operator's switch to labels mode, as docs/label-slots.md describes
 * it: the stamping webhook in the admission chain, the ShardRing's
 * `spec.filter: labels` with its resources (and exclusive handoff, for the
 * controller that creates children), then wait for `Labelled=True` before
 * the controllers roll out.
 */
async function switchToLabels(demo: Demo, label: string): Promise<string[]> {
  const slots = demo.labelSlots;
  if (slots === undefined) return ["BROKEN: the manager's label-slot pieces did not start"];
  slots.admit(demo.api, [
    { group: "", resource: "pods" },
    { group: DEPLOYMENTS.group, resource: DEPLOYMENTS.plural },
    { group: REPLICASETS.group, resource: REPLICASETS.plural },
  ]);
  const spec = { filter: "labels", resources: `pods, ${FAMILY_RESOURCES}`, handoff: "exclusive" };
  const started = Date.now();
  demo.api.store.patch(RING_REF, RING_NS, RING, { spec });
  const end = started + LABELLED_TIMEOUT_MS;
  while (demo.labelled()?.status !== "True" && Date.now() < end && !demo.opts.signal.aborted) await sleep(50);
  const c = demo.labelled();
  const pods = demo.api.store.identities("pods");
  const done = pods.filter((p) => p.labels[label] !== undefined).length;
  return [
    `$ kubectl patch shardring ${RING} -n ${RING_NS} --type merge -p '${JSON.stringify({ spec })}'`,
    c?.status === "True"
      ? `the manager's labeller labelled ${done} of ${pods.length} pods with ${label}=<slot> in ${((Date.now() - started) / 1000).toFixed(1)} s (Labelled=True; its rate raised for devapi); new children get theirs from the stamping webhook at CREATE`
      : `BROKEN: the ring was not Labelled=True within ${LABELLED_TIMEOUT_MS / 1000} s (${done} of ${pods.length} pods labelled; ${c?.message ?? "no condition yet"})`,
  ];
}

/** The last scene's claims about parents and children. */
function familyChecks(demo: Demo, title: string): Invariant[] {
  const c = demo.census();
  const created = [...c.createdBy].map(([r, k]) => `${r} ${k}`).join(", ");
  return [
    {
      scene: title,
      claim: "no Deployment got a second ReplicaSet: the replica owning a parent always saw its child",
      held: c.parents === PARENTS && c.duplicated.length === 0 && c.childless === 0,
      detail:
        c.duplicated.length === 0
          ? `${c.parents} Deployments, each with exactly one ReplicaSet (created by ${created}); keyed by uid instead, a child would sit in another shard and its parent's owner would create it again`
          : `DUPLICATED children for ${c.duplicated.join(", ")}`,
    },
    {
      scene: title,
      claim: "every replica caches the ReplicaSets of exactly the Deployments it caches",
      held: c.split.length === 0,
      detail: c.split.length === 0 ? "parents and children share a shard in every replica's cache" : `split families in: ${c.split.join(", ")}`,
    },
  ];
}

/**
 * What an operator would run: `shardcar audit --ring … --canary` against
 * the demo's ring, through the same library. Its verdict is an invariant.
 */
async function operatorCheck(demo: Demo, title: string): Promise<{ lines: string[]; invariants: Invariant[] }> {
  await sleep(TIMINGS.retryPeriodMs * 2); // the Leases carry the slots as of their last renewal
  const client = new ApiClient(kubeConfigConnection(demo.kc));
  const resource = await resolveResource(client, { resource: "pods", group: "", key: "uid" });
  const owners = await loadRing(client, RING_NS, RING, Date.now());
  const report = await runAudit(client, { resource, owners });
  const admin = new Map(demo.live().map((r) => [r.name, r.live?.replica.proxy.adminUrl ?? ""]));
  const canary = await runCanary(client, { resource, owners, namespace: "alpha", maxObjects: 200, timeoutMs: 10_000, delivered: httpProbe(admin, "pods"), runId: "demo" });
  const held = report.ok && canary.ok;
  const text = `$ shardcar audit --resource pods --ring ${RING} --namespace ${RING_NS} --canary\n${formatAudit(report)}\n${formatCanary(canary)}`;
  return {
    lines: [...text.trimEnd().split("\n").map((l) => `  ${l}`), held ? "the operator's audit agrees: nothing missing, nothing duplicated, every canary delivered" : "BROKEN: the operator's audit found a problem"],
    invariants: [{ scene: title, claim: "shardcar audit --ring --canary finds nothing missing or duplicated, and every range's owner delivered its canary", held, detail: `audit: ${report.ok ? "OK" : "NOT OK"} (${report.sum} of ${report.total}); canaries: ${canary.ok ? "OK" : "NOT OK"}` }],
  };
}
