/**
 * What the manager's ring coordination takes: its options and the shape of
 * the work it runs while leading (the labeller). Apart from coordinator.ts
 * because the election and the ring controller read these too, and
 * coordinator.ts imports both: types here keep that free of cycles.
 */
import type { RingApiAccess } from "./kube.ts";
import type { MemberTimings } from "./member.ts";
import type { RingShellOptions } from "./shell-options.ts";
import type { RingCondition } from "./table.ts";

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
  /**
   * In a ring with a table, the next table after members joined or began
   * leaving waits until none did for this long. Default: 2.5 × the
   * election's retry period (5 s): a rolling update stops old pods seconds
   * after its new ones are up, and one table for both moves each slot once.
   */
  readonly changeQuietMs?: number | undefined;
  /** ...and no longer than this after the first change. Default: the lease duration (15 s). */
  readonly changeMaxMs?: number | undefined;
  /** Run while leading, e.g. the labeller; their status goes into every status write. */
  readonly tasks?: readonly LeaderTask[] | undefined;
}
