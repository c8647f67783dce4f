/**
 * The data of the proxy's handoff ledger (`ledger.ts`): its state, the
 * events the shell observes, the effects the shell carries out, and the
 * bounds it is run with. Plain, immutable data.
 */
import type { Range } from "../../../shard/range.ts";
import type { PMap } from "./pmap.ts";
import type { ResumeBook } from "./resume.ts";

/** A sharded request's id, given by the shell; never reused. */
export type Rid = number;
/** One cache's view of a resource: path, selectors, `as=` (see `lineageKey`). */
export type LineageKey = string;

export interface LedgerPolicy {
  /** Ownership changes (ring mode): resumes this proxy cannot place are refused. */
  readonly ring: boolean;
  /** Narrow in place (synthetic DELETEDs) when the ranges only shrink. */
  readonly syntheticDeletes: boolean;
  /** Quiet bound of a lineage that never watched and holds nothing of older ranges (a one-off lister, or an informer whose WATCH follows); see quiet.ts. */
  readonly betweenListAndWatchMs: number;
  /** Quiet bound of a reflector, or of a lineage whose cache is of older ranges (an informer may still be reading that LIST). */
  readonly watcherQuietMs: number;
  /** After the first non-empty ranges, every resume this proxy cannot place is refused this long. */
  readonly refuseUnplacedMs: number;
  /** 410s ending watches at a change are spread over this window. */
  readonly relistJitterMs: number;
  /** Lineages remembered at most; the least recently used with nothing open or in flight go first. */
  readonly maxLineages: number;
  /** A lineage idle this long (nothing open or in flight) has its object index dropped. */
  readonly idleIndexMs: number;
  /** How often (at most) idle indexes are looked for. */
  readonly pruneEveryMs: number;
}

export const DEFAULT_POLICY: LedgerPolicy = {
  ring: false,
  syntheticDeletes: false,
  betweenListAndWatchMs: 5000,
  watcherQuietMs: 65_000,
  refuseUnplacedMs: 60_000,
  relistJitterMs: 0,
  maxLineages: 1024,
  idleIndexMs: 10 * 60 * 1000,
  pruneEveryMs: 60_000,
};

export interface RequestBase {
  readonly rid: Rid;
  readonly lineage: LineageKey;
  readonly kind: "list" | "watch";
  /** A WATCH with `sendInitialEvents=true`: a relist once its initial events are through. */
  readonly watchList: boolean;
  /** A LIST with a `continue` token: a later page, not a snapshot of its own. */
  readonly page: boolean;
  /** A WATCH continuing a cache from this resourceVersion (no initial events). */
  readonly resumeRv: string | undefined;
  /** False when the shell will answer it itself (bad selector, unservable Accept). */
  readonly answerable: boolean;
}

/** Waiting for the first ranges (see `holdUntil`). */
export interface HeldRequest extends RequestBase {
  readonly phase: "held";
}

/** Sent upstream, not answered yet (a LIST: not served whole yet). */
export interface SentRequest extends RequestBase {
  readonly phase: "sent";
  /** The epoch (and its ranges) the request was rewritten under. */
  readonly epoch: number;
  readonly ranges: readonly Range[];
  /** The resume point a resuming WATCH continues, if placed. */
  readonly point: number | undefined;
  /** A resume of a cache built under this older epoch, sent to be narrowed once served (`LineageRecord.narrowOnResume`). */
  readonly narrowFrom: number | undefined;
}

/** A watch being served to the client. */
export interface OpenWatch extends RequestBase {
  readonly phase: "open";
  readonly kind: "watch";
  readonly sentEpoch: number;
  /** The epoch of its cache: of the ranges it filters with, or (a resume narrowed once served) older until confirmed; moves when it is narrowed. */
  readonly epoch: number;
  readonly ranges: readonly Range[];
  /** Its cache's resume point: the one it resumed from, or the one its narrowing recorded. */
  readonly point: number | undefined;
  /** A 410 was ordered for it (now or after jitter): it is never narrowed. */
  readonly doomed: boolean;
  /** A watch-list whose initial events are not through: its cache is being rebuilt, and is never narrowed. */
  readonly replaying: boolean;
  /** A narrowing was ordered and not yet confirmed by the shell. */
  readonly narrowing: { readonly epoch: number; readonly ranges: readonly Range[] } | undefined;
}

