/**
 * The co-location run of issue 13 §3, the same against devapi
 * (test/e2e/colocation*.test.ts) and the real server (test/real/
 * colocation.test.ts): replicas of an unmodified parent/child controller
 * (src/demo/parent-child-controller.ts), each behind its own shardcar proxy in ring
 * mode, a coordinator, and an unsharded observer (family-observer.ts) that
 * records every parent and child the whole time. The run starts from whole
 * families (each parent with the one child an unsharded controller would
 * have left it, written by the test), lets the replicas sync on them, then
 * churns parents (created and deleted, one at a time, without pause: the
 * controllers create the new parents' children) while the ring scales
 * 3→4→2.
 *
 * The ring hands off **exclusively**: in overlap mode two replicas reconcile
 * a slot at once by design, and both would create the child of a parent
 * created meanwhile (docs/rings.md).
 *
 * The run only collects; the test files assert. Nothing waits for a fixed
 * time: every step waits for a condition (the hang guard names it, on the
 * cluster clock of test/support/wait.ts, which the members and the leader
 * run on too), and the churn is counted in writes, not seconds.
 */
import { CustomObjectsApi, type KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import type { Test } from "tap";
import type { ProxyFiltering } from "../../src/proxy/request/filtering.ts";
import type { OwnershipSource } from "../../src/shard/ownership.ts";
import { runCoordinator, type LeaderTask } from "../../src/ring/coordinator.ts";
import { RingMember } from "../../src/ring/member.ts";
import { RING_GROUP, RING_KIND, RING_PLURAL, RING_VERSION } from "../../src/ring/names.ts";
import { parseSlots, type ShardRingStatusJson } from "../../src/ring/table.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, equal, shardRange, type Range } from "../../src/shard/range.ts";
import { slotLabelKey } from "../../src/shard/slots.ts";
import { parseResources, type ShardedResource } from "../../src/shard/spec.ts";
import { slotsToRanges } from "../../src/shard/table.ts";
import { silentLogger } from "../../src/log.ts";
import { FamilyObserver, type Duplicate } from "./family-observer.ts";
import { inParallel } from "./http.ts";
import { apiVersionOf, controllerRef, ident, resourceClient, resourceEntry, type ResourceClient, type ResourceRef } from "../../src/demo/kube-resources.ts";
import { CREATED_BY, ParentChildController, type CreatedChild } from "../../src/demo/parent-child-controller.ts";
import { uuid } from "./proto/pods.ts";
import { rng } from "./rng.ts";
import { clusterClock, until } from "./wait.ts";

export interface ColocationMode {
  /** How the proxies ask the server to filter. */
  readonly filter: "shardselector" | "labels";
  /** `owner`: children follow their parent; `uid`: the negative control. */
  readonly childKey: "owner" | "uid";
}

/** What a lane provides: an apiserver, its credentials, and proxies in front of it. */
export interface ColocationLane {
  /** Straight to the apiserver, with the test's own credentials (never through a proxy). */
  readonly kubeConfig: KubeConfig;
  /** Where the parents, children, member Leases and the ShardRing live. */
  readonly namespace: string;
  readonly parent: ResourceRef;
  readonly child: ResourceRef;
  /** A replica's shardcar proxy, and how its controller reaches it. */
  startProxy(name: string, opts: { readonly resources: readonly ShardedResource[]; readonly ownership: OwnershipSource; readonly filtering: ProxyFiltering }): Promise<{ readonly kubeConfig: KubeConfig; close(): Promise<void> }>;
  /** Run by the elected coordinator: the labeller, in labels mode. */
  readonly leaderTasks?: readonly LeaderTask[];
  /**
   * Writes straight into the apiserver's storage, past admission (devapi's
   * store), returning what was stored: the families the run starts from are
   * then written in moments, labelled as a ring in labels mode would have
   * left them. Without it they are created through the API.
   */
  readonly store?: (ref: ResourceRef, obj: KubernetesObject) => KubernetesObject;
}

export interface ColocationSizes {
  readonly parents: number;
  /** Churn writes (parent creates and deletes) at least, during each scale step. */
  readonly writesPerStep: number;
  /** The ShardRing's slot count. */
  readonly slots: number;
}

export interface ColocationResult {
  readonly duplicates: readonly Duplicate[];
  /** Live parents without a child once the churn stopped and everything settled (empty unless the wait timed out). */
  readonly childless: readonly string[];
  /** Children the controllers created that the observer never saw. */
  readonly unseen: readonly string[];
  /** Per live replica at the end: what its caches hold beyond or short of its shard. */
  readonly cacheDiffs: ReadonlyMap<string, { parents: Diff; children: Diff }>;
  readonly stats: {
    /** Parents written with their child before the replicas started. */
    readonly families: number;
    /** Parents created and deleted in all (the families' parents included). */
    readonly parentsCreated: number;
    readonly parentsDeleted: number;
    /** By the controllers. */
    readonly childrenCreated: number;
    readonly steps: readonly string[];
    readonly observer: ReturnType<FamilyObserver["counts"]>;
  };
}

export interface Diff {
  readonly extra: readonly string[];
  readonly missing: readonly string[];
}

// Longer than the ring unit tests' (2 s leases), on top of the cluster clock:
// the run shares two cores with eleven informers, four proxies and the
// churn, and a member fenced by a missed renewal is a crash scenario, not
// this one. Nothing here waits for a lease to run out.
const TIMINGS = { leaseDurationSeconds: 6, renewDeadlineMs: 4_000, retryPeriodMs: 500 } as const;
const STEP_MS = 120_000;

interface Replica {
  readonly name: string;
  readonly member: RingMember;
  readonly controller: ParentChildController;
  stop(): Promise<void>;
}

/** The whole run; everything it started is stopped before it returns (or throws). */
export async function runColocation(lane: ColocationLane, ring: string, mode: ColocationMode, sizes: ColocationSizes, log: (line: string) => void): Promise<ColocationResult> {
  const resources = parseResources(`${resourceEntry(lane.parent)}, ${resourceEntry(lane.child, mode.childKey)}`);
  const rings = lane.kubeConfig.makeApiClient(CustomObjectsApi);
  const ringRef = { group: RING_GROUP, version: RING_VERSION, namespace: lane.namespace, plural: RING_PLURAL };
  await rings.createNamespacedCustomObject({
    ...ringRef,
    body: {
      apiVersion: `${RING_GROUP}/${RING_VERSION}`,
      kind: RING_KIND,
      metadata: { name: ring, namespace: lane.namespace },
      spec: { handoff: "exclusive", slots: sizes.slots, ...(mode.filter === "labels" ? { filter: "labels", resources: `${resourceEntry(lane.parent)}, ${resourceEntry(lane.child, mode.childKey)}` } : {}) },
    },
  });
  const ringStatus = async (): Promise<Partial<ShardRingStatusJson> | undefined> => {
    const o = (await rings.getNamespacedCustomObject({ ...ringRef, name: ring }).catch(() => undefined)) as { status?: Partial<ShardRingStatusJson> } | undefined;
    return o?.status;
  };

  // Owner-keyed children are labelled at CREATE; uid-keyed ones only by the labeller, after it.
  if (mode.filter === "labels" && mode.childKey === "owner") await stampingWebhookReady(lane, ring);

  const observer = new FamilyObserver(lane.kubeConfig, lane.parent, lane.child, { collectGarbage: true });
  const parents = new Parents(resourceClient(lane.kubeConfig, lane.parent), lane.namespace, lane.parent, rng(mode.childKey === "owner" ? 13 : 31));
  const abort = new AbortController();
  const replicas = new Map<string, Replica>();
  const gone: Replica[] = [];
  let coordinator: Promise<void> | undefined;
  const steps: string[] = [];
  try {
    await observer.start();
    const children = resourceClient(lane.kubeConfig, lane.child);
    let t0 = Date.now();
    if (lane.store === undefined) await inParallel(Array.from({ length: sizes.parents }), 8, () => parents.createFamily(children, lane.child));
    else {
      const store = lane.store;
      const random = rng(7);
      // Labelled as the stamping webhook and the labeller would have: the parent by its uid, the child by its key.
      const labels = (value: string): Record<string, string> => (mode.filter === "labels" ? { [slotLabelKey(ring)]: String(slotOf(value, sizes.slots)) } : {});
      for (let i = 0; i < sizes.parents; i++) {
        const parent = parents.stored(store, uuid(random), labels);
        const uid = uuid(random);
        store(lane.child, familyChild(lane.child, lane.parent, parent, { name: `${parent.metadata?.name ?? ""}-seed`, uid, labels: labels(mode.childKey === "owner" ? (parent.metadata?.uid ?? "") : uid) }));
      }
    }
    log(`${sizes.parents} families written in ${Date.now() - t0} ms`);
    coordinator = runCoordinator({ kubeConfig: lane.kubeConfig, namespace: lane.namespace, ringNamespace: lane.namespace, identity: "coloc-manager", election: TIMINGS, clock: clusterClock, tasks: lane.leaderTasks ?? [], log: silentLogger() }, abort.signal);

    const add = async (name: string): Promise<void> => {
      const member = new RingMember({ kubeConfig: lane.kubeConfig, namespace: lane.namespace, ring, member: name, timings: TIMINGS, leaveTimeoutMs: STEP_MS, clock: clusterClock, log: silentLogger() });
      const filtering: ProxyFiltering = mode.filter === "labels" ? { mode: "labels", labelKey: slotLabelKey(ring), slotCount: () => member.slotCount } : { mode: "shardselector" };
      const proxy = await lane.startProxy(name, { resources, ownership: member, filtering });
      const controller = new ParentChildController({ identity: name, kubeConfig: proxy.kubeConfig, parent: lane.parent, child: lane.child, workers: 4 });
      // The proxy holds the controller's first LISTs until its member has
      // ranges, so the controller syncs only after the member joined.
      controller.start().catch(() => undefined);
      replicas.set(name, {
        name,
        member,
        controller,
        async stop() {
          await controller.stop();
          await proxy.close();
        },
      });
      await member.start();
    };
    const leave = async (name: string): Promise<void> => {
      const r = replicas.get(name);
      if (r === undefined) throw new Error(`no replica ${name}`);
      await r.member.leave();
      replicas.delete(name);
      gone.push(r);
      await r.stop();
    };
    const settled = async (): Promise<boolean> => {
      const st = await ringStatus();
      if (st?.committed === undefined || st.pending !== undefined) return false;
      if (st.committed.members.map((m) => m.name).sort().join(",") !== [...replicas.keys()].sort().join(",")) return false;
      const slotCount = st.slotCount ?? sizes.slots;
      for (const [name, r] of replicas) {
        const slots = parseSlots(st.committed.members.find((m) => m.name === name)?.slots ?? "", slotCount);
        const cur = r.member.current();
        // A member tells its proxy only about range changes: the generation it enforces may be older than the committed one.
        if (!slots.ok || cur.generation === 0 || cur.generation > st.committed.generation || !equal(cur.ranges, slotsToRanges(slots.value, slotCount))) return false;
        if (!r.controller.synced) return false;
      }
      return true;
    };
    const step = async (name: string, act: () => Promise<unknown>, churned: boolean): Promise<void> => {
      const from = parents.writes;
      const t0 = Date.now();
      await act();
      await until(`${name}: the ring settled on [${[...replicas.keys()].sort().join(",")}]`, settled, STEP_MS, 100);
      const during = parents.writes - from;
      const took = Date.now() - t0;
      if (churned) await until(`${name}: ${sizes.writesPerStep} churn writes`, () => parents.writes - from >= sizes.writesPerStep, STEP_MS, 20);
      steps.push(`${name}: settled in ${took} ms, with ${during} churn writes meanwhile`);
      log(steps[steps.length - 1] ?? "");
    };

    const diffs = async (): Promise<Map<string, { parents: Diff; children: Diff }>> => {
      const allParents = (await parents.api.list()).items;
      const allChildren = (await children.list()).items;
      const out = new Map<string, { parents: Diff; children: Diff }>();
      for (const [name, r] of replicas) {
        const ranges = r.member.current().ranges;
        out.set(name, {
          parents: diff(r.controller.parents(), shard(allParents, ranges, "uid")),
          children: diff(r.controller.children(), shard(allChildren, ranges, mode.childKey)),
        });
      }
      return out;
    };
    let cacheDiffs = new Map<string, { parents: Diff; children: Diff }>();
    /** Settled, every live parent with a child, every cache exactly its shard (the diffs are kept for the report). */
    const converged = async (): Promise<boolean> => {
      if (!(await settled()) || observer.childless().length > 0) return false;
      cacheDiffs = await diffs();
      return [...cacheDiffs.values()].every((x) => [x.parents, x.children].every((y) => y.extra.length === 0 && y.missing.length === 0));
    };

    // Together, as a Deployment's first pods start: one table for the three.
    await step("3 replicas", () => Promise.all(["r0", "r1", "r2"].map(add)), false);
    // Whole families in the caches before the ring moves: every handoff then moves parents with their children.
    t0 = Date.now();
    await until("the first caches are exactly their shards", converged, STEP_MS, 250);
    log(`the first caches were exactly their shards after ${Date.now() - t0} ms`);
    const churn = parents.churn(sizes.parents, abort.signal);
    await step("3→4", () => add("r3"), true);
    await step("4→2", () => Promise.all([leave("r0"), leave("r3")]), true);
    parents.stopChurn();
    await churn;

    // Quiet now: every live parent gets its child, and every cache converges on its shard.
    t0 = Date.now();
    await until("every live parent has a child and every cache is exactly its shard", converged, STEP_MS, 500).catch((e: unknown) => log(String(e)));
    log(`quiet: converged after ${Date.now() - t0} ms`);

    const created = [...replicas.values(), ...gone].flatMap((r) => r.controller.created);
    return {
      duplicates: explained(observer.duplicates(), created),
      childless: observer.childless(),
      unseen: observer.unseen(created.map((c) => c.child)),
      cacheDiffs,
      stats: { families: sizes.parents, parentsCreated: parents.created, parentsDeleted: parents.deleted, childrenCreated: created.length, steps, observer: observer.counts() },
    };
  } finally {
    parents.stopChurn();
    for (const r of replicas.values()) {
      r.member.halt();
      await r.stop();
    }
    abort.abort();
    await coordinator;
    await observer.stop();
    // A labels-mode ring left behind would claim the same label for the same resources as the next run's: neither would be labelled.
    await rings.deleteNamespacedCustomObject({ ...ringRef, name: ring }).catch(() => undefined);
  }
}

/** The parents the run creates and churns, by name (`p-<n>`, never reused). */
class Parents {
  readonly api: ResourceClient;
  writes = 0;
  created = 0;
  deleted = 0;
  readonly #namespace: string;
  readonly #ref: ResourceRef;
  readonly #random: () => number;
  readonly #live: string[] = [];
  #next = 0;
  #churning = false;

  constructor(api: ResourceClient, namespace: string, ref: ResourceRef, random: () => number) {
    this.api = api;
    this.#namespace = namespace;
    this.#ref = ref;
    this.#random = random;
  }

  async create(): Promise<KubernetesObject> {
    const name = `p-${this.#next++}`;
    const body: KubernetesObject & { spec: object } = { apiVersion: apiVersionOf(this.#ref), kind: this.#ref.kind, metadata: { name, namespace: this.#namespace }, spec: {} };
    const parent = await this.api.create(this.#namespace, body);
    this.#live.push(name);
    this.created++;
    this.writes++;
    return parent;
  }

  /** A parent and the child an unsharded controller would have given it (`generateName`, a controller reference). */
  async createFamily(children: ResourceClient, child: ResourceRef): Promise<void> {
    const p = await this.create();
    await children.create(this.#namespace, familyChild(child, this.#ref, p, { generateName: `${p.metadata?.name ?? ""}-` }));
  }

  /** A parent written into storage with `uid` (see ColocationLane.store). */
  stored(store: NonNullable<ColocationLane["store"]>, uid: string, labels: (value: string) => Record<string, string>): KubernetesObject {
    const name = `p-${this.#next++}`;
    const parent = store(this.#ref, { apiVersion: apiVersionOf(this.#ref), kind: this.#ref.kind, metadata: { name, namespace: this.#namespace, uid, labels: labels(uid) } });
    this.#live.push(name);
    this.created++;
    return parent;
  }

  async deleteOne(): Promise<void> {
    const i = Math.floor(this.#random() * this.#live.length);
    const [name] = this.#live.splice(i, 1);
    if (name === undefined) return;
    await this.api.delete(this.#namespace, name);
    this.deleted++;
    this.writes++;
  }

  /** Creates and deletes parents one at a time, around `population`, until {@link stopChurn}. */
  async churn(population: number, signal: AbortSignal): Promise<void> {
    this.#churning = true;
    while (this.#churning && !signal.aborted) {
      const grow = this.#live.length < population * 0.95 || (this.#live.length < population * 1.05 && this.#random() < 0.5);
      await (grow ? this.create() : this.deleteOne());
      // A pause between writes, so the churn is a stream beside the handoffs rather than a flood; not a bound on anything.
      await clusterClock.sleep(5);
    }
  }

  stopChurn(): void {
    this.#churning = false;
  }
}

/**
 * Labels mode: waits until the manager's webhook stamps a child at CREATE
 * (it knows the new ring). A child created unlabelled before that would be
 * in no cache until the labeller came by, and its parent, cached meanwhile,
 * would look childless: a real outage's cost (docs/label-slots.md), not this
 * run's subject.
 */
async function stampingWebhookReady(lane: ColocationLane, ring: string): Promise<void> {
  const children = resourceClient(lane.kubeConfig, lane.child);
  const probe: KubernetesObject = {
    apiVersion: apiVersionOf(lane.child),
    kind: lane.child.kind,
    metadata: { generateName: "webhook-probe-", namespace: lane.namespace, ownerReferences: [{ apiVersion: apiVersionOf(lane.parent), kind: lane.parent.kind, name: "probe", uid: "webhook-probe", controller: true }] },
  };
  await until(
    "the stamping webhook labels a child at CREATE",
    async () => {
      const o = await children.create(lane.namespace, probe);
      await children.delete(lane.namespace, o.metadata?.name ?? "");
      return o.metadata?.labels?.[slotLabelKey(ring)] !== undefined;
    },
    STEP_MS,
    100,
  );
}

/** The child a family starts with, in the parent's namespace, controlled by it. */
function familyChild(child: ResourceRef, parentRef: ResourceRef, parent: KubernetesObject, meta: { name?: string; generateName?: string; uid?: string; labels?: Record<string, string> }): KubernetesObject {
  return {
    apiVersion: apiVersionOf(child),
    kind: child.kind,
    metadata: {
      ...meta,
      namespace: parent.metadata?.namespace ?? "",
      ownerReferences: [{ apiVersion: apiVersionOf(parentRef), kind: parentRef.kind, name: parent.metadata?.name ?? "", uid: parent.metadata?.uid ?? "", controller: true, blockOwnerDeletion: true }],
      annotations: { [CREATED_BY]: "seed" },
    },
  };
}

/** The slot whose range holds the value's hash, found by scanning the slots (not by src/shard/slots.ts). */
function slotOf(value: string, slots: number): number {
  const h = fnv1a64(value);
  for (let s = 0; s < slots; s++) if (contains([shardRange(s, slots)], h)) return s;
  throw new Error("unreachable: the slots cover the keyspace");
}

/** Each duplicate's children with what made its controller create it, and when. */
function explained(duplicates: readonly Duplicate[], created: readonly CreatedChild[]): Duplicate[] {
  const why = new Map(created.map((c) => [c.child.slice(0, c.child.lastIndexOf("@")), `${c.trigger} at resourceVersion ${c.createdRv}`]));
  return duplicates.map((d) => ({ ...d, children: d.children.map((c) => `${c}: ${why.get(c.slice(0, c.indexOf(" "))) ?? "written by the test"}`) }));
}

function shard(objects: readonly KubernetesObject[], ranges: readonly Range[], key: "uid" | "owner"): Set<string> {
  // Computed here from the objects, not by the code under test (src/shard/slots.ts).
  const value = (o: KubernetesObject): string => (key === "owner" ? (controllerRef(o)?.uid ?? o.metadata?.uid ?? "") : (o.metadata?.uid ?? ""));
  return new Set(objects.filter((o) => contains(ranges, fnv1a64(value(o)))).map(ident));
}

function diff(got: ReadonlySet<string>, want: ReadonlySet<string>): Diff {
  return { extra: [...got].filter((k) => !want.has(k)).slice(0, 5), missing: [...want].filter((k) => !got.has(k)).slice(0, 5) };
}

/** The acceptance of issue 13 for a run with `owner` keys. */
export function assertColocated(t: Test, r: ColocationResult): void {
  report(t, r);
  t.same(r.unseen, [], "the observer saw every child the controllers created (so none escaped the check below)");
  t.same(r.duplicates, [], "no parent ever got a second child");
  t.same(r.childless, [], "every parent has its child by the end");
  t.same(Object.fromEntries(r.cacheDiffs), Object.fromEntries([...r.cacheDiffs.keys()].map((n) => [n, EXACT])), "every cache is exactly its shard");
}

/** The negative control: the same run with `uid` keys must create duplicates, or the check above proves nothing. */
export function assertDuplicated(t: Test, r: ColocationResult): void {
  report(t, r);
  t.same(r.unseen, [], "the observer saw every child the controllers created");
  t.ok(r.duplicates.length > 0, `children keyed by uid: ${r.duplicates.length} parents got a second child (e.g. ${JSON.stringify(r.duplicates[0] ?? null)})`);
}

const EXACT = { parents: { extra: [], missing: [] }, children: { extra: [], missing: [] } };

function report(t: Test, r: ColocationResult): void {
  const s = r.stats;
  t.comment(`${s.families} families to start with; ${s.parentsCreated - s.families} parents created and ${s.parentsDeleted} deleted by the churn; ${s.childrenCreated} children created by the controllers; observer: ${JSON.stringify(s.observer)}`);
  t.ok(s.parentsDeleted > 0 && s.parentsCreated > s.families && s.steps.length === 3, `premise: parents churned through ${s.steps.length} steps`);
}
