/**
 * The handoff ledger's table (src/proxy/handoff/ledger/ledger.ts, invariants I1-I8).
 * Each row drives `step` directly through the shell's sequence of events and
 * states, in its name, the invariant it protects; `was` names the race tests
 * it carries over (test/proxy/handoff/review*-narrowing.test.ts, ownership-change,
 * synthetic-delete, delivered), mapped in docs/testing.md. No row sleeps:
 * time passes by `advance`, which fires only the wakes the ledger asked for.
 */
import t, { type Test } from "tap";
import type { LedgerPolicy } from "../../../src/proxy/handoff/ledger/types.ts";
import { describeOwed } from "../../../src/proxy/handoff/ledger/view.ts";
import { step } from "../../../src/proxy/handoff/ledger/ledger.ts";
import { normalize, shardRange } from "../../../src/shard/range.ts";
import { Drive, FULL, HIGH, L, LOW, M, QUARTER, RING, T0, type Start } from "../support/ledger-driver.ts";

interface Row {
  /** The invariant, as the requirement it keeps. */
  name: string;
  /** Old test cases this row carries over (docs/testing.md maps them). */
  was: string[];
  policy?: Partial<LedgerPolicy>;
  start?: Start;
  script: (d: Drive, t: Test) => void;
  /** Generations reported applied by the end, in order. */
  applied: number[];
  /** The last effect that named each request. */
  verdicts?: Record<number, string>;
}

const MIDDLE = normalize([shardRange(1, 4), shardRange(2, 4)]);
const HELD = (waitForRangesMs: number): Start => ({ generation: 0, ranges: [], waitForRangesMs });

