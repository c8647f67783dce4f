/**
 * What the proxy handler (server.ts) is given, and what it says of the
 * handoff's state (`ShardProxy.handoff()`, read by /debug/shardcar and the
 * tests). Apart from server.ts so that the handler is the one job there.
 */
import type { Logger } from "../log.ts";
import type { Fallback } from "../settings/pod-settings.ts";
import type { OwnershipSource } from "../shard/ownership.ts";
import type { ShardedResource } from "../shard/spec.ts";
import type { OwedView } from "./handoff/ledger/view.ts";
import type { ProxyClock } from "./handoff/ledger-driver.ts";
import type { ProxyMetrics } from "./reporting/metrics.ts";
import type { ProxyFiltering } from "./request/filtering.ts";
import type { LockSpec } from "./serving/lock-rename.ts";
import type { Upstream } from "./serving/upstream.ts";
export interface ShardProxyOptions {
  readonly upstream: Upstream;
  readonly resources: readonly ShardedResource[];
  readonly ownership: OwnershipSource;
  readonly fallback: Fallback;
  readonly logger: Logger;
  readonly metrics: ProxyMetrics;
  /** How the apiserver is asked to filter (see filtering.ts). Default shardselector. */
  readonly filtering?: ProxyFiltering;
  /** Minimum gap between synthetic bookmarks on one watch. Default 1 s. */
  readonly bookmarkIntervalMs?: number;
  /** Forced relists after a range change are spread over this window. Default 0. */
  readonly relistJitterMs?: number;
  /**
   * Narrow without a relist: keep an index of what each controller cache was
   * delivered, and when the ranges only shrink, send synthetic DELETED events
   * for the objects leaving them instead of ending the watch with 410. For
   * ownership that changes (ring mode); static shards never narrow. Default false.
   */
  readonly syntheticDeletes?: boolean;
  /**
   * While the ownership has never had a generation (a ring member that has
   * not been given its slots yet), hold sharded requests up to this long
   * instead of answering them for an empty shard. The controller's first
   * LIST is then its real one, not an empty list followed by a relist (P7).
   * Default 0 (serve at once).
   */
  readonly waitForRangesMs?: number;
  /**
   * When the ranges change, a lineage that never watched and holds nothing
   * of older ranges (a LIST cut, or one under the current ranges) and was
   * used this recently may be an informer about to WATCH: the generation
   * waits for it, but no longer than this (a one-off LIST has no watch to
   * follow). Default 5000 ms.
   */
  readonly betweenListAndWatchMs?: number;
  /**
   * The same bound for a lineage that has watched (a reflector), or whose
   * newest cache is of older ranges (an informer may still be reading that
   * LIST): how long it may have nothing open and still be coming back to
   * relist or resume. Reflectors wait up to a minute (client-go's post-410
   * backoff, jittered; client-node's wait between LIST and WATCH), and
   * client-node parses a big list for seconds on a loaded machine.
   * Default 65000 ms.
   */
  readonly watcherQuietMs?: number;
  /** Largest single list item or watch event accepted from upstream. Default 16 MiB. */
  readonly maxItemBytes?: number;
  /**
   * With fallback=fail, how much of a list without shardInfo is held back
   * while deciding whether the server filtered it. Default 64 MiB.
   */
  readonly failBufferBytes?: number;
  /** Seeds the relist jitter. Default Math.random. */
  readonly random?: () => number;
  /** Told of every request that did not reach the upstream (`shardcar proxy` probes it again: upstream-probe.ts). */
  readonly upstreamFailed?: (err: Error) => void;
  /** The time and timers the handoff ledger runs on. Default: the system clock. */
  readonly clock?: ProxyClock;
  /**
   * TEST-ONLY, never set in production and not reachable from any flag: the
   * watch filter keeps every event, as a proxy that forgot to filter watches
   * would. Exists so `npm run test:real` can show it catches such a proxy.
   */
  readonly unsafeSkipWatchFilter?: boolean;
  /**
   * Per-shard leader election: the controller's lock is renamed to
   * `<name>-<identity>` in paths and create bodies, and back in responses.
   */
  readonly lock?: { readonly spec: LockSpec; readonly identity: string };
}

/** See {@link ShardProxy.handoff}. */
export interface HandoffView {
  readonly generation: number;
  readonly epoch: number;
  /** The generation was reported applied (or none was announced since start). */
  readonly applied: boolean;
  /** Lineages that owe a relist before it is. */
  readonly owed: readonly string[];
  readonly narrowing: readonly string[];
  /** Requests held for the first ranges. */
  readonly held: number;
  /** Each owed lineage in detail: how long owed, what is open or in flight, when its quiet bound ends. */
  readonly waiting: readonly OwedView[];
}
