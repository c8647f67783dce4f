/**
 * The manager's side of the rings: elects one leader among the manager
 * replicas, and on the leader runs one controller per ring that turns member
 * Leases into a committed table through {@link step}, writing the ShardRing
 * status with optimistic concurrency and fencing dead members.
 *
 * The controller is a thin shell: it reads the clock once per pass, builds
 * observations from the Leases, calls the pure state machine, executes the
 * effects (only `fence` touches the API), writes the status, and sleeps
 * until the next Lease transition or deadline.
 */
import type { ApiClient } from "../kube/client.ts";
import { childLogger, silentLogger, type Logger } from "../log.ts";
import { entryOf } from "../map-entry.ts";
import { systemClock, type Clock } from "./clock.ts";
import { coverage, initialState, nextWakeMs, step, tablesOf, type Effect, type HandoffPolicy, type MemberObservation, type RingState } from "./handoff.ts";
import {
  appliedOf,
  decodeLease,
  decodeRing,
  describe,
  EventSink,
  isConflict,
  isNotFound,
  LeaseApi,
  leaseView,
  memberOf,
  microTime,
  renewalRecord,
  RingApi,
  ringApiClient,
  watchObjects,
  type Lease,
  type RingApiAccess,
  type RingObject,
} from "./kube.ts";
import { checkMemberTimings, DEFAULT_MEMBER_TIMINGS, type MemberTimings } from "./member.ts";
import { coordinatorMetrics, type CoordinatorMetrics } from "./metrics.ts";
import { FENCED_PREFIX, HANDOFF_ANNOTATION, MANAGER_LEASE, RING_GROUP, RING_KIND, RING_LABEL, RING_VERSION } from "./names.ts";
import { MemberState, memberState } from "./state.ts";
import { leaseTimes } from "./times.ts";
import { decodeSpec, decodeTables, encodeTables, HandoffMode, Refusal, sameTables, type RingCondition, type RingSpec, type RingTables, type ShardRingStatusJson } from "./table.ts";
import type { RingShellOptions } from "./shell-options.ts";

/** What the leader merges into a ring's status besides its tables. */
export interface RingStatusExtra {
  readonly fields: Readonly<Record<string, unknown>>;
  readonly conditions: readonly RingCondition[];
}

/**
 * Work the coordinator runs while this replica leads, reporting into the
 * rings' status (the labeller). The leader stays the status's one writer.
 */
export interface LeaderTask {
  /** Runs until `signal` aborts; calls `changed` when a ring's {@link status} would say something new. */
  run(signal: AbortSignal, changed: (namespace: string, name: string) => void): Promise<void>;
  status(namespace: string, name: string): RingStatusExtra | undefined;
}

/** `client`: the manager's, as `shardcar manager` makes it with the one loader. */
export interface CoordinatorOptions extends RingApiAccess, RingShellOptions {
  /** The manager's own namespace: where its election Lease lives. */
  readonly namespace: string;
  /** The namespace whose rings this manager runs; `undefined` for every namespace. */
  readonly ringNamespace?: string | undefined;
  /** This replica's name (the pod name); the election Lease's holder. */
  readonly identity: string;
  /** Name of the election Lease. Default `shardcar-manager`. */
  readonly electionLease?: string | undefined;
  /** Timings of the manager's own election (same rules as a member's). */
  readonly election?: Partial<MemberTimings> | undefined;
  /**
   * How long after a member's last observed renewal the leader may fence it.
   * Never shorter than the member's lease duration (the member fences itself
   * at its renew deadline, below that). Default: the lease duration.
   */
  readonly takeoverDelayMs?: number | undefined;
  /** First wait after a generation is abandoned at its deadline; doubles per abandon. Default 1 s. */
  readonly backoffMs?: number | undefined;
  /** Default 60 s. */
  readonly maxBackoffMs?: number | undefined;
  /**
   * A fresh ring's first table waits until no member joined for this long.
   * Default: 2.5 × the election's retry period (5 s): pods a Deployment
   * starts together create their Leases within a few seconds of each other.
   */
  readonly settleQuietMs?: number | undefined;
  /**
   * ...and no longer than this after its first member was seen. Default:
   * the election's lease duration (15 s), so that members still arriving
   * cannot hold the first table back for good.
   */
  readonly settleMaxMs?: number | undefined;
  /** Run while leading, e.g. the labeller; their status goes into every status write. */
  readonly tasks?: readonly LeaderTask[] | undefined;
}

