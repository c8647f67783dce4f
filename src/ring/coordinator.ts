/**
 * The manager's side of the rings: elects one leader among the manager
 * replicas (election.ts), and on the leader watches the member Leases and
 * ShardRings and runs one controller per ring (ring-controller.ts) that
 * turns member Leases into a committed table through the pure handoff
 * state machine. This file wires them: {@link runCoordinator} campaigns,
 * runs the rings while it leads, and campaigns again when it loses.
 */
import type { ApiClient } from "../kube/client.ts";
import { childLogger, silentLogger, type Logger } from "../log.ts";
import { entryOf } from "../map-entry.ts";
import { systemClock, type Clock } from "./clock.ts";
import type { CoordinatorOptions } from "./coordinator-options.ts";
import { Election } from "./election.ts";
import { decodeLease, decodeRing, EventSink, LeaseApi, memberOf, renewalRecord, RingApi, ringApiClient, watchObjects, type Lease, type RingObject } from "./kube.ts";
import { checkMemberTimings, DEFAULT_MEMBER_TIMINGS, type MemberTimings } from "./member.ts";
import { coordinatorMetrics, type CoordinatorMetrics } from "./metrics.ts";
import { RING_LABEL } from "./names.ts";
import { RingController, type Shared } from "./ring-controller.ts";

export type { CoordinatorOptions, LeaderTask, RingStatusExtra } from "./coordinator-options.ts";
// The S1 bench sizes statuses with it, and imports it from here.
export { composeStatus } from "./ring-controller.ts";

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

/** Every ring in scope, while this replica leads: watches Leases and ShardRings and triggers each ring's {@link RingController}. */
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