const ROWS: Row[] = [
  // ---- I1: applied means rebuilt ---------------------------------------
  {
    name: "I1: a generation with nothing to relist is applied at once",
    was: ["ownership-change: RelistTracker, applied at once when nothing is owed"],
    script: (d) => d.ranges(2, LOW),
    applied: [2],
  },
  {
    name: "I1/I6: a generation that keeps the ranges keeps every watch open and is applied at once",
    was: ["ownership-change: a new generation with the same ranges keeps watches open"],
    script: (d, t) => {
      d.informer(1, 2, "10").ranges(2, FULL);
      t.equal(d.ledger.epoch, 0, "the epoch did not move");
    },
    applied: [2],
    verdicts: { 2: "serve-watch" },
  },
  {
    name: "I1/I5: changed ranges end the open watch with 410; the generation waits for the relist and the WATCH that resumes from it, not the LIST alone",
    was: ["ownership-change: changed ranges end open watches with 410"],
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.informer(1, 2, "10").ranges(2, FULL);
      t.equal(d.verdict(2), "end-watch", "the widening ends the watch");
      d.ended(2).list(3).listed(3, "12");
      t.same(d.applied, [], "a completed LIST alone does not apply it");
      d.watch(4, L, { from: "12" }).served(4);
    },
    applied: [2],
  },
  {
    name: "I1: obligations carry into a later generation with the same ranges, and the relist under the epoch applies only the newest generation",
    was: ["ownership-change: RelistTracker, owed relists carry over to newer generations"],
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.informer(1, 2, "10").ranges(2, FULL).ended(2).list(3).ranges(3, FULL);
      t.same(d.applied, [], "generation 3 still owes the relist of generation 2");
      d.listed(3, "12").watch(4, L, { from: "12" }).served(4);
    },
    applied: [3],
  },
  {
    name: "I1/I5: a relist under an older epoch than the current one does not count",
    was: [],
    start: HELD(20_000),
    script: (d, t) => {
      // A held LIST (a completed one is its lineage's relist) sent under the first ranges, answered after the next change.
      d.list(1).ranges(1, LOW).ranges(2, HIGH).listed(1, "10");
      t.same(d.applied, [], "its LIST is of LOW");
      d.list(2).listed(2, "12").watch(3, L, { from: "12" }).served(3);
    },
    applied: [2],
  },
  {
    name: "I1/I3: a narrowing the stream refuses ends that watch with 410, and its lineage owes a relist",
    was: [],
    script: (d, t) => {
      d.informer(1, 2, "10");
      d.refuseNarrow.add(2);
      d.ranges(2, LOW);
      t.same(d.verdicts.get(2)?.slice(-2), ["narrow", "end-watch"], "told to narrow, refused, ended");
      t.same(d.applied, [], "not applied on the order to narrow: only once every stream confirmed");
      d.ended(2).list(3).listed(3, "12").watch(4, L, { from: "12" }).served(4);
    },
    applied: [2],
  },
  // ---- I2: stale caches cannot resume ----------------------------------
  {
    name: "I2: a WATCH resuming from a LIST served under older ranges gets 410 before it reaches upstream",
    was: ["ownership-change: a watch resuming from a LIST made under older ranges gets 410"],
    start: { generation: 1, ranges: LOW },
    script: (d) => d.list(1).listed(1, "10").ranges(2, HIGH).watch(2, L, { from: "10" }),
    applied: [],
    verdicts: { 2: "refuse-resume" },
  },
  {
    name: "I2/I4: a WATCH sent under older ranges and answered after they changed gets 410 in its stream, and its lineage owes the relist",
    was: ["review A"],
    script: (d, t) => {
      d.list(1).listed(1, "10").watch(2, L, { from: "10" }).ranges(2, LOW).served(2);
      t.equal(d.verdict(2), "expire-watch", "answered with 410, not its stream");
      t.same(d.applied, [], "not applied while that cache holds the old ranges");
      d.list(3).listed(3, "12").watch(4, L, { from: "12" }).served(4);
    },
    applied: [2],
  },
  {
    name: "I2: a resume is placed by the LIST it resumes from: a one-off LIST of the same query under the new ranges does not vouch for an older cache",
    was: ["review B"],
    start: { generation: 1, ranges: LOW },
    script: (d) => d.list(1).listed(1, "10").ranges(2, FULL).list(2).listed(2, "12").watch(3, L, { from: "10" }),
    applied: [],
    verdicts: { 3: "refuse-resume" },
  },
  {
    name: "I2: the same without synthetic deletes (ring mode still records every LIST's resourceVersion)",
    was: ["review2 S3"],
    policy: { syntheticDeletes: false },
    start: { generation: 1, ranges: LOW },
    script: (d) => d.list(1).listed(1, "10").ranges(2, FULL).list(2).listed(2, "12").watch(3, L, { from: "10" }),
    applied: [],
    verdicts: { 3: "refuse-resume" },
  },
  {
    name: "I2: caches at one resourceVersion: each resume uses up the oldest unused point, so a newer LIST there cannot vouch for an older cache",
    was: ["review2 S2"],
    start: { generation: 1, ranges: LOW },
    script: (d) => d.list(1).listed(1, "10").ranges(2, FULL).list(2).listed(2, "10").watch(3, L, { from: "10" }),
    applied: [],
    verdicts: { 3: "refuse-resume" },
  },
  {
    name: "I2: a cache's own point stays its place to resume from: a later LIST at the same resourceVersion does not vouch for it",
    was: ["review3 R4"],
    start: { generation: 1, ranges: LOW },
    script: (d) => d.informer(1, 2, "10").ended(2, { byProxy: false }).ranges(2, FULL).list(3).listed(3, "10").watch(4, L, { from: "10" }),
    applied: [],
    verdicts: { 4: "refuse-resume" },
  },
  {
    name: "I2: in the restart window a held resume this proxy never served is refused, and the generation waits for that lineage",
    was: ["review E"],
    start: HELD(3000),
    policy: { betweenListAndWatchMs: 2000 },
    script: (d) => d.watch(1, L, { from: "10" }).ranges(5, LOW).advance(600),
    applied: [],
    verdicts: { 1: "refuse-resume" },
  },
  {
    name: "I2: in the restart window every unplaceable resume is refused: a lineage's second cache too, even after its first relisted",
    was: ["review3 R5", "review4 Q3"],
    start: HELD(3000),
    script: (d, t) => {
      d.watch(1, L, { from: "10" }).watch(2, L, { from: "14" }).ranges(5, LOW);
      t.same(d.applied, [], "nothing relisted yet");
      d.list(3).listed(3, "20").watch(4, L, { from: "20" }).served(4).watch(5, L, { from: "14" });
    },
    applied: [5],
    verdicts: { 1: "refuse-resume", 2: "refuse-resume", 4: "serve-watch", 5: "refuse-resume" },
  },
  {
    name: "I2: an unplaceable resume is refused every time inside the restart window, then once per lineage, not forever (a GET, then a WATCH)",
    was: ["review2 S7"],
    script: (d, t) => {
      d.watch(1, M, { from: "7" }).closed(1).watch(2, M, { from: "7" }).closed(2);
      t.same([d.verdict(1), d.verdict(2)], ["refuse-resume", "refuse-resume"], "inside the window (a proxy that starts with ranges opens it)");
      d.advance(RING.refuseUnplacedMs).watch(3, M, { from: "7" }).watch(4, M, { from: "7" });
    },
    applied: [],
    verdicts: { 3: "send", 4: "send" },
  },
  {
    name: "I2: before its first non-empty ranges a member refuses every resume it cannot place, even after its wait for ranges ran out",
    was: ["property seed 22426608"],
    start: HELD(400),
    script: (d, t) => {
      d.watch(1, L, { from: "50" }).watch(2, L, { from: "51" }).ranges(1, []).advance(400);
      t.same([d.verdict(1), d.verdict(2)], ["refuse-resume", "refuse-resume"], "both caches of the previous process relist");
    },
    applied: [1],
  },
  {
    name: "I2: a resume from a resourceVersion with no point is refused while a watch of its lineage is being ended (it may be that watch's cache, aborting before its 410)",
    was: ["property seed 3840715"],
    policy: { relistJitterMs: 1000, refuseUnplacedMs: 0 },
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.informer(1, 2, "10", L).ranges(2, FULL);
      t.equal(d.verdict(2), "end-watch", "its 410 waits for its jitter");
      // Another cache of the lineage relists (the lineage's epoch is current) ...
      d.list(3, L).listed(3, "12");
      // ... and watch 2's client, at an event's resourceVersion, aborts and re-watches before the 410 reaches it.
      d.event(2, "11").watch(4, L, { from: "11" });
    },
    applied: [],
    verdicts: { 4: "refuse-resume" },
  },
  {
    name: "I2: a LIST cut short leaves no resume point",
    was: [],
    script: (d) => d.list(1).cut(1).watch(2, L, { from: "10" }),
    applied: [],
    verdicts: { 2: "refuse-resume" },
  },
  {
    name: "I2/I6: a later page is not a snapshot: it records no resume point, moves no epoch and relists nothing",
    was: [],
    script: (d, t) => {
      d.list(1).listed(1, "10").ranges(2, HIGH).list(2, L, { page: true }).listed(2, "11");
      t.equal(d.ledger.lineages.get(L)?.listEpoch, 0, "the lineage's cache is still of the old epoch");
      d.watch(3, L, { from: "11" });
    },
    applied: [],
    verdicts: { 3: "refuse-resume" },
  },
  // ---- I3: narrow only to a subset of a trusted cache -------------------
  {
    name: "I3: a shrink with a trusted index is applied once every watch confirmed its narrowing, with no relist",
    was: ["synthetic-delete: a narrowing reaches the informer as DELETED events (gate on, gate off)", "review C (the ledger's half)"],
    script: (d, t) => {
      d.informer(1, 2, "10").ranges(2, LOW);
      t.notOk(d.verdicts.get(2)?.includes("end-watch"), "the watch stays open");
      t.equal(d.ledger.lineages.get(L)?.listEpoch, 1, "the cache is of the new epoch");
    },
    applied: [2],
    verdicts: { 2: "narrow" },
  },
  {
    name: "I3: with synthetic deletes off a shrink relists",
    was: ["synthetic-delete: with synthetic deletes off, a narrowing relists"],
    policy: { syntheticDeletes: false },
    script: (d, t) => {
      d.informer(1, 2, "10").ranges(2, LOW);
      t.same(d.applied, [], "not applied before the relist");
      d.ended(2).list(3).listed(3, "12").watch(4, L, { from: "12" }).served(4);
    },
    applied: [2],
  },
  {
    name: "I3: a watch that is not between events past its initial events is not narrowed: its lineage relists",
    was: ["review G (the ledger's half)"],
    script: (d, t) => {
      d.informer(1, 2, "10").ranges(2, LOW, { stuck: [2] });
      t.equal(d.verdict(2), "end-watch");
      t.same(d.applied, []);
      d.ended(2).list(3).listed(3, "12").watch(4, L, { from: "12" }).served(4);
    },
    applied: [2],
  },
  {
    name: "I3: an untrusted index (no complete snapshot through this proxy, or an unknown kind) relists",
    was: [],
    script: (d) => d.informer(1, 2, "10").ranges(2, LOW, { untrusted: [L] }),
    applied: [],
    verdicts: { 2: "end-watch" },
  },
  {
    name: "I3: ranges that grow anywhere (a mixed change) relist",
    was: [],
    start: { generation: 1, ranges: LOW },
    script: (d) => d.informer(1, 2, "10").ranges(2, MIDDLE),
    applied: [],
    verdicts: { 2: "end-watch" },
  },
  {
    name: "I3: a lineage narrows only if every one of its open watches does",
    was: [],
    script: (d) => d.informer(1, 2, "10").watch(3, L, { from: "10" }).served(3).ranges(2, LOW, { stuck: [3] }),
    applied: [],
    verdicts: { 2: "end-watch", 3: "end-watch" },
  },
  {
    name: "I3: a lineage with a watch already ending is not narrowed",
    was: [],
    policy: { relistJitterMs: 1000 },
    script: (d, t) => {
      d.informer(1, 2, "10").ranges(2, LOW, { stuck: [2] });
      // A second cache of the lineage relists while 2's 410 waits for its jitter.
      d.list(3).listed(3, "12").watch(4, L, { from: "12" }).served(4).event(4, "13");
      t.same(d.applied, [2], "the new watch relisted the lineage");
      d.ranges(3, QUARTER);
    },
    applied: [2],
    verdicts: { 4: "end-watch" },
  },
  {
    name: "I3: a lineage whose cache was not rebuilt under the ranges being left is not narrowed",
    was: [],
    script: (d) => {
      // Relisted only by a WATCH from "now" (no LIST, no watch-list): its cache's epoch is the older one.
      d.informer(1, 2, "10").ranges(2, LOW, { stuck: [2] }).watch(3).served(3).event(3, "12").ended(2).ranges(3, QUARTER);
    },
    applied: [2],
    verdicts: { 3: "end-watch" },
  },
  {
    name: "I3: a watch-list's cache is of its epoch from its initial-events-end, so it may narrow after it",
    was: ["synthetic-delete: watch-list, a narrowing after the initial events sends DELETEDs"],
    script: (d) => d.watch(1, L, { watchList: true }).served(1).initialEnd(1, "10").ranges(2, LOW),
    applied: [2],
    verdicts: { 1: "narrow" },
  },
  {
    name: "I3: a watch-list still replaying its initial events is not narrowed, whatever the shell reports of its stream",
    was: ["property seed 673115"],
    script: (d) => {
      // Its lineage's cache is current (another cache's LIST), and the stream claims to be between events.
      d.list(1).listed(1, "8").watch(2, L, { watchList: true }).served(2).event(2, "9");
      d.step({ type: "ranges", generation: 2, ranges: LOW, facts: { trusted: new Set([L]), narrowable: new Set([2]) } });
    },
    applied: [],
    verdicts: { 2: "end-watch" },
  },
  // ---- I3, deferred: a cache between its LIST and its WATCH -------------
  {
    name: "I3/I1: a cache between its LIST and its WATCH when the ranges shrink is narrowed on the WATCH that resumes it, with no relist; the generation waits for that narrowing",
    was: ["suite 2892794: a narrowing before client-node's WATCH found nothing open and refused the resume"],
    script: (d, t) => {
      d.list(1).listed(1, "10").ranges(2, LOW);
      t.same(d.applied, [], "not applied while that cache holds the whole keyspace");
      d.watch(2, L, { from: "10" });
      t.equal(d.verdict(2), "send", "the resume is sent, not refused");
      d.served(2);
      t.same(d.verdicts.get(2), ["send", "serve-watch", "narrow"], "served, then narrowed before anything else reaches it");
      t.equal(d.ledger.lineages.get(L)?.listEpoch, 1, "its cache is of the new ranges");
      t.equal(d.ledger.lineages.get(L)?.narrowOnResume, undefined, "and the deferral is spent");
    },
    applied: [2],
  },
  {
    name: "I3: a deferred narrowing carries through later shrinks inside the cache's ranges, and narrows to the newest",
    was: [],
    script: (d, t) => {
      d.list(1).listed(1, "10").ranges(2, LOW).ranges(3, QUARTER).watch(2, L, { from: "10" }).served(2);
      const fx = d.history.flatMap((h) => h.effects).find((x) => x.type === "narrow");
      t.same(fx?.type === "narrow" ? fx.ranges : undefined, QUARTER);
    },
    applied: [3],
  },
  {
    name: "I3: a deferred narrowing is dropped when the ranges grow past what the cache holds: its resume gets 410",
    was: [],
    start: { generation: 1, ranges: LOW },
    script: (d) => d.list(1).listed(1, "10").ranges(2, QUARTER).ranges(3, HIGH).watch(2, L, { from: "10" }),
    applied: [],
    verdicts: { 2: "refuse-resume" },
  },
  {
    name: "I3: no narrowing is deferred for a lineage whose index is not trusted",
    was: [],
    script: (d) => d.list(1).listed(1, "10").ranges(2, LOW, { untrusted: [L] }).watch(2, L, { from: "10" }),
    applied: [],
    verdicts: { 2: "refuse-resume" },
  },
  {
    name: "I3: no narrowing is deferred with synthetic deletes off",
    was: [],
    policy: { syntheticDeletes: false },
    script: (d) => d.list(1).listed(1, "10").ranges(2, LOW).watch(2, L, { from: "10" }),
    applied: [],
    verdicts: { 2: "refuse-resume" },
  },
  {
    name: "I3: no narrowing is deferred while a LIST of the lineage is in flight (its snapshot will sweep the index)",
    was: [],
    script: (d) => d.list(1).listed(1, "10").list(3).ranges(2, LOW).listed(3, "11").watch(2, L, { from: "10" }),
    applied: [],
    verdicts: { 2: "refuse-resume" },
  },
  {
    name: "I3: a deferred narrowing ends when the lineage lists again under newer ranges: that snapshot swept the index of what the older cache holds",
    was: [],
    script: (d, t) => {
      d.list(1).listed(1, "10").ranges(2, LOW).list(3).listed(3, "12");
      t.equal(d.ledger.lineages.get(L)?.narrowOnResume, undefined);
      d.watch(2, L, { from: "10" });
    },
    applied: [],
    verdicts: { 2: "refuse-resume" },
  },
  {
    name: "I3: a deferred narrowing ends when the lineage's index is dropped as idle",
    was: [],
    policy: { idleIndexMs: 1000, pruneEveryMs: 100 },
    script: (d) => d.list(1).listed(1, "10").ranges(2, LOW).advance(2000).list(3, M).watch(2, L, { from: "10" }),
    applied: [],
    verdicts: { 2: "refuse-resume" },
  },
  {
    name: "I3/I1: a resume the stream refuses to narrow ends with 410, and its lineage owes a relist",
    was: [],
    script: (d, t) => {
      d.list(1).listed(1, "10").ranges(2, LOW).watch(2, L, { from: "10" });
      d.refuseNarrow.add(2);
      d.served(2);
      t.same(d.verdicts.get(2), ["send", "serve-watch", "narrow", "end-watch"]);
      t.same(d.applied, [], "not applied: that cache relists");
      d.ended(2).list(3).listed(3, "12").watch(4, L, { from: "12" }).served(4);
    },
    applied: [2],
  },
  {
    name: "I3/I2: a resume sent to be narrowed and answered after the ranges moved again gets 410 in its stream",
    was: [],
    script: (d) => d.list(1).listed(1, "10").ranges(2, LOW).watch(2, L, { from: "10" }).ranges(3, QUARTER).served(2),
    applied: [],
    verdicts: { 2: "expire-watch" },
  },
  {
    name: "I3/I1: a resume narrowed once served whose client goes away before the stream confirms leaves its lineage owing",
    was: [],
    script: (d, t) => {
      // The shell confirms later than it narrows (the driver confirms at once unless told otherwise): end it in between.
      d.list(1).listed(1, "10").ranges(2, LOW).watch(2, L, { from: "10" });
      const r = d.ledger;
      d.ledger = step(r, { type: "watch-response", rid: 2 }, d.now, d.policy).ledger;
      d.ended(2, { byProxy: false });
      t.ok(d.ledger.owed.has(L), "owes a relist");
      t.equal(d.ledger.narrowing.size, 0, "the narrowing is settled as failed");
    },
    applied: [],
  },
  {
    name: "I3/I2: a narrowed cache resumes from the resourceVersion its DELETEDs carried, without a relist",
    was: ["review2 S6"],
    script: (d) => d.informer(1, 2, "10").ranges(2, LOW).ended(2, { byProxy: false }).watch(3, L, { from: "10" }),
    applied: [2],
    verdicts: { 3: "send" },
  },
  {
    name: "I3/I2: the same after several narrowings in place",
    was: ["review3 R3"],
    script: (d) => d.informer(1, 2, "10").ranges(2, LOW).ranges(3, QUARTER).ended(2, { byProxy: false }).watch(3, L, { from: "10" }),
    applied: [2, 3],
    verdicts: { 3: "send" },
  },
  {
    name: "I3/I2: a narrowing records its watch's resume point at once: a re-watch racing the old watch's end is placed",
    was: ["review4 Q2"],
    script: (d) => d.informer(1, 2, "10").ranges(2, LOW).watch(3, L, { from: "10" }),
    applied: [2],
    verdicts: { 3: "send" },
  },
  // ---- I4: who owes at a change ----------------------------------------
  {
    name: "I4: a lineage with a LIST in flight at a change owes a relist, however long the LIST has taken, and that LIST's cache is of the old ranges",
    was: ["review A'"],
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.list(1).advance(RING.betweenListAndWatchMs + 1000).ranges(2, FULL);
      t.same(d.applied, [], "not applied while the LIST of the old ranges is in flight");
      d.listed(1, "10").watch(2, L, { from: "10" });
    },
    applied: [],
    verdicts: { 2: "refuse-resume" },
  },
  {
    name: "I4: a lineage between its LIST and its WATCH owes the relist that follows when its ranges grow",
    was: ["ownership-change: ranges that change between an informer's LIST and its WATCH"],
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.list(1).listed(1, "10").ranges(2, FULL).watch(2, L, { from: "10" });
      t.equal(d.verdict(2), "refuse-resume");
      t.same(d.applied, []);
      d.list(3).listed(3, "12").watch(4, L, { from: "12" }).served(4);
    },
    applied: [2],
  },
  {
    name: "I4: a lineage whose LIST of the ranges being left completed longer than betweenListAndWatchMs before the change owes it (its informer may still be reading that LIST)",
    was: ["suite 26fb38f: the idle sweep's 5 s from an earlier owing"],
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.list(1).listed(1, "10").advance(RING.betweenListAndWatchMs + 1000).ranges(2, HIGH);
      t.same(d.applied, [], "not applied: the cache of LOW has not come back");
      d.watch(2, L, { from: "10" });
      t.equal(d.verdict(2), "refuse-resume");
      d.list(3).listed(3, "12").watch(4, L, { from: "12" }).served(4);
    },
    applied: [2],
  },
  {
    name: "I4: a lineage used within its quiet bound owes at a change even when its cache is older than the ranges left (its LIST was cut: it is relisting)",
    was: ["property seed 205894"],
    start: { generation: 1, ranges: FULL },
    script: (d, t) => {
      d.list(1).ranges(2, MIDDLE).listed(1, "100").advance(105_000);
      t.same(d.applied, [2], "a one-off-looking lineage was let go by its bound");
      // Its cache (of FULL) relists; the LIST is cut, and it will list again.
      d.list(2).cut(2).ranges(3, []);
    },
    applied: [2],
  },
  {
    name: "I4: a WATCH in flight under the previous ranges makes its lineage owe, even next to an open watch that narrows (a re-watch racing the end of the one it replaces)",
    was: ["property seed 261327"],
    policy: { refuseUnplacedMs: 0 },
    script: (d, t) => {
      d.informer(1, 2, "10").event(2, "11").watch(3, L, { from: "11" }).ranges(2, LOW);
      t.equal(d.verdict(2), "narrow", "the abandoned watch narrows");
      t.same(d.applied, [], "but the re-watch will get 410 and relist");
      d.served(3).ended(2, { byProxy: false });
      t.equal(d.verdict(3), "expire-watch");
      d.list(4).listed(4, "12").watch(5, L, { from: "12" }).served(5);
    },
    applied: [2],
  },
  {
    name: "I4: a lineage whose open watches are all being ended (their 410s waiting for the jitter) owes at a change as if nothing were open",
    was: ["property seed 26188133"],
    policy: { relistJitterMs: 60_000 },
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.informer(1, 2, "10").ranges(2, FULL).list(3).listed(3, "12").watch(4, L, { from: "12" }).served(4);
      t.same(d.applied, [2], "relisted, while watch 2's 410 still waits");
      d.ended(4, { byProxy: false }).ranges(3, LOW);
      t.same(d.applied, [2], "watch 2 is ending, not deciding: the cache between its watches owes");
      d.list(5).listed(5, "13").watch(6, L, { from: "13" }).served(6);
    },
    applied: [2, 3],
  },
  {
    name: "I4: a lineage one of whose caches was told to relist owes at a change until it has, even next to an open watch that narrows",
    was: ["property seeds 1076984, 1924317"],
    start: { generation: 1, ranges: FULL },
    script: (d, t) => {
      // Cache Y lists under FULL; the ranges shrink (Y owes); cache X relists and watches under LOW.
      d.list(1).listed(1, "9").ranges(2, LOW).list(3).listed(3, "10").watch(4, L, { from: "10" }).served(4);
      t.same(d.applied, [2]);
      // Y resumes from its FULL list: refused, it relists.
      d.watch(5, L, { from: "9" });
      t.equal(d.verdict(5), "refuse-resume");
      d.ranges(3, QUARTER);
      t.equal(d.verdict(4), "narrow", "X narrows in place");
      t.same(d.applied, [2], "but generation 3 waits for Y's relist");
      d.list(6).listed(6, "11").watch(7, L, { from: "11" }).served(7);
    },
    applied: [2, 3],
  },
  {
    name: "I4: a lineage let go as quiet that comes back before the generation is reported owes again",
    was: ["property seed 261327 (after the release)"],
    policy: { watcherQuietMs: 1000 },
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.informer(1, 2, "10", L).informer(3, 4, "10", M).ranges(2, FULL).ended(2).ended(4);
      d.list(5, M).advance(1000);
      t.same(d.applied, [], "M is still listing");
      t.ok(d.ledger.released.has(L), "L was let go");
      d.watch(6, L, { watchList: true }).served(6).listed(5, "12").watch(7, M, { from: "12" }).served(7);
      t.same(d.applied, [], "L came back and relists: the generation waits for it again");
      d.initialEnd(6, "13");
    },
    applied: [2],
  },
  {
    name: "I4: relists are owed per lineage: one lineage relisting does not clear another",
    was: ["review H"],
    start: { generation: 1, ranges: LOW },
    script: (d) => d.informer(1, 2, "10", L).informer(3, 4, "10", M).ranges(2, FULL).ended(2).ended(4).list(5, M).listed(5, "12").watch(6, M, { from: "12" }).served(6),
    applied: [],
  },
  {
    name: "I4: a held request released into the first ranges makes its lineage owe, and its completed LIST is that relist for every generation of the epoch",
    was: ["review D"],
    start: HELD(400),
    script: (d, t) => {
      d.list(1).ranges(1, LOW);
      t.equal(d.verdict(1), "send", "released by the first non-empty ranges");
      d.ranges(2, LOW).listed(1, "10");
    },
    applied: [2],
  },
  {
    name: "I4: requests are held for the first non-empty ranges, not an empty first table; that generation is applied once the held LIST is through",
    was: ["ownership-change: a member without ranges yet holds sharded requests until its first non-empty ranges"],
    start: HELD(20_000),
    script: (d, t) => {
      d.list(1).ranges(1, []);
      t.equal(d.verdict(1), "hold", "still held under an empty first table");
      d.ranges(2, LOW);
      t.equal(d.verdict(1), "send");
      t.same(d.applied, [1], "generation 2 waits for the held LIST");
      d.listed(1, "10");
    },
    applied: [1, 2],
  },
  {
    name: "I4: held requests are served for an empty shard when the wait runs out, and owe nothing",
    was: ["ownership-change: held requests are served (for an empty shard) when the wait runs out"],
    start: HELD(400),
    script: (d, t) => {
      d.list(1).advance(399);
      t.equal(d.verdict(1), "hold", "not before the wait is over");
      d.advance(1);
      const sent = d.history.flatMap((h) => h.effects).find((fx) => fx.type === "send");
      t.same(sent?.type === "send" ? sent.ranges : "none", [], "owning nothing, it lists nothing");
      t.equal(d.ledger.owed.size, 0);
      t.equal(d.history.find((h) => h.effects.some((fx) => fx.type === "send"))?.now, T0 + 400, "at the bound exactly");
    },
    applied: [],
    verdicts: { 1: "send" },
  },
  {
    name: "I4: a held request whose client left, or that the proxy answers itself, owes nothing",
    was: [],
    start: HELD(20_000),
    script: (d) => d.list(1).list(2, M, { answerable: false }).closed(1).ranges(1, LOW),
    applied: [1],
    verdicts: { 2: "reject" },
  },
  // ---- I5: quiet bounds ------------------------------------------------
  {
    name: "I5: an owed lineage whose client went quiet is let go after its bound, and holds no later generation",
    was: ["review2 S1"],
    policy: { betweenListAndWatchMs: 200, watcherQuietMs: 400 },
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.informer(1, 2, "10", L).informer(3, 4, "10", M).ranges(2, FULL).ended(2).ended(4);
      d.list(5, L).listed(5, "12").watch(6, L, { from: "12" }).served(6);
      t.same(d.applied, [], "M (a kubectl get -w that exited on its 410) is still owed");
      d.advance(400);
      t.same(d.applied, [2], "released once quiet for its bound");
      d.ranges(3, LOW);
    },
    applied: [2, 3],
  },
  {
    name: "I5: an owed lineage is never released while a request of it is in flight",
    was: ["review2 S5"],
    policy: { betweenListAndWatchMs: 200 },
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.list(1).ranges(2, FULL).advance(600);
      t.equal(d.ledger.wakeAt, undefined, "nothing is due while the LIST runs");
    },
    applied: [],
  },
  {
    name: "I5: a watch-list relists at its initial-events-end, and time passing while it is open releases nothing",
    was: ["review2 S4"],
    policy: { betweenListAndWatchMs: 100 },
    start: HELD(800),
    script: (d, t) => {
      d.watch(1, L, { watchList: true }).ranges(1, LOW).served(1).initialEnd(1, "10");
      t.same(d.applied, [1], "applied at initial-events-end");
      d.ranges(2, FULL).ended(1).watch(2, L, { watchList: true }).served(2).advance(1000);
      t.same(d.applied, [1], "generation 2 waits for the new watch-list's initial events");
      d.initialEnd(2, "12");
    },
    applied: [1, 2],
  },
  {
    name: "I5: a reflector's lineage (it has watched) is held for watcherQuietMs of quiet, longer than its post-410 backoff",
    was: ["review3 R1"],
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.informer(1, 2, "10").ranges(2, FULL).ended(2).advance(7000);
      t.same(d.applied, [], "client-go's backoff (6.4-12.8 s on a 4th 410) is not taken for a client that left");
      d.list(3).listed(3, "12").watch(4, L, { from: "12" }).served(4);
    },
    applied: [2],
  },
  {
    name: "I5/I8: a quiet reflector is released exactly watcherQuietMs after its last request, by the wake the ledger asked for",
    was: ["review3 R1 (the bound itself)"],
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.informer(1, 2, "10").ranges(2, FULL).ended(2);
      t.equal(d.ledger.wakeAt, T0 + RING.watcherQuietMs, "a wake at the bound");
      d.advance(RING.watcherQuietMs - 1);
      t.same(d.applied, [], "not a millisecond before");
      d.advance(1);
    },
    applied: [2],
  },
  {
    name: "I5: a cache between its re-LIST and its re-WATCH owes the next change too, past betweenListAndWatchMs",
    was: ["review3 R2"],
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.informer(1, 2, "10").ranges(2, FULL).ended(2).list(3).listed(3, "12");
      t.same(d.applied, [], "the re-LIST alone does not apply generation 2: its WATCH must follow");
      d.advance(500).ranges(3, LOW).advance(6000);
      t.same(d.applied, [], "generation 3 waits: the cache is of FULL and has not watched again");
      d.watch(4, L, { from: "12" });
    },
    applied: [],
    verdicts: { 4: "refuse-resume" },
  },
  {
    name: "I5: a lineage that tried to WATCH is a reflector's: the long bound applies even when its first WATCH was refused",
    was: ["review4 Q1"],
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.list(1).ranges(2, FULL).advance(4500).listed(1, "10").watch(2, L, { from: "10" });
      t.equal(d.verdict(2), "refuse-resume", "its cache is of LOW");
      d.advance(2000);
      t.same(d.applied, [], "not released during the reflector's post-410 backoff");
      d.list(3).listed(3, "12").watch(4, L, { from: "12" }).served(4);
    },
    applied: [2],
  },
  {
    name: "I5: a one-off LIST of the ranges being left (no watch follows) holds a generation back for watcherQuietMs, as an informer still reading it would, and no longer",
    was: ["ownership-change: a one-off LIST holds a generation back only for a bounded time", "suite 26fb38f: a never-watched lineage let go 5 s after it became owed"],
    policy: { betweenListAndWatchMs: 400 },
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.list(1).listed(1, "10").ranges(2, HIGH).advance(RING.watcherQuietMs - 1);
      t.same(d.applied, [], "held back: it might be an informer still reading its list, about to resume from it");
      d.advance(1);
    },
    applied: [2],
  },
  {
    name: "I5: a lineage that never watched and lists again under the new ranges is let go betweenListAndWatchMs after it became owed (its cache is current)",
    was: [],
    policy: { betweenListAndWatchMs: 400 },
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.list(1).listed(1, "10").ranges(2, HIGH).advance(100).list(2).listed(2, "12").advance(299);
      t.same(d.applied, [], "its WATCH may follow");
      d.advance(1);
    },
    applied: [2],
  },
  // ---- I6: epochs only grow ---------------------------------------------
  {
    name: "I6: a lineage's epoch never goes back: a LIST sent before a narrowing and answered after it leaves the narrowed cache current",
    was: ["review2 S8"],
    // Outside the restart window, where a resume from an event's resourceVersion falls back to the lineage's epoch.
    policy: { refuseUnplacedMs: 0 },
    script: (d, t) => {
      d.informer(1, 2, "10").list(3).ranges(2, LOW);
      t.same(d.applied, [], "narrowed in place, but not applied while LIST 3, of the old ranges, is in flight");
      d.event(2, "11").listed(3, "10");
      t.equal(d.ledger.lineages.get(L)?.listEpoch, 1, "still the narrowed epoch");
      t.same(d.applied, [], "nor once it landed: its cache may hold the old ranges until the lineage rewatches");
      d.watch(4, L, { from: "11" }).served(4);
    },
    applied: [2],
    verdicts: { 4: "serve-watch" },
  },
  // ---- lineage table -----------------------------------------------------
  {
    name: "lineages: a new lineage is never the one evicted; with every remembered lineage busy the table grows rather than lose a LIST's point",
    was: ["review2 S9"],
    policy: { maxLineages: 2 },
    script: (d, t) => {
      d.informer(1, 2, "10", "A").informer(3, 4, "10", "B").list(5, "C").listed(5, "20").watch(6, "C", { from: "20" });
      t.equal(d.ledger.lineages.size, 3);
    },
    applied: [],
    verdicts: { 6: "send" },
  },
  {
    name: "lineages: when the table is full the least recently used idle lineage goes, with its index",
    was: [],
    policy: { maxLineages: 2 },
    script: (d, t) => {
      d.list(1, "A").listed(1, "10").advance(1).list(2, "B").listed(2, "10").advance(1).list(3, "C");
      t.ok(d.history.at(-1)?.effects.some((fx) => fx.type === "drop-index" && fx.lineage === "A"), "A's index dropped");
      t.same([...d.ledger.lineages.keys()].sort(), ["B", "C"]);
    },
    applied: [],
  },
  {
    name: "lineages: an idle lineage's index is dropped after idleIndexMs; a busy one never",
    was: ["delivered: idle indexes are dropped"],
    policy: { idleIndexMs: 1000, pruneEveryMs: 100 },
    script: (d, t) => {
      d.list(1, "A").listed(1, "10").informer(2, 3, "10", "B").advance(2000).list(4, "C");
      const dropped = d.history.flatMap((h) => h.effects).flatMap((fx) => (fx.type === "drop-index" ? [fx.lineage] : []));
      t.same(dropped, ["A"], "only the idle one");
    },
    applied: [],
  },
  // ---- jitter, shutdown ------------------------------------------------
  {
    name: "jitter: ended watches' 410s are spread within the jitter window, and the generation waits for every one",
    was: [],
    policy: { relistJitterMs: 1000 },
    start: { generation: 1, ranges: LOW },
    script: (d, t) => {
      d.informer(1, 2, "10", "A").informer(3, 4, "10", "B").informer(5, 6, "10", "C").ranges(2, FULL);
      const delays = d.history.at(-1)?.effects.flatMap((fx) => (fx.type === "end-watch" ? [fx.delayMs] : [])) ?? [];
      t.equal(delays.length, 3);
      t.ok(delays.every((x) => x >= 0 && x < 1000), `within the window: ${JSON.stringify(delays)}`);
      t.ok(new Set(delays).size > 1, "spread, not all at once");
    },
    applied: [],
  },
  {
    name: "shutdown: every open watch ends, held requests are served, and nothing more is reported",
    was: [],
    start: HELD(20_000),
    script: (d, t) => {
      d.list(1).step({ type: "shutdown" });
      t.equal(d.verdict(1), "send", "the held LIST is served");
      t.equal(d.ledger.wakeAt, undefined, "no wake left");
    },
    applied: [],
  },
];