/**
 * Runs the manager's ring coordination until `signal` aborts: campaigns for
 * the election Lease, runs every ring while it leads, steps down (and
 * campaigns again) if it cannot renew within the renew deadline. On abort it
 * releases the election Lease so a standby takes over at once. Resolves
 * after everything stopped; does not throw for API failures (it retries).
 * Call once per process; the CLI owns signals.
 */
export async function runCoordinator(opts: CoordinatorOptions, signal: AbortSignal): Promise<void> {
  const timings: MemberTimings = { ...DEFAULT_MEMBER_TIMINGS, ...opts.election };
  checkMemberTimings(timings);
  const clock = opts.clock ?? systemClock;
  const log = childLogger(opts.log ?? silentLogger(), { component: "ring-coordinator", identity: opts.identity });
  const metrics = opts.registry === undefined ? undefined : coordinatorMetrics(opts.registry);
  const api = ringApiClient(opts, clock, "manager", "the ring coordinator");
  const election = new Election(opts, api, timings, clock, log);
  while (!signal.aborted) {
    const leading = await election.campaign(signal);
    if (leading === undefined) break;
    log.info("leading: running the rings");
    metrics?.leader.set(1);
    await new Rings(opts, api, clock, log, metrics).run(AbortSignal.any([signal, leading]));
    metrics?.leader.set(0);
    if (!signal.aborted) log.warn("lost leadership; campaigning again");
  }
  await election.release();
}

// ---------------------------------------------------------------------------
// Manager leader election: one Lease, client-go's rules.

class Election {
  readonly #o: CoordinatorOptions;
  readonly #t: MemberTimings;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #api: LeaseApi;
  readonly #name: string;
  #lease: Lease | undefined;
  #observed = { record: "", at: 0 };

  constructor(o: CoordinatorOptions, api: ApiClient, t: MemberTimings, clock: Clock, log: Logger) {
    this.#o = o;
    this.#t = t;
    this.#clock = clock;
    this.#log = log;
    this.#api = new LeaseApi(api, t.renewDeadlineMs);
    this.#name = o.electionLease ?? MANAGER_LEASE;
  }

