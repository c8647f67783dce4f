/**
 * The sidecar's side of a ring: holds the member Lease, follows the ring's
 * ShardRing, and tells the proxy which ranges to enforce.
 *
 * Safety rests on three rules, each kept where the comment says:
 * - the ranges come from {@link follow}, so a gainer widens before anyone
 *   narrows (overlap) or a loser narrows before anyone widens (exclusive);
 * - a member that cannot prove it still holds its Lease (renew deadline
 *   passed, Lease taken over or deleted) enforces nothing at all until it
 *   holds it again (self-fencing, before the leader could hand its slots on);
 * - an invalid or rolled-back ShardRing is ignored: the member keeps the
 *   last table it accepted, which is also what happens when the manager is
 *   down.
 */
import { randomBytes } from "node:crypto";
import { ConfigError } from "../errors.ts";
import type { ApiClient } from "../kube/client.ts";
import { childLogger, silentLogger, type Logger } from "../log.ts";
import type { Ownership, OwnershipSource } from "../shard/ownership.ts";
import { equal, ratio, type Range } from "../shard/range.ts";
import { slotsToRanges } from "../shard/table.ts";
import { systemClock, type Clock } from "./clock.ts";
import { follow, type Held } from "./handoff.ts";
import { describe, isConflict, ringApiClient, isNotFound, LeaseApi, RingApi, watchObjects, decodeRing, type Lease, type RingObject } from "./kube.ts";
import { mayTake, memberLeaseBody } from "./member-lease.ts";
import { memberMetrics, type MemberMetrics } from "./metrics.ts";
import { checkMemberTimings, DEFAULT_MEMBER_TIMINGS, type MemberTimings, type RingMemberOptions } from "./member-options.ts";
import { memberLeaseName } from "./names.ts";
import { decodeSpec, decodeTables, formatSlots, type RingTables } from "./table.ts";

export { checkMemberTimings, DEFAULT_MEMBER_TIMINGS, type MemberTimings, type RingMemberOptions } from "./member-options.ts";

const LIFECYCLE = { New: "new", Running: "running", Leaving: "leaving", Stopped: "stopped" } as const;
type Lifecycle = (typeof LIFECYCLE)[keyof typeof LIFECYCLE];

const EMPTY: Ownership = Object.freeze({ generation: 0, ranges: Object.freeze([]) });

/**
 * One sidecar's membership in one ring, and the proxy's source of ranges.
 *
 * Lifecycle: construct, hand to the proxy as its `OwnershipSource`, then
 * `start()` once; end with `leave()` (graceful) or `halt()` (what SIGKILL
 * would do). Until the first table arrives the member enforces nothing.
 */
export class RingMember implements OwnershipSource {
  readonly #o: RingMemberOptions;
  readonly #t: MemberTimings;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #api: ApiClient;
  readonly #leases: LeaseApi;
  readonly #rings: RingApi;
  readonly #metrics: MemberMetrics | undefined;
  readonly #identity: string;
  readonly #leaseName: string;
  readonly #stop = new AbortController();
  readonly #listeners = new Set<(next: Ownership, prev: Ownership) => void>();

  #life: Lifecycle = LIFECYCLE.New;
  #lease: Lease | undefined;
  #lastRenewAt = Number.NEGATIVE_INFINITY;
  #cancelWatchdog: () => void = () => {};
  /** True while the member cannot prove it holds its Lease: it enforces nothing. */
  #fenced = true;
  #held: Held = { generation: 0, slots: [] };
  #slots: readonly number[] = [];
  #tables: RingTables | undefined;
  #slotCount: number | undefined;
  /** What the proxy is told to enforce. */
  #ownership: Ownership = EMPTY;
  /** What the tables say right now (the same as `#ownership` once published). */
  #target: Ownership = EMPTY;
  /** The ranges the proxy last reported applied; forgotten when other ranges are published. */
  #appliedRanges: readonly Range[] | undefined = [];
  #applied = 0;
  #leaving = false;
  /** When a leave or step aside stops waiting for the handoff (clock ms); set by the first of them. */
  #leaveDeadline: number | undefined;
  #wake = new AbortController();
  #stopWatch: () => void = () => {};
  #renewLoop: Promise<void> = Promise.resolve();
  #lastRefusal = "";
  #leaveSettled: () => void = () => {};