export type RequestRecord = HeldRequest | SentRequest | OpenWatch;

export interface LineageRecord {
  readonly key: LineageKey;
  /** The newest epoch a cache of this lineage was rebuilt or narrowed under; never goes back. */
  readonly listEpoch: number | undefined;
  /** A WATCH was ever requested (served or refused): the lineage is a reflector's. */
  readonly watched: boolean;
  /** When a request of it last started or ended. */
  readonly lastUsed: number;
  readonly book: ResumeBook;
  /** A resume this proxy could not place was refused once already. */
  readonly unplacedRefused: boolean;
  /** A cache of it was told to relist (a refused resume, a 410) and the lineage has not relisted since. */
  readonly told: boolean;
  /** Watches ever opened: a sequence (not a count of open ones), for the index's "alone" test. */
  readonly watchesOpened: number;
  /** A `drop-index` was ordered since it was last used. */
  readonly indexDropped: boolean;
  /**
   * Its cache was rebuilt under `epoch` (with `ranges`), had no watch open
   * when the ranges shrank, and its index was trusted: the WATCH resuming
   * that cache is narrowed once served, as an open watch would have been,
   * instead of refused (`deferredNarrowing` in narrowing.ts). Gone once the
   * lineage's epoch moves on (`advance`).
   */
  readonly narrowOnResume: { readonly epoch: number; readonly ranges: readonly Range[] } | undefined;
}

export interface Owed {
  /** When it became owed; kept while it is carried into later generations. */
  readonly since: number;
  /** Its requests were held for these ranges: a completed LIST counts as its relist (it may be a one-off). */
  readonly listCounts: boolean;
}

/** A lineage whose open watches were all told to narrow to `epoch`; applied once every one confirmed. */
export interface Narrowing {
  readonly epoch: number;
  /** Watches that have not confirmed yet. */
  readonly waiting: readonly Rid[];
  /** One of them refused (or ended first): the lineage relists instead. */
  readonly failed: boolean;
}

export interface Ledger {
  /** The generation last announced, and the ranges enforced now. */
  readonly generation: number;
  readonly ranges: readonly Range[];
  /** Moves exactly when the enforced ranges change; a generation that keeps them keeps it. */
  readonly epoch: number;
  /** The current generation has not been reported applied yet. */
  readonly awaiting: boolean;
  /** Lineages that must relist under the current epoch before it is. */
  readonly owed: ReadonlyMap<LineageKey, Owed>;
  readonly narrowing: ReadonlyMap<LineageKey, Narrowing>;
  /**
   * Lineages let go by their quiet bound while the current generation
   * waits, with when they became owed: one that comes back before the
   * generation is reported owes again (it is relisting now).
   */
  readonly released: ReadonlyMap<LineageKey, number>;
  /** Shared from step to step (pmap.ts): a step copies what it changes, not the table. */
  readonly lineages: PMap<LineageKey, LineageRecord>;
  /** Every held, sent or open sharded request; counts are read off these. */
  readonly requests: PMap<Rid, RequestRecord>;
  /** While defined, sharded requests are held (no ranges yet), until this time at the latest. */
  readonly holdUntil: number | undefined;
  /** Until then every resume this proxy cannot place is refused; 0 (refuse too) before the first non-empty ranges. */
  readonly refuseUnplacedUntil: number;
  /** Source of resume point ids. */
  readonly nextPointId: number;
  /** State of the jitter generator (see jitter.ts). */
  readonly seed: number;
  /** The wake-up last asked of the shell. */
  readonly wakeAt: number | undefined;
  readonly lastPrune: number;
  readonly shutdown: boolean;
}

/** What the shell knows about its streams and index right before a range change. */
export interface NarrowFacts {
  /** Lineages whose object index holds at least what any of its caches holds, with a known kind (open watches or not). */
  readonly trusted: ReadonlySet<LineageKey>;
  /** Open watches that sit between events past their initial events, with a known client resourceVersion. */
  readonly narrowable: ReadonlySet<Rid>;
}