  /** Waits until this replica holds the election Lease; returns a signal that aborts when leadership is lost. */
  async campaign(signal: AbortSignal): Promise<AbortSignal | undefined> {
    while (!signal.aborted) {
      const now = this.#clock.now();
      try {
        const cur = await this.#api.get(this.#o.namespace, this.#name);
        if (cur === undefined) {
          this.#lease = await this.#api.create(this.#o.namespace, this.#body(undefined, now));
        } else {
          // Expiry is judged by how long the record has stood still on *our*
          // clock, never by its renewTime: the holder's clock may be skewed.
          const record = renewalRecord(cur);
          if (record !== this.#observed.record) this.#observed = { record, at: now };
          const holder = cur.spec?.holderIdentity ?? "";
          const expired = now - this.#observed.at >= (cur.spec?.leaseDurationSeconds ?? 0) * 1000;
          if (holder === "" || holder === this.#o.identity || expired) this.#lease = await this.#api.replace(this.#o.namespace, this.#body(cur, now));
        }
      } catch (e) {
        this.#log.debug({ err: describe(e) }, "election: could not acquire");
      }
      if (this.#lease !== undefined) return this.#hold(now, signal);
      await this.#clock.sleep(this.#t.retryPeriodMs, signal);
    }
    return undefined;
  }

  #hold(acquiredAt: number, signal: AbortSignal): AbortSignal {
    const lost = new AbortController();
    let lastRenew = acquiredAt;
    const stepDown = (why: string): void => {
      if (lost.signal.aborted) return;
      this.#log.warn({ why }, "election: stepping down");
      this.#lease = undefined;
      lost.abort();
    };
    let cancel = this.#clock.timer(this.#t.renewDeadlineMs, () => stepDown("renew deadline passed"));
    const loop = async (): Promise<void> => {
      const both = AbortSignal.any([signal, lost.signal]);
      while (!both.aborted) {
        await this.#clock.sleep(this.#t.retryPeriodMs, both);
        const lease = this.#lease;
        if (both.aborted || lease === undefined) return;
        const now = this.#clock.now();
        try {
          this.#lease = await this.#api.replace(this.#o.namespace, this.#body(lease, now));
          lastRenew = now;
          cancel();
          cancel = this.#clock.timer(lastRenew + this.#t.renewDeadlineMs - this.#clock.now(), () => stepDown("renew deadline passed"));
        } catch (e) {
          if (isConflict(e) || isNotFound(e)) {
            const fresh = await this.#api.get(this.#o.namespace, this.#name).catch(() => undefined);
            if (fresh?.spec?.holderIdentity === this.#o.identity) this.#lease = fresh;
            else stepDown(`election Lease now held by ${JSON.stringify(fresh?.spec?.holderIdentity ?? "")}`);
          } else {
            this.#log.warn({ err: describe(e) }, "election: renewal failed");
          }
        }
      }
      cancel();
    };
    void loop();
    return lost.signal;
  }

  /** Gives the Lease up (empty holder) so a standby replica need not wait for it to expire. Best effort. */
  async release(): Promise<void> {
    const lease = this.#lease;
    this.#lease = undefined;
    if (lease === undefined) return;
    try {
      await this.#api.replace(this.#o.namespace, { ...lease, spec: { ...lease.spec, holderIdentity: "", renewTime: microTime(this.#clock.now()) } });
    } catch (e) {
      this.#log.debug({ err: describe(e) }, "election: could not release; it will expire");
    }
  }

  #body(base: Lease | undefined, now: number): Lease {
    const changed = base?.spec?.holderIdentity !== this.#o.identity;
    return {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { ...base?.metadata, name: this.#name, namespace: this.#o.namespace },
      spec: {
        ...base?.spec,
        holderIdentity: this.#o.identity,
        leaseDurationSeconds: this.#t.leaseDurationSeconds,
        renewTime: microTime(now),
        acquireTime: changed ? microTime(now) : (base?.spec?.acquireTime ?? microTime(now)),
        leaseTransitions: (base?.spec?.leaseTransitions ?? 0) + (changed && base !== undefined ? 1 : 0),
      },
    };
  }
}

// ---------------------------------------------------------------------------
// The leader: every ring in scope.

interface Shared {
  readonly o: CoordinatorOptions;
  readonly api: ApiClient;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: CoordinatorMetrics | undefined;
  readonly leases: LeaseApi;
  readonly rings: RingApi;
  readonly events: EventSink;
  /** Member Leases by `namespace/name`. */
  leaseObjects: ReadonlyMap<string, Lease>;
  /** ShardRings by `namespace/name`. */
  ringObjects: ReadonlyMap<string, RingObject>;
  /** When the leader last saw each Lease's renewal record change, on its own clock. */
  readonly observedAt: Map<string, { record: string; at: number }>;
}

class Rings {
  readonly #s: Shared;
  readonly #controllers = new Map<string, RingController>();

  constructor(o: CoordinatorOptions, api: ApiClient, clock: Clock, log: Logger, metrics: CoordinatorMetrics | undefined) {
    this.#s = {
      o,
      api,
      clock,
      log,
      metrics,
      // Fencing and listing Leases is not on a deadline of ours; bound it anyway.
      leases: new LeaseApi(api, 30_000),
      rings: new RingApi(api),
      events: new EventSink(api, "shardcar-manager", log),
      leaseObjects: new Map(),
      ringObjects: new Map(),
      observedAt: new Map(),
    };
  }

  async run(signal: AbortSignal): Promise<void> {
    const s = this.#s;
    let synced = false;
    const leases = watchObjects<Lease>({
      api: s.api,
      path: LeaseApi.path(s.o.ringNamespace),
      labelSelector: RING_LABEL,
      list: () => s.leases.list(s.o.ringNamespace, RING_LABEL),
      decode: decodeLease,
      clock: s.clock,
      log: s.log,
      onChange: (objs) => {
        const now = s.clock.now();
        for (const [k, l] of objs) {
          const record = renewalRecord(l);
          if (s.observedAt.get(k)?.record !== record) s.observedAt.set(k, { record, at: now });
        }
        for (const k of [...s.observedAt.keys()]) if (!objs.has(k)) s.observedAt.delete(k);
        s.leaseObjects = new Map(objs);
        if (synced) this.#triggerAll();
      },
    });
    const rings = watchObjects<RingObject>({
      api: s.api,
      path: RingApi.path(s.o.ringNamespace),
      list: () => s.rings.list(s.o.ringNamespace),
      decode: decodeRing,
      clock: s.clock,
      log: s.log,
      onChange: (objs) => {
        s.ringObjects = new Map(objs);
        if (synced) this.#triggerAll();
      },
    });
    // Stepping before both lists arrived would make every holder look gone.
    await Promise.race([Promise.all([leases.synced, rings.synced]), new Promise((r) => signal.addEventListener("abort", r, { once: true }))]);
    let tasks: Promise<void>[] = [];
    if (!signal.aborted) {
      synced = true;
      this.#triggerAll();
      tasks = (s.o.tasks ?? []).map((task) => task.run(signal, (ns, name) => this.#trigger(`${ns}/${name}`)));
      await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
    }
    await Promise.all(tasks);
    leases.stop();
    rings.stop();
    await Promise.all([...this.#controllers.values()].map((c) => c.dispose()));
  }

  #triggerAll(): void {
    const keys = new Set<string>();
    for (const l of this.#s.leaseObjects.values()) {
      const m = memberOf(l);
      if (m !== undefined) keys.add(`${l.metadata?.namespace ?? ""}/${m.ring}`);
    }
    for (const k of this.#s.ringObjects.keys()) keys.add(k);
    for (const k of keys) this.#trigger(k);
  }

  #trigger(key: string): void {
    entryOf(this.#controllers, key, () => {
      const [ns = "", name = ""] = key.split("/");
      return new RingController(this.#s, ns, name);
    }).trigger();
  }
}

interface MemberLease {
  readonly key: string;
  readonly member: string;
  readonly lease: Lease;
  readonly observedAt: number | undefined;
}

const VALID = { type: "Valid", status: "True", reason: "TableValid", message: "" } as const;
// How many of our own recent status resourceVersions to remember, to tell
// the echo of our writes from someone else's edit. A handful suffices: the
// watch lags by at most a few writes.
const OWN_RV_MEMORY = 16;
// A status write that fails for a reason other than a conflict is retried
// after this long (the API may be briefly unavailable).
const WRITE_RETRY_MS = 1_000;
// Bound on conflict retries per pass; each one re-reads the object first.
const MAX_CONFLICT_RETRIES = 5;

class RingController {
  readonly #s: Shared;
  readonly #ns: string;
  readonly #name: string;
  readonly #log: Logger;
  #state: RingState | undefined;
  #spec: RingSpec | undefined;
  #condition: RingCondition;
  #lastRefusal = "";
  #lastWritten: { tables: RingTables; json: string } | undefined;
  readonly #ownRvs: string[] = [];
  #dirty = false;
  #running: Promise<void> | undefined;
  #cancelTimer: () => void = () => {};
  #disposed = false;

  constructor(s: Shared, ns: string, name: string) {
    this.#s = s;
    this.#ns = ns;
    this.#name = name;
    this.#log = s.log.child({ ring: `${ns}/${name}` });
    this.#condition = { ...VALID, lastTransitionTime: new Date(s.clock.now()).toISOString() };
  }

  trigger(): void {
    if (this.#disposed) return;
    this.#dirty = true;
    this.#running ??= this.#drain();
  }

  async dispose(): Promise<void> {
    this.#disposed = true;
    this.#cancelTimer();
    await this.#running;
  }

  async #drain(): Promise<void> {
    while (this.#dirty && !this.#disposed) {
      this.#dirty = false;
      try {
        await this.#reconcile();
      } catch (e) {
        this.#log.error({ err: describe(e) }, "ring pass failed; retrying");
        this.#schedule(WRITE_RETRY_MS);
      }
    }
    this.#running = undefined;
  }

  #schedule(ms: number): void {
    this.#cancelTimer();
    // +1 ms so that the transition we wake for has happened when we look.
    this.#cancelTimer = this.#s.clock.timer(ms + 1, () => this.trigger());
  }

  #members(): MemberLease[] {
    const out: MemberLease[] = [];
    for (const [key, lease] of this.#s.leaseObjects) {
      const m = memberOf(lease);
      if (m === undefined || m.ring !== this.#name || (lease.metadata?.namespace ?? "") !== this.#ns) continue;
      out.push({ key, member: m.member, lease, observedAt: this.#s.observedAt.get(key)?.at });
    }
    return out.sort((a, b) => (a.member < b.member ? -1 : a.member > b.member ? 1 : 0));
  }

  async #reconcile(): Promise<void> {
    const s = this.#s;
    const members = this.#members();
    let obj = s.ringObjects.get(`${this.#ns}/${this.#name}`);
    if (obj === undefined) {
      if (members.length === 0) return;
      obj = await this.#create(members);
      if (obj === undefined) return;
    }

    // --- spec: last good one wins over a broken edit
    const spec = decodeSpec(obj.spec);
    if (!spec.ok) {
      this.#refuse(obj, spec.reason, `${spec.message}; ${this.#spec === undefined ? "the ring is not run until it is fixed" : "keeping the previous spec"}`);
      if (this.#spec === undefined) {
        await this.#writeStatus(obj, undefined);
        return;
      }
    } else if (this.#state !== undefined && spec.value.slotCount !== this.#state.slotCount) {
      this.#refuse(obj, Refusal.SlotCountChanged, `spec.slots changed from ${this.#state.slotCount} to ${spec.value.slotCount}; the slot count cannot change once a table exists, keeping ${this.#state.slotCount}`);
      this.#spec = { ...spec.value, slotCount: this.#state.slotCount };
    } else {
      this.#spec = spec.value;
    }
    const ringSpec = this.#spec;
    if (ringSpec === undefined) return;

    // --- status: adopt it once, afterwards only our own writes are accepted
    const observed = decodeTables(obj.status, ringSpec.slotCount);
    if (this.#state === undefined) {
      let tables: RingTables | undefined;
      if (observed.ok) tables = observed.value;
      else {
        this.#refuse(obj, observed.reason, `${observed.message}; rebuilt the table from the member Leases`);
        tables = rebuiltTables(obj.status, ringSpec.slotCount, members);
      }
      this.#state = initialState({ slotCount: ringSpec.slotCount, policy: this.#policy(ringSpec), tables });
      this.#lastWritten = observed.ok && observed.value !== undefined ? { tables: observed.value, json: "" } : undefined;
    } else {
      this.#checkForeign(obj, observed);
    }

    // --- decide
    const now = s.clock.now();
    const takeover = s.o.takeoverDelayMs ?? 0;
    const observations: MemberObservation[] = members.map((m) => ({
      name: m.member,
      state: memberState(leaseView(m.lease, m.observedAt), now, takeover),
      applied: appliedOf(m.lease),
      ...(m.observedAt === undefined ? {} : { renewedAt: m.observedAt }),
    }));
    let state: RingState = { ...this.#state, policy: this.#policy(ringSpec) };
    const first = step(state, { type: "observe", members: observations }, now, ringSpec.mode);
    state = first.state;
    const queue: Effect[] = [...first.effects];
    for (let e = queue.shift(); e !== undefined; e = queue.shift()) {
      if (e.type === "fence") {
        if (await this.#fence(members.find((m) => m.member === e.member))) {
          const next = step(state, { type: "fenced", member: e.member }, s.clock.now(), ringSpec.mode);
          state = next.state;
          queue.push(...next.effects);
        }
      } else {
        this.#record(e, now, state);
      }
    }
    this.#state = state;

    // --- persist, then tidy and sleep
    await this.#writeStatus(obj, state);
    await this.#collectFenced(members, state);
    this.#export(state, observations);
    let wake = nextWakeMs(state, now);
    for (const m of members) {
      const t = leaseTimes(leaseView(m.lease, m.observedAt), now, takeover);
      for (const v of [t?.toExpired, t?.toDead]) if (v !== undefined && v > 0) wake = Math.min(wake ?? v, v);
    }
    if (wake !== undefined) this.#schedule(wake);
  }

  #policy(spec: RingSpec): HandoffPolicy {
    const o = this.#s.o;
    const t = { ...DEFAULT_MEMBER_TIMINGS, ...o.election };
    return {
      timeoutMs: spec.handoffTimeoutMs,
      backoffMs: o.backoffMs ?? 1_000,
      maxBackoffMs: o.maxBackoffMs ?? 60_000,
      relistBudget: spec.relistBudget,
      settleQuietMs: o.settleQuietMs ?? Math.round(2.5 * t.retryPeriodMs),
      settleMaxMs: o.settleMaxMs ?? t.leaseDurationSeconds * 1000,
    };
  }

  async #create(members: MemberLease[]): Promise<RingObject | undefined> {
    const hint = members.map((m) => m.lease.metadata?.annotations?.[HANDOFF_ANNOTATION]).find((h) => h === HandoffMode.Overlap || h === HandoffMode.Exclusive);
    try {
      const obj = await this.#s.rings.create(this.#ns, this.#name, { handoff: hint ?? HandoffMode.Overlap });
      this.#log.info({ handoff: hint ?? HandoffMode.Overlap }, "created ShardRing for member Leases without one");
      return obj;
    } catch (e) {
      if (isConflict(e)) return this.#s.rings.get(this.#ns, this.#name);
      throw e;
    }
  }

  /** Refuses a status written by someone else: the leader's table is restored. */
  #checkForeign(obj: RingObject, observed: ReturnType<typeof decodeTables>): void {
    const rv = obj.metadata?.resourceVersion ?? "";
    const last = this.#lastWritten;
    if (this.#ownRvs.includes(rv) || this.#state === undefined) return;
    if (!observed.ok) {
      this.#refuse(obj, observed.reason, `${observed.message}; restored the leader's table (generation ${this.#state.committed.generation})`);
      return;
    }
    // No tables at all: a recreated object, not an edit; our write fills it.
    // Unchanged since our last write (a spec or metadata edit): nothing to refuse.
    if (observed.value === undefined || (last !== undefined && sameTables(observed.value, last.tables))) return;
    if (sameTables(observed.value, tablesOf(this.#state))) return;
    if (observed.value.committed.generation > this.#state.committed.generation) {
      // A newer-looking committed table may already have been followed by
      // members (they cannot tell who wrote it). Writing ours back at an
      // older generation would be ignored by them; instead rebuild: every
      // member widens from what it holds to the leader's next table.
      this.#refuse(obj, Refusal.NotWrittenByLeader, `status.committed was replaced outside the leader with generation ${observed.value.committed.generation}; rebuilding the table from the member Leases through a handoff. Tables change only through a handoff.`);
      const slotCount = this.#state.slotCount;
      this.#state = initialState({ slotCount, policy: this.#state.policy, tables: rebuiltTables(obj.status, slotCount, this.#members()) });
      return;
    }
    this.#refuse(obj, Refusal.NotWrittenByLeader, `status.committed/pending were changed outside the leader; restored the leader's table (generation ${this.#state.committed.generation}). Tables change only through a handoff.`);
  }

  #refuse(obj: RingObject, reason: string, message: string): void {
    const now = this.#s.clock.now();
    if (this.#condition.reason !== reason || this.#condition.message !== message) {
      this.#condition = { type: "Valid", status: "False", reason, message, lastTransitionTime: new Date(now).toISOString() };
    }
    this.#s.metrics?.refused.inc({ namespace: this.#ns, ring: this.#name, reason });
    if (message === this.#lastRefusal) return;
    this.#lastRefusal = message;
    this.#log.warn({ reason, message }, "refused ShardRing edit");
    void this.#s.events.warn(obj, reason, message, now);
  }

  #record(e: Effect, now: number, state: RingState): void {
    const labels = { namespace: this.#ns, ring: this.#name };
    switch (e.type) {
      case "publish":
        this.#log.info({ generation: e.generation, phase: e.phase, deferred: state.deferred.length }, "published pending generation");
        break;
      case "commit":
        this.#log.info({ generation: e.generation, ms: e.durationMs }, "committed generation");
        this.#s.metrics?.handoff.observe({ ...labels, outcome: "committed" }, e.durationMs / 1000);
        if (this.#condition.status !== "True") this.#condition = { ...VALID, message: `generation ${e.generation} committed`, lastTransitionTime: new Date(now).toISOString() };
        break;
      case "abandon":
        this.#log.warn({ generation: e.generation, reason: e.reason, ms: e.durationMs }, "abandoned generation; old owners keep their slots");
        this.#s.metrics?.handoff.observe({ ...labels, outcome: "abandoned" }, e.durationMs / 1000);
        break;
      case "recovered":
        this.#log.warn({ member: e.member, uncoveredMs: e.uncoveredMs }, "slots of a crashed member are covered again");
        this.#s.metrics?.crashUncovered.observe(labels, e.uncoveredMs / 1000);
        break;
      case "widen":
      case "narrow":
        this.#log.debug({ member: e.member, change: e.type, slots: e.slots.length }, "member asked to change");
        break;
      case "fence":
        break;
    }
  }

  /**
   * Takes a dead member's Lease over with the resourceVersion we observed:
   * if the member renewed meanwhile the PUT conflicts, and it is not fenced.
   * True once the Lease is ours (or gone).
   */
  async #fence(m: MemberLease | undefined): Promise<boolean> {
    if (m === undefined) return true;
    const now = this.#s.clock.now();
    const body: Lease = {
      ...m.lease,
      metadata: { ...m.lease.metadata, annotations: { ...m.lease.metadata?.annotations, "shardcar.io/fenced-at": new Date(now).toISOString() } },
      spec: {
        ...m.lease.spec,
        holderIdentity: `${FENCED_PREFIX}${this.#s.o.identity}`,
        renewTime: microTime(now),
        leaseTransitions: (m.lease.spec?.leaseTransitions ?? 0) + 1,
      },
    };
    try {
      await this.#s.leases.replace(this.#ns, body);
      this.#s.metrics?.fences.inc({ namespace: this.#ns, ring: this.#name });
      this.#log.warn({ member: m.member }, "fenced member: took its Lease over");
      return true;
    } catch (e) {
      if (isNotFound(e)) return true;
      this.#log.info({ member: m.member, err: describe(e) }, isConflict(e) ? "member Lease changed; not fenced" : "could not fence member");
      return false;
    }
  }

  /** Deletes Leases the leader fenced once their member is in no table: nothing depends on them any more. */
  async #collectFenced(members: MemberLease[], state: RingState): Promise<void> {
    for (const m of members) {
      if (!(m.lease.spec?.holderIdentity ?? "").startsWith(FENCED_PREFIX)) continue;
      if (state.committed.owners.includes(m.member) || state.pending?.owners.includes(m.member)) continue;
      try {
        await this.#s.leases.delete(this.#ns, m.lease.metadata?.name ?? "");
      } catch (e) {
        this.#log.debug({ member: m.member, err: describe(e) }, "could not delete fenced Lease");
      }
    }
  }

  #export(state: RingState, observations: readonly MemberObservation[]): void {
    const m = this.#s.metrics;
    if (m === undefined) return;
    const labels = { namespace: this.#ns, ring: this.#name };
    const c = coverage(state);
    m.coverage.set(labels, c.readyRatio);
    m.overlap.set(labels, c.overlapRatio);
    m.members.set(labels, observations.filter((o) => o.state >= MemberState.Leaving).length);
    m.generation.set(labels, state.committed.generation);
    m.deferred.set(labels, state.deferred.length);
  }

  async #writeStatus(obj: RingObject, state: RingState | undefined): Promise<void> {
    // Without a state of our own (a spec we never could run), keep whatever
    // tables are there: a later leader may still adopt them.
    const kept = state === undefined && typeof obj.status === "object" && obj.status !== null ? (obj.status as Partial<ShardRingStatusJson>) : {};
    const extras = (this.#s.o.tasks ?? []).map((t) => t.status(this.#ns, this.#name)).filter((x) => x !== undefined);
    const status = composeStatus(state, kept, extras, this.#condition);
    const json = JSON.stringify(status);
    let cur = obj;
    for (let attempt = 0; attempt <= MAX_CONFLICT_RETRIES; attempt++) {
      const upToDate = this.#ownRvs.includes(cur.metadata?.resourceVersion ?? "") && this.#lastWritten?.json === json;
      if (upToDate) return;
      const body: RingObject = {
        apiVersion: `${RING_GROUP}/${RING_VERSION}`,
        kind: RING_KIND,
        metadata: { ...cur.metadata, name: this.#name, namespace: this.#ns },
        spec: cur.spec,
        status,
      };
      try {
        const res = await this.#s.rings.replaceStatus(this.#ns, this.#name, body);
        this.#ownRvs.push(res.metadata?.resourceVersion ?? "");
        if (this.#ownRvs.length > OWN_RV_MEMORY) this.#ownRvs.shift();
        if (state !== undefined) this.#lastWritten = { tables: tablesOf(state), json };
        return;
      } catch (e) {
        if (!isConflict(e)) {
          this.#log.warn({ err: describe(e) }, "could not write ShardRing status; retrying");
          this.#schedule(WRITE_RETRY_MS);
          return;
        }
        // Someone wrote since we read: read again, refuse it if it was a
        // hand edit, and write our table on top of the fresh version.
        this.#s.metrics?.statusConflicts.inc({ namespace: this.#ns, ring: this.#name });
        const fresh = await this.#s.rings.get(this.#ns, this.#name);
        if (fresh === undefined) {
          this.trigger(); // deleted: the next pass recreates it from our state
          return;
        }
        if (state !== undefined) this.#checkForeign(fresh, decodeTables(fresh.status, state.slotCount));
        cur = fresh;
      }
    }
    this.#schedule(WRITE_RETRY_MS);
  }
}

/**
 * The ShardRing status the leader writes for `state`: what `kept` holds
 * (used only without a state of its own), its tables, the leader tasks'
 * fields, coverage and conditions. Pure; the S1 bench sizes statuses with it.
 */
export function composeStatus(state: RingState | undefined, kept: Partial<ShardRingStatusJson>, extras: readonly RingStatusExtra[], condition: RingCondition): Partial<ShardRingStatusJson> {
  const cov = state === undefined ? { readyRatio: 0, overlapRatio: 0 } : coverage(state);
  return {
    ...kept,
    ...(state === undefined ? {} : { ...encodeTables(tablesOf(state)), slotCount: state.slotCount }),
    ...extras.reduce<Record<string, unknown>>((all, x) => ({ ...all, ...x.fields }), {}),
    // Rounded so that noise below a thousandth does not cost a write.
    coverage: { readyRatio: Math.round(cov.readyRatio * 1000) / 1000, overlapRatio: Math.round(cov.overlapRatio * 1000) / 1000 },
    conditions: [condition, ...extras.flatMap((x) => x.conditions)],
  };
}

/**
 * Tables for a ring whose status is unreadable and which this leader never
 * ran: an empty committed table at generation 0 (which members ignore, as it
 * is older than what they hold) and a floor above every generation anyone
 * may have seen, so the next pending table is new to every member, and each
 * widens from what it actually holds.
 */
function rebuiltTables(status: unknown, slotCount: number, members: readonly MemberLease[]): RingTables {
  const seen: number[] = members.map((m) => appliedOf(m.lease));
  const walk = (v: unknown): void => {
    if (typeof v !== "object" || v === null) return;
    for (const [k, x] of Object.entries(v)) {
      if (k === "generation" && typeof x === "number" && Number.isSafeInteger(x)) seen.push(x);
      else walk(x);
    }
  };
  walk(status);
  return { generation: Math.max(0, ...seen), committed: { generation: 0, owners: Array.from({ length: slotCount }, () => undefined) }, pending: undefined };
}