  constructor(opts: RingMemberOptions) {
    this.#o = opts;
    this.#t = { ...DEFAULT_MEMBER_TIMINGS, ...opts.timings };
    checkMemberTimings(this.#t);
    this.#clock = opts.clock ?? systemClock;
    this.#log = childLogger(opts.log ?? silentLogger(), { ring: `${opts.namespace}/${opts.ring}`, member: opts.member });
    this.#api = ringApiClient(opts, this.#clock, "ring", "a ring member");
    this.#leases = new LeaseApi(this.#api, this.#t.renewDeadlineMs);
    this.#rings = new RingApi(this.#api);
    this.#metrics = opts.registry === undefined ? undefined : memberMetrics(opts.registry);
    // The incarnation tells this process apart from an earlier one of the same
    // pod: a holder that is not exactly us means we were fenced.
    this.#identity = `${opts.member}/${randomBytes(6).toString("hex")}`;
    this.#leaseName = memberLeaseName(opts.ring, opts.member);
  }

  // ---- OwnershipSource ----------------------------------------------------

  current(): Ownership {
    return this.#ownership;
  }

  /** The ring's slot count once read (fixed for the member's life): what a labels-mode proxy's slots are of. */
  get slotCount(): number | undefined {
    return this.#slotCount;
  }

  subscribe(listener: (next: Ownership, prev: Ownership) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * The proxy relisted everything under `generation`'s ranges. Reported on
   * the Lease at once. A generation other than the current one is stale and
   * ignored.
   */
  markApplied(generation: number): void {
    if (generation !== this.#ownership.generation) return;
    this.#appliedRanges = this.#ownership.ranges;
    this.#reportIfApplied();
  }

  // ---- lifecycle ----------------------------------------------------------

  /** The Lease holder identity of this process: `<member>/<incarnation>`. */
  get identity(): string {
    return this.#identity;
  }

  /**
   * Acquires the member Lease (waiting while another live holder has it),
   * reads the ShardRing, and starts renewing and following. Resolves once
   * the Lease is held; rejects if called twice. `signal` aborts the wait.
   */
  async start(signal?: AbortSignal): Promise<void> {
    if (this.#life !== LIFECYCLE.New) throw new ConfigError("ring", `ring member ${this.#o.member} was already started`);
    this.#life = LIFECYCLE.Running;
    const abort = signal === undefined ? this.#stop.signal : AbortSignal.any([signal, this.#stop.signal]);
    while (this.#lease === undefined && !abort.aborted) {
      await this.#renewOnce();
      if (this.#lease === undefined) await this.#clock.sleep(this.#t.retryPeriodMs, abort);
    }
    if (this.#lease === undefined) {
      this.halt();
      return;
    }
    const w = watchObjects<RingObject>({
      api: this.#api,
      path: RingApi.path(this.#o.namespace),
      fieldSelector: `metadata.name=${this.#o.ring}`,
      list: () => this.#rings.list(this.#o.namespace, `metadata.name=${this.#o.ring}`),
      decode: decodeRing,
      onChange: (objs) => this.#applyRing(objs.get(`${this.#o.namespace}/${this.#o.ring}`)),
      clock: this.#clock,
      log: this.#log,
    });
    this.#stopWatch = w.stop;
    this.#renewLoop = this.#loop();
  }

  /**
   * Leaves gracefully: marks the Lease leaving, keeps enforcing its ranges
   * until the leader has committed a table without this member (so its slots
   * are handed over without a gap), then enforces nothing, deletes its Lease
   * and stops. After `leaveTimeoutMs` it leaves anyway (a gap the leader
   * accounts as a crash). Idempotent; resolves when stopped.
   */
  async leave(): Promise<void> {
    if (this.#life === LIFECYCLE.New) {
      this.halt();
      return;
    }
    if (this.#life !== LIFECYCLE.Running) {
      await this.#renewLoop;
      return;
    }
    this.#life = LIFECYCLE.Leaving;
    await this.#handOn();
    if (this.#life !== LIFECYCLE.Leaving) return;
    this.#fenced = true;
    this.#republish();
    this.#shutdown();
    await this.#renewLoop;
    if (this.#lease !== undefined) {
      try {
        await this.#leases.delete(this.#o.namespace, this.#leaseName);
      } catch (e) {
        this.#log.warn({ err: describe(e) }, "could not delete member Lease; the leader will see it expire");
      }
    }
  }

  /**
   * Hands this member's slots on while it keeps running: what the pod's
   * preStop hook asks for, before the kubelet stops the controller (issue
   * 32). Marks the Lease leaving and resolves once the leader has committed
   * a table without this member, or when the leave timeout (counted from the
   * first step aside) has passed. A `leave()` after it only finishes: the
   * drain's time is not granted twice. {@link rejoin} undoes it.
   */
  async stepAside(): Promise<void> {
    if (this.#life !== LIFECYCLE.Running) return;
    await this.#handOn();
  }

  /**
   * Takes a step aside back: the Lease stops saying leaving, and the leader
   * plans this member in again as a join. For a preStop hook that was not
   * followed by the pod's end (a controller container restarted by its
   * liveness probe runs its preStop too). No-op unless stepped aside.
   */
  rejoin(): void {
    if (this.#life !== LIFECYCLE.Running || !this.#leaving) return;
    this.#leaving = false;
    this.#leaveDeadline = undefined;
    this.#log.info("rejoining: the step aside was not followed by the pod's end");
    this.#kick();
  }

  /** Whether the Lease says leaving (a step aside or a leave under way). */
  get leaving(): boolean {
    return this.#leaving;
  }

  /** Marks the Lease leaving and waits for the slots to be handed on, or the leave deadline. */
  async #handOn(): Promise<void> {
    if (!this.#leaving) {
      this.#leaving = true;
      this.#leaveDeadline = this.#clock.now() + (this.#o.leaveTimeoutMs ?? 120_000);
      this.#kick();
    }
    // Chained, so a second waiter (a step aside, then the leave at SIGTERM) never strands the first.
    const before = this.#leaveSettled;
    const settled = new Promise<void>((resolve) => {
      this.#leaveSettled = () => {
        before();
        resolve();
      };
    });
    this.#checkLeft();
    const timeout = new AbortController();
    const left = Math.max(0, (this.#leaveDeadline ?? this.#clock.now()) - this.#clock.now());
    await Promise.race([settled, this.#clock.sleep(left, AbortSignal.any([timeout.signal, this.#stop.signal]))]);
    timeout.abort();
  }

  /** Stops at once, with no API call and no change to the ranges: what SIGKILL would leave behind. Idempotent. */
  halt(): void {
    this.#shutdown();
  }

  #shutdown(): void {
    this.#life = LIFECYCLE.Stopped;
    this.#stop.abort();
    this.#wake.abort();
    this.#cancelWatchdog();
    this.#stopWatch();
  }

  // ---- Lease --------------------------------------------------------------

  async #loop(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      this.#wake = new AbortController();
      await this.#clock.sleep(this.#t.retryPeriodMs, AbortSignal.any([this.#stop.signal, this.#wake.signal]));
      if (this.#stop.signal.aborted) return;
      await this.#renewOnce();
    }
  }

  /** Renew soon: something the leader waits for changed (applied generation, leaving). */
  #kick(): void {
    this.#wake.abort();
  }

  async #renewOnce(): Promise<void> {
    // The renewal counts from when it was *sent*: the API server may apply it
    // any time after, so this is the conservative end of the Lease.
    const sentAt = this.#clock.now();
    const lease = this.#lease;
    try {
      if (lease === undefined) await this.#acquire(sentAt);
      else this.#renewed(await this.#leases.replace(this.#o.namespace, this.#body(lease, sentAt)), sentAt);
    } catch (e) {
      if (this.#stop.signal.aborted) return;
      if (lease === undefined) this.#log.info({ err: describe(e) }, "could not acquire the member Lease; retrying");
      else if (isConflict(e)) await this.#retryAfterConflict(sentAt);
      else if (isNotFound(e)) this.#lost("member Lease was deleted");
      else this.#log.warn({ err: describe(e) }, "Lease renewal failed");
    }
  }

  /**
   * A 409 means someone else wrote the Lease since we read it: an annotation
   * edit (retry on the fresh copy, keeping their change) or the leader's
   * takeover (we are fenced). Only the holder on a fresh read tells which.
   */
  async #retryAfterConflict(sentAt: number): Promise<void> {
    for (let attempt = 0; attempt < 3 && !this.#stop.signal.aborted; attempt++) {
      this.#metrics?.leaseConflicts.inc({ ring: this.#o.ring });
      try {
        const fresh = await this.#leases.get(this.#o.namespace, this.#leaseName);
        if (fresh === undefined) return this.#lost("member Lease was deleted");
        if (fresh.spec?.holderIdentity !== this.#identity) return this.#lost(`member Lease was taken over by ${JSON.stringify(fresh.spec?.holderIdentity ?? "")}`);
        this.#renewed(await this.#leases.replace(this.#o.namespace, this.#body(fresh, sentAt)), sentAt);
        return;
      } catch (e) {
        if (!isConflict(e)) {
          this.#log.warn({ err: describe(e) }, "Lease renewal failed after a conflict");
          return;
        }
      }
    }
  }

  async #acquire(sentAt: number): Promise<void> {
    const cur = await this.#leases.get(this.#o.namespace, this.#leaseName);
    if (cur === undefined) {
      await this.#acquired(await this.#leases.create(this.#o.namespace, this.#body(undefined, sentAt)), sentAt);
      return;
    }
    if (!mayTake(cur, this.#identity, this.#o.member, sentAt)) {
      this.#log.info({ holder: cur.spec?.holderIdentity ?? "" }, "member Lease is held by someone else; waiting for it to expire");
      return;
    }
    await this.#acquired(await this.#leases.replace(this.#o.namespace, this.#body(cur, sentAt)), sentAt);
  }

  async #acquired(lease: Lease, sentAt: number): Promise<void> {
    this.#renewed(lease, sentAt, false);
    // Read the ring fresh before enforcing anything: a watch may lag, and a
    // fenced member must not resume slots the leader has since handed on.
    try {
      this.#applyRing(await this.#rings.get(this.#o.namespace, this.#o.ring));
    } catch (e) {
      this.#log.warn({ err: describe(e) }, "could not read the ShardRing; keeping the last table");
    }
    this.#fenced = false;
    this.#republish();
  }

  #renewed(lease: Lease, sentAt: number, unfence = true): void {
    this.#lease = lease;
    this.#lastRenewAt = sentAt;
    this.#cancelWatchdog();
    // Self-fencing must not wait for a renewal that hangs: a timer fires at
    // the renew deadline unless a newer renewal re-armed it.
    this.#cancelWatchdog = this.#clock.timer(sentAt + this.#t.renewDeadlineMs - this.#clock.now(), () => {
      if (this.#lastRenewAt === sentAt && !this.#stop.signal.aborted) this.#selfFence(`no successful renewal for ${this.#t.renewDeadlineMs} ms`);
    });
    if (unfence && this.#fenced) {
      // The PUT carried our last resourceVersion and won, so nobody took the
      // Lease over in between: resuming is safe.
      this.#log.info("renewed again; enforcing ranges again");
      this.#fenced = false;
      this.#republish();
    }
  }

  #lost(why: string): void {
    this.#lease = undefined;
    this.#selfFence(why);
  }

  #selfFence(why: string): void {
    if (!this.#fenced) {
      this.#log.warn({ why }, "fencing self: enforcing no ranges until the Lease is held again");
      this.#metrics?.selfFences.inc({ ring: this.#o.ring });
    }
    this.#fenced = true;
    this.#republish();
  }

  #body(base: Lease | undefined, now: number): Lease {
    return memberLeaseBody(base, {
      identity: this.#identity,
      leaseName: this.#leaseName,
      namespace: this.#o.namespace,
      ring: this.#o.ring,
      member: this.#o.member,
      applied: this.#applied,
      slots: this.#slots,
      leaving: this.#leaving,
      mode: this.#o.mode,
      leaseDurationSeconds: this.#t.leaseDurationSeconds,
    }, now);
  }

  // ---- following the ring -------------------------------------------------

  #applyRing(obj: RingObject | undefined): void {
    if (obj === undefined || this.#stop.signal.aborted) return; // no ring (yet, or any more): keep what we hold
    // A member needs only the slot count from the spec, and the leader's
    // status records the one its tables use; so a spec broken by hand (which
    // the leader refuses) does not stop members from following the leader.
    const st: unknown = obj.status;
    const recorded = typeof st === "object" && st !== null && "slotCount" in st ? st.slotCount : undefined;
    let slotCount: number;
    if (typeof recorded === "number") slotCount = recorded;
    else {
      const spec = decodeSpec(obj.spec);
      if (!spec.ok) return this.#refuse(spec.message);
      slotCount = spec.value.slotCount;
    }
    if (this.#slotCount !== undefined && slotCount !== this.#slotCount) {
      return this.#refuse(`slot count changed from ${this.#slotCount} to ${slotCount}; slot counts are fixed for a member's life`);
    }
    const tables = decodeTables(obj.status, slotCount);
    if (!tables.ok) return this.#refuse(`${tables.reason}: ${tables.message}`);
    this.#slotCount = slotCount;
    if (tables.value !== undefined) this.#tables = tables.value;
    this.#republish();
  }

  #refuse(message: string): void {
    // Fail closed: an invalid ring never changes what we enforce.
    if (message !== this.#lastRefusal) this.#log.warn({ message }, "ignoring invalid ShardRing; keeping the last accepted table");
    this.#lastRefusal = message;
  }

  #republish(): void {
    if (this.#slotCount === undefined) return;
    let next: Ownership;
    if (this.#fenced || this.#life === LIFECYCLE.Stopped) {
      // Generation 0 ("no table"), so no report made for the fenced state
      // can be mistaken for one about a real table's ranges, and back.
      this.#slots = [];
      next = EMPTY;
    } else {
      const t = follow(this.#held, this.#tables, this.#o.member);
      this.#held = t.held;
      this.#slots = t.slots;
      next = { generation: t.generation, ranges: slotsToRanges(t.slots, this.#slotCount) };
    }
    this.#target = next;
    this.#publish(next);
    this.#reportIfApplied();
    this.#checkLeft();
  }

  #publish(next: Ownership): void {
    const prev = this.#ownership;
    // Every new generation is published, even with unchanged ranges: callers
    // rely on current().generation naming the table generation the member is
    // at. A proxy should not relist when only the generation moved (the
    // ranges are equal); the member then acknowledges it by itself, below.
    if (prev.generation === next.generation && equal(prev.ranges, next.ranges)) return;
    // Ranges that differ from the published ones must be applied by the proxy
    // before any generation counts as applied again, even one that returns
    // to ranges it applied earlier: its relist for the ranges in between may
    // still be in flight, and that cache would not hold what it acknowledged.
    if (!equal(prev.ranges, next.ranges)) this.#appliedRanges = undefined;
    this.#ownership = Object.freeze({ generation: next.generation, ranges: Object.freeze([...next.ranges]) });
    this.#log.info({ generation: next.generation, slots: formatSlots(this.#slots) }, "ranges changed");
    this.#metrics?.owned.set({ ring: this.#o.ring }, ratio(next.ranges));
    this.#metrics?.generation.set({ ring: this.#o.ring }, next.generation);
    for (const l of this.#listeners) {
      try {
        l(this.#ownership, prev);
      } catch (e) {
        this.#log.error({ err: describe(e) }, "ownership listener threw");
      }
    }
  }

  /**
   * Reports the newest generation whose ranges the proxy has applied: when
   * the target's ranges are the ones the proxy last relisted under, there is
   * nothing left to do for it.
   */
  #reportIfApplied(): void {
    if (this.#target.generation !== 0 && this.#appliedRanges !== undefined && equal(this.#target.ranges, this.#appliedRanges)) this.#noteApplied(this.#target.generation);
  }

  #noteApplied(generation: number): void {
    if (generation <= this.#applied) return;
    this.#applied = generation;
    this.#kick();
  }

  #checkLeft(): void {
    if (this.#life !== LIFECYCLE.Leaving && !(this.#life === LIFECYCLE.Running && this.#leaving)) return;
    // A member that cannot renew its Lease cannot hand anything on: the
    // leader will see it expire and take its slots over as a crash's. Waiting
    // out the leave timeout would only outlast the pod's grace period and end
    // in a SIGKILL (issue 32); it enforces nothing already, so it goes now.
    if (this.#fenced) {
      this.#log.warn("leaving without a drain: the Lease cannot be renewed, so the leader will take the slots over when it expires");
      this.#leaveSettled();
      return;
    }
    // Free to go once nothing committed is ours and nothing pending would be:
    // then no slot depends on this member (a member that never got a table,
    // e.g. with no manager running, leaves at once).
    const pendingGivesUs = this.#tables?.pending?.owners.includes(this.#o.member) ?? false;
    if (this.#held.slots.length === 0 && !pendingGivesUs) this.#leaveSettled();
  }
}