export const NO_FACTS: NarrowFacts = { trusted: new Set(), narrowable: new Set() };

export type LedgerEvent =
  /** The ownership announced a generation (and its ranges). */
  | { readonly type: "ranges"; readonly generation: number; readonly ranges: readonly Range[]; readonly facts: NarrowFacts }
  /** A sharded LIST or WATCH arrived. */
  | ({ readonly type: "request" } & RequestBase)
  /** A LIST response ended: delivered whole (`ok`) or cut; `rv` is the list's resourceVersion, if read. */
  | { readonly type: "list-done"; readonly rid: Rid; readonly ok: boolean; readonly rv: string | undefined }
  /** Upstream answered a WATCH with a stream the proxy can filter. */
  | { readonly type: "watch-response"; readonly rid: Rid }
  /** A watch-list's initial events were handed to the client. */
  | { readonly type: "initial-events-end"; readonly rid: Rid }
  /** The shell carried out a `narrow` for `rid`: `ok` when the stream took it, with the client's resourceVersion. */
  | { readonly type: "narrowed"; readonly rid: Rid; readonly ok: boolean; readonly rv: string | undefined }
  /** A served watch ended; `rv` is the client's newest resourceVersion; `byProxy` when it was the proxy's 410. */
  | { readonly type: "watch-ended"; readonly rid: Rid; readonly rv: string | undefined; readonly byProxy: boolean }
  /**
   * The client's response closed (answered, refused, or the client went
   * away) and no other event of the request follows: not sent for a LIST
   * being served (its `list-done` is its last) nor a watch being served
   * (its `watch-ended` is).
   */
  | { readonly type: "closed"; readonly rid: Rid }
  /** Time passed (a `wake` fired). */
  | { readonly type: "tick" }
  | { readonly type: "shutdown" };

export type LedgerEffect =
  /** Keep the request until a `send`, `reject` or `refuse-resume` for it. */
  | { readonly type: "hold"; readonly rid: Rid }
  /** Rewrite with `ranges` and send upstream; the response is stamped with `generation`. */
  | { readonly type: "send"; readonly rid: Rid; readonly generation: number; readonly epoch: number; readonly ranges: readonly Range[] }
  /** Answer the shell's own error (the request was not answerable). */
  | { readonly type: "reject"; readonly rid: Rid }
  /** Answer 410 before upstream: the cache this WATCH continues is of other ranges, or unknown. */
  | { readonly type: "refuse-resume"; readonly rid: Rid; readonly why: string }
  /** Serve the watch's stream. */
  | { readonly type: "serve-watch"; readonly rid: Rid }
  /** Answer the watch with a 410 ERROR event instead of its stream: the ranges changed while it was opened. */
  | { readonly type: "expire-watch"; readonly rid: Rid; readonly why: string }
  /** End the open watch with a 410 ERROR event, after `delayMs`; `cause` "ranges" counts as a forced relist. */
  | { readonly type: "end-watch"; readonly rid: Rid; readonly delayMs: number; readonly why: string; readonly cause: "ranges" | "shutdown" }
  /** Send each watch synthetic DELETEDs for the lineage's objects outside `ranges`, then filter with `ranges`; confirm each with `narrowed`. */
  | { readonly type: "narrow"; readonly lineage: LineageKey; readonly rids: readonly Rid[]; readonly ranges: readonly Range[]; readonly epoch: number }
  /** Report the generation applied (`OwnershipSource.markApplied`). */
  | { readonly type: "applied"; readonly generation: number }
  /** Step a `tick` at `at` (replacing any earlier wake); `undefined`: no wake needed. */
  | { readonly type: "wake"; readonly at: number | undefined }
  /** Forget the lineage's object index. */
  | { readonly type: "drop-index"; readonly lineage: LineageKey }
  | { readonly type: "log"; readonly level: "info" | "debug"; readonly msg: string; readonly fields: Readonly<Record<string, unknown>> };

export interface StepResult {
  readonly ledger: Ledger;
  readonly effects: readonly LedgerEffect[];
}