for (const row of ROWS) {
  t.test(row.name, async (t) => {
    const d = new Drive({ ...RING, ...row.policy }, row.start);
    row.script(d, t);
    t.same(d.applied, row.applied, "generations reported applied");
    for (const [rid, v] of Object.entries(row.verdicts ?? {})) t.equal(d.verdict(Number(rid)), v, `request ${rid}: ${v}`);
  });
}

// Not the ledger's to fix: it cannot tell a client that aborted before
// reading the DELETEDs from one that read them and re-watched at once (both
// resume from the resourceVersion the DELETEDs carried; I2 "a narrowing
// records its watch's resume point at once"). The proxy's shell sends them
// again on such a resume (object-index.ts, `leftSince`); review4 Q4 tests it
// end to end.

t.test("the table's rows each name the old cases they carry, and no old case is carried twice by accident", async (t) => {
  const was = ROWS.flatMap((r) => r.was);
  t.equal(new Set(was).size, was.length, "each old case is carried by one row");
});

t.test("the handoff view says, per owed lineage, what of it is open and when its quiet bound lets it go", async (t) => {
  const d = new Drive(RING, { generation: 1, ranges: LOW });
  d.informer(1, 2, "10").ranges(2, FULL).ended(2).advance(1000);
  t.same(describeOwed(d.ledger, d.now, d.policy), [
    { lineage: L, owedMs: 1000, open: 0, ending: 0, inFlight: 0, idleMs: 1000, watched: true, told: true, listEpoch: 0, releaseInMs: RING.watcherQuietMs - 1000 },
  ]);
  d.list(3);
  t.equal(describeOwed(d.ledger, d.now, d.policy)[0]?.releaseInMs, undefined, "not while its LIST is in flight");
  t.equal(describeOwed(d.ledger, d.now, d.policy)[0]?.inFlight, 1);
});
