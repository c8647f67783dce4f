/**
 * A rolling update (design.md, "Many members at once"): a Deployment with
 * maxSurge and maxUnavailable of 25% starts a quarter of new members, then
 * stops a quarter of the old ones (their preStop hook makes them step aside
 * first), four times over. One table per wave gives the leavers' slots to
 * the newcomers, so only the newcomers relist, once each: about one
 * keyspace over the whole rollout, what one unsharded replica's start
 * costs. Two tables per wave (the joiners planned before the leavers step
 * aside) make every continuing member gain, and relist, in every wave.
 */
import t from "tap";
import { relistCost, type HandoffPolicy } from "../../src/ring/handoff.ts";
import { MemberState } from "../../src/ring/state.ts";
import { HandoffMode } from "../../src/ring/table.ts";
import { Cluster, POLICY } from "./step-cluster.ts";
import { gainersOf } from "./table-diff.ts";

const CHANGE_QUIET = 3_000;
const CHANGE_MAX = 10_000;
const ROLLING: HandoffPolicy = { ...POLICY, settleQuietMs: 0, changeQuietMs: CHANGE_QUIET, changeMaxMs: CHANGE_MAX };

const name = (prefix: string, i: number): string => `${prefix}-${String(i).padStart(3, "0")}`;

/** Members that stepped aside leave (their Lease released) once no table lists them any more. */
function exitDrained(c: Cluster): void {
  const listed = new Set([...c.state.committed.owners, ...(c.state.pending?.owners ?? [])]);
  for (const [n, m] of c.pool) if (m.state === MemberState.Leaving && !listed.has(n)) c.pool.delete(n);
}

/** Steps `ms`, letting drained leavers go after every step. */
function run(c: Cluster, ms: number, tickMs = 100): void {
  for (const end = c.now + ms; c.now < end; c.now += tickMs) {
    c.step();
    exitDrained(c);
  }
}

/** A stable ring of `n` old members, its published tables cleared. */
function stableRing(n: number, policy: HandoffPolicy = ROLLING): Cluster {
  const c = new Cluster(256, HandoffMode.Overlap, policy);
  for (let i = 0; i < n; i++) c.pool.set(name("old", i), { state: MemberState.Ready, applied: 0 });
  run(c, 2_000);
  if (!c.stable()) throw new Error("premise: the old members settled");
  c.published.length = 0;
  c.publishedAt.length = 0;
  return c;
}

interface Rollout {
  readonly c: Cluster;
  /** The keyspace every table of the rollout had its gainers relist. */
  readonly cost: number;
  /** Members that gained in some table of the rollout. */
  readonly gainers: ReadonlySet<string>;
}

/** M old members, rolled `wave` at a time: joiners, then `leaveAfterMs` later the same count of old ones step aside. */
function rollout(members: number, wave: number, leaveAfterMs: number, policy: HandoffPolicy): Rollout {
  const c = stableRing(members, policy);
  for (let w = 0; w * wave < members; w++) {
    for (let i = w * wave; i < Math.min(members, (w + 1) * wave); i++) c.pool.set(name("new", i), { state: MemberState.Ready, applied: 0 });
    run(c, leaveAfterMs);
    for (let i = w * wave; i < Math.min(members, (w + 1) * wave); i++) {
      const m = c.pool.get(name("old", i));
      if (m !== undefined) m.state = MemberState.Leaving;
    }
    run(c, 30_000);
  }
  run(c, 30_000);
  const cost = c.published.reduce((n, p) => n + relistCost(p.from, p.to), 0);
  const gainers = new Set(c.published.flatMap((p) => gainersOf(p.from, p.to)));
  return { c, cost, gainers };
}

t.test("a rolling update's leavers, stepping aside within the quiet window after its joiners, go in one table: only newcomers relist, about one keyspace in all", async (t) => {
  const r = rollout(16, 4, 1_000, ROLLING);
  t.ok(r.c.stable(), "the new members hold every slot");
  t.ok([...r.c.pool.keys()].every((n) => n.startsWith("new-")), "and only they are left");
  t.same([...r.gainers].filter((n) => n.startsWith("old-")), [], "no continuing old member gained (nor relisted) in any wave");
  t.equal(r.c.published.length, 4, "one table per wave");
  t.ok(r.cost <= 1.05, `the rollout relisted ${r.cost.toFixed(3)} keyspaces: one share per newcomer`);
});

t.test("without the window, each wave's joiners and leavers are two tables, and every continuing member relists in every wave", async (t) => {
  // The premise the window exists for: the same rollout, planned at once.
  const r = rollout(16, 4, 1_000, { ...ROLLING, changeQuietMs: 0 });
  t.ok(r.c.stable(), "it still ends balanced");
  t.ok([...r.gainers].some((n) => n.startsWith("old-")), "old members gained");
  t.ok(r.cost > 2, `and the rollout relisted ${r.cost.toFixed(3)} keyspaces, more than twice a start`);
});

t.test("a change is planned once no member joined or began leaving for the quiet window, and no later than the bound after the first", async (t) => {
  const c = stableRing(4);
  const joinedAt = c.now;
  c.pool.set("new-a", { state: MemberState.Ready, applied: 0 });
  run(c, CHANGE_QUIET - 200);
  t.equal(c.published.length, 0, "nothing before the window has passed");
  run(c, 400);
  t.equal(c.published.length, 1, "the join is planned once it has");
  t.ok((c.publishedAt[0] ?? 0) - joinedAt >= CHANGE_QUIET, "not before");

  // Members that keep arriving cannot hold a change back past the bound.
  const d = stableRing(4);
  const first = d.now;
  for (let i = 0; i < 10; i++) {
    d.pool.set(name("new", i), { state: MemberState.Ready, applied: 0 });
    run(d, CHANGE_QUIET / 2);
  }
  t.ok(d.published.length > 0, "a table came while members still arrived");
  t.ok((d.publishedAt[0] ?? Infinity) - first <= CHANGE_MAX + 100, "no later than the bound after the first change");
});

t.test("a holder that stopped serving is not waited for: its slots move at once, whatever joined", async (t) => {
  const c = stableRing(4);
  c.pool.set("new-a", { state: MemberState.Ready, applied: 0 });
  run(c, 500);
  const gone = c.pool.get(name("old", 0));
  if (gone !== undefined) gone.state = MemberState.Gone;
  run(c, 200);
  t.ok(c.published.length >= 1, "planned within a step of the loss, inside the join's window");
  t.notOk(c.published.some((p) => p.to.includes(name("old", 0))), "with nothing left to the member that is gone");
});

t.test("property: rollouts of any size, leavers stepping aside within the window, relist about one keyspace and never have a continuing member relist", async (t) => {
  let seed = 52;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  for (let k = 0; k < 12; k++) {
    const members = 4 + Math.floor(rnd() * 29);
    const wave = Math.max(1, Math.round(members / 4));
    const leaveAfter = 100 * Math.floor((rnd() * (CHANGE_QUIET - 500)) / 100);
    const r = rollout(members, wave, leaveAfter, ROLLING);
    const label = `${members} members, ${wave} a wave, leavers ${leaveAfter} ms after joiners`;
    t.ok(r.c.stable(), `${label}: balanced at the end`);
    t.same([...r.gainers].filter((n) => n.startsWith("old-")), [], `${label}: no continuing old member relisted`);
    t.ok(r.cost <= 1.1, `${label}: ${r.cost.toFixed(3)} keyspaces relisted`);
  }
});
