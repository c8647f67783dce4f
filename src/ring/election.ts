/**
 * The manager's leader election: one Lease, client-go's rules. A replica
 * campaigns until it holds the Lease, renews it every retry period, steps
 * down when it cannot renew within the renew deadline, and releases it on
 * the way out. Apart from the rings it gates (ring-controller.ts): the
 * election knows nothing of rings, and coordinator.ts runs the rings while
 * it holds.
 */
import type { ApiClient } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import type { Clock } from "./clock.ts";
import type { CoordinatorOptions } from "./coordinator-options.ts";
import { describe, isConflict, isNotFound, LeaseApi, microTime, renewalRecord, type Lease } from "./kube.ts";
import type { MemberTimings } from "./member.ts";
import { MANAGER_LEASE } from "./names.ts";

/** One replica's side of the election; {@link Election.campaign} and {@link Election.release} are called by one loop, never concurrently. */
export class Election {
  readonly #o: Pick<CoordinatorOptions, "namespace" | "identity" | "electionLease">;
  readonly #t: MemberTimings;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #api: LeaseApi;
  readonly #name: string;
  #lease: Lease | undefined;
  #observed = { record: "", at: 0 };

  constructor(o: Pick<CoordinatorOptions, "namespace" | "identity" | "electionLease">, api: ApiClient, t: MemberTimings, clock: Clock, log: Logger) {
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
