/**
 * One ring's controller on the leader: turns member Leases into a committed
 * table through {@link step}, writing the ShardRing status with optimistic
 * concurrency and fencing dead members.
 *
 * The controller is a thin shell: it reads the clock once per pass, builds
 * observations from the Leases, calls the pure state machine, executes the
 * effects (only `fence` touches the API), writes the status, and sleeps
 * until the next Lease transition or deadline. Apart from coordinator.ts,
 * which elects the leader and watches the Leases and rings, and triggers
 * one controller per ring.
 */
import type { ApiClient } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import type { Clock } from "./clock.ts";
import type { CoordinatorOptions, RingStatusExtra } from "./coordinator-options.ts";
import { coverage, initialState, nextWakeMs, step, tablesOf, type Effect, type HandoffPolicy, type MemberObservation, type RingState } from "./handoff.ts";
import { appliedOf, describe, EventSink, isConflict, isNotFound, LeaseApi, leaseView, memberOf, microTime, RingApi, type Lease, type RingObject } from "./kube.ts";
import { DEFAULT_MEMBER_TIMINGS } from "./member.ts";
import type { CoordinatorMetrics } from "./metrics.ts";
import { FENCED_PREFIX, HANDOFF_ANNOTATION, RING_GROUP, RING_KIND, RING_VERSION } from "./names.ts";
import { MemberState, memberState } from "./state.ts";
import { leaseTimes } from "./times.ts";
import { decodeSpec, decodeTables, encodeTables, HandoffMode, Refusal, sameTables, type RingCondition, type RingSpec, type RingTables, type ShardRingStatusJson } from "./table.ts";

/** What the leader's rings share: options, clients, metrics, and the watched Leases and ShardRings (kept current by coordinator.ts). */
export interface Shared {
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

/** One ring on the leader; {@link RingController.trigger} asks for a pass, and passes never overlap. */
export class RingController {
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
      changeQuietMs: o.changeQuietMs ?? Math.round(2.5 * t.retryPeriodMs),
      changeMaxMs: o.changeMaxMs ?? t.leaseDurationSeconds * 1000,
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
      case "gap-closed":
        this.#log.info({ member: e.member, uncoveredMs: e.uncoveredMs }, "exclusive handoff: the moved slots are covered again");
        this.#s.metrics?.exclusiveGap.observe(labels, e.uncoveredMs / 1000);
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
