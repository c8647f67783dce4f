/**
 * Many members at once (design.md, "Many members at once"): a Deployment's
 * M replicas start together, and the ring must cost about what one
 * unsharded replica's start costs. The leader's rules for that are pure
 * (src/ring/handoff.ts): a fresh ring's first table waits for membership to
 * settle (bounded), and the relist budget counts keyspace, not gainers.
 * These tests drive `step` the way the coordinator does, members arriving in
 * batches, and check what each member is asked to list.
 */
import t from "tap";
import { nextWakeMs, Phase, relistCost, step } from "../../src/ring/handoff.ts";
import { MemberState } from "../../src/ring/state.ts";
import { HandoffMode } from "../../src/ring/table.ts";
import { slotsOf } from "../../src/shard/table.ts";
import { gainersOf } from "./table-diff.ts";
import { Cluster, MAX, POLICY, QUIET, T0 } from "./step-cluster.ts";

t.test("a fresh ring's first table waits until no member joined for the quiet window, then gives every member its share at once", async (t) => {
  const c = new Cluster(256, HandoffMode.Overlap);
  c.pool.set("a", { state: MemberState.Ready, applied: 0 });
  c.step();
  t.equal(c.state.phase, Phase.Settling, "the first member alone does not get the keyspace");
  t.equal(nextWakeMs(c.state, c.now), QUIET, "the leader looks again when the quiet window ends");
  c.now += 2_000;
  c.pool.set("b", { state: MemberState.Ready, applied: 0 });
  c.step();
  t.equal(c.published.length, 0, "a join restarts the quiet window");
  t.equal(nextWakeMs(c.state, c.now), QUIET);
  c.now += QUIET;
  c.step();
  t.equal(c.published.length, 1, "one table once the window passed quietly");
  t.same(gainersOf(c.published[0]?.from ?? [], c.published[0]?.to ?? []), ["a", "b"]);
  c.now += 100;
  c.step();
  t.same([slotsOf(c.state.committed.owners, "a").length, slotsOf(c.state.committed.owners, "b").length], [128, 128], "committed once both reported: half the keyspace each");
});

t.test("a fresh ring whose members keep arriving gets its first table at the bound, counted from the first member", async (t) => {
  const c = new Cluster(256, HandoffMode.Overlap);
  for (let i = 0; c.published.length === 0 && i < 100; i++) {
    c.pool.set(`m${i}`, { state: MemberState.Ready, applied: 0 });
    c.run(1_000);
  }
  t.equal(c.published.length, 1);
  t.equal((c.publishedAt[0] ?? 0) - T0, MAX, "the first table is out at the bound, though members still arrive every second");
});

t.test("a rebuilt status does not wait: members that acknowledged a generation hold slots the table must follow at once", async (t) => {
  const c = new Cluster(16, HandoffMode.Overlap);
  c.pool.set("a", { state: MemberState.Ready, applied: 7 });
  c.pool.set("b", { state: MemberState.Ready, applied: 7 });
  c.step();
  t.equal(c.published.length, 1);
  t.not(c.state.phase, Phase.Settling);
});

t.test("the relist budget counts keyspace: a wave of joiners into a large ring moves in one handoff, a leave from a small one in several", async (t) => {
  // 64 members of 4 slots; 16 join (a rolling update's surge): each joiner
  // relists one share of 1/80, 0.2 keyspaces in all, within the default 1.
  const big = new Cluster(256, HandoffMode.Overlap, { ...POLICY, settleQuietMs: 0 });
  for (let i = 0; i < 64; i++) big.pool.set(`old-${String(i).padStart(2, "0")}`, { state: MemberState.Ready, applied: 0 });
  big.run(1_000);
  t.ok(big.stable(), "64 members settled");
  big.published.length = 0;
  for (let i = 0; i < 16; i++) big.pool.set(`new-${String(i).padStart(2, "0")}`, { state: MemberState.Ready, applied: 0 });
  big.run(1_000);
  t.ok(big.stable(), "80 members settled");
  t.equal(big.published.length, 1, "one handoff for the whole wave");
  t.equal(gainersOf(big.published[0]?.from ?? [], big.published[0]?.to ?? []).length, 16);
  t.ok(relistCost(big.published[0]?.from ?? [], big.published[0]?.to ?? []) <= 0.25, "the wave relists about a fifth of the keyspace");

  // A budget of a quarter keyspace over four members of 64 slots: a leave
  // gives each survivor about a third, so one gainer per handoff.
  const small = new Cluster(256, HandoffMode.Overlap, { ...POLICY, settleQuietMs: 0, relistBudget: 0.4 });
  for (const n of ["a", "b", "c", "d"]) small.pool.set(n, { state: MemberState.Ready, applied: 0 });
  small.run(1_000);
  small.published.length = 0;
  const d = small.pool.get("d");
  if (d !== undefined) d.state = MemberState.Leaving;
  small.run(2_000);
  t.equal(small.published.length, 3, "three handoffs");
  t.ok(
    small.published.every((p) => gainersOf(p.from, p.to).length === 1 && relistCost(p.from, p.to) <= 0.4),
    "each within 0.4 keyspaces",
  );
});

t.test("property: M members started in batches within the settle bound each list once, their own share, and the ring lists about one keyspace in all", async (t) => {
  let seed = 32;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  for (let run = 0; run < 40; run++) {
    const members = 8 + Math.floor(rnd() * 57);
    const slotCount = rnd() < 0.5 ? 256 : 1024;
    const mode = rnd() < 0.5 ? HandoffMode.Overlap : HandoffMode.Exclusive;
    const label = `run ${run} (${members} members, ${slotCount} slots, ${mode})`;
    const c = new Cluster(slotCount, mode);
    // Batches a Deployment's rollout could produce: a few pods at a time,
    // each batch under the quiet window after the one before, all of them
    // within the settle bound.
    let started = 0;
    while (started < members) {
      const batch = Math.min(members - started, 1 + Math.floor(rnd() * 8));
      for (let i = 0; i < batch; i++) c.pool.set(`m-${String(started + i).padStart(3, "0")}`, { state: MemberState.Ready, applied: 0 });
      started += batch;
      const gap = Math.floor(rnd() * (QUIET - 200));
      if (started < members && c.now - T0 + gap > MAX - QUIET) break;
      c.run(Math.max(100, gap));
    }
    c.run(QUIET + 2_000);
    t.ok(c.stable(), `${label}: settled`);
    const present = c.pool.size;
    const share = Math.ceil(slotCount / present);
    const gains = new Map<string, number>();
    for (const p of c.published) for (const g of gainersOf(p.from, p.to)) gains.set(g, (gains.get(g) ?? 0) + 1);
    t.ok(
      [...c.pool.keys()].every((n) => gains.get(n) === 1),
      `${label}: every member gained (and so listed) exactly once`,
    );
    const peak = Math.max(...c.peak.values());
    t.ok(peak <= 2 * share, `${label}: no member was asked for more than twice its final share (${peak} slots, share ${share})`);
    const listed = c.published.reduce((n, p) => n + relistCost(p.from, p.to), 0);
    t.ok(listed <= 1.25, `${label}: ${listed.toFixed(3)} keyspaces listed in all (≤ 1.25)`);
  }
});

t.test("property: members that keep joining after the first table each still list once, and nobody holds more than it is given", async (t) => {
  let seed = 5;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  for (let run = 0; run < 20; run++) {
    const c = new Cluster(256, rnd() < 0.5 ? HandoffMode.Overlap : HandoffMode.Exclusive);
    const total = 8 + Math.floor(rnd() * 40);
    for (let i = 0; i < total; i++) {
      c.pool.set(`m-${String(i).padStart(3, "0")}`, { state: MemberState.Ready, applied: 0 });
      c.run(100 + Math.floor(rnd() * 2 * QUIET));
    }
    c.run(QUIET + 5_000);
    t.ok(c.stable(), `run ${run}: settled`);
    const gains = new Map<string, number>();
    for (const p of c.published) for (const g of gainersOf(p.from, p.to)) gains.set(g, (gains.get(g) ?? 0) + 1);
    t.ok(
      [...c.pool.keys()].every((n) => gains.get(n) === 1),
      `run ${run}: a join takes slots from the others, who only narrow: every member listed once (${[...gains.values()].join(",")})`,
    );
  }
});

t.test("a cold start's first table is not thrown away for a member that is slow to renew: replanning it would move every member's slots", async (t) => {
  const c = new Cluster(256, HandoffMode.Overlap);
  for (const n of ["a", "b", "c", "d"]) c.pool.set(n, { state: MemberState.Ready, applied: 0 });
  while (c.published.length === 0 && c.now < T0 + MAX) {
    c.now += 100;
    c.step();
  }
  t.equal(c.published.length, 1, "the first table is out");
  // d's renewals are late (a starved node): its Lease reads expired, not
  // dead, and it has not reported the table yet.
  const d = c.pool.get("d");
  if (d !== undefined) Object.assign(d, { state: MemberState.Expired, applied: 0 });
  const before = c.state.pending?.generation;
  t.ok(before !== undefined, "the first table is pending");
  const res = step(c.state, { type: "observe", members: c.observations() }, c.now, c.mode);
  t.notOk(
    res.effects.some((e) => e.type === "abandon"),
    "nothing abandoned",
  );
  t.equal(res.state.pending?.generation, before, "the same table stays pending for d to catch up");
});

t.test("a member lost during a cold start moves only its own slots: the others keep the share they already listed", async (t) => {
  for (const mode of [HandoffMode.Overlap, HandoffMode.Exclusive]) {
    const c = new Cluster(256, mode);
    const names = Array.from({ length: 16 }, (_, i) => `m-${String(i).padStart(2, "0")}`);
    for (const n of names) c.pool.set(n, { state: MemberState.Ready, applied: 0 });
    // The first table is out, and one of its members dies before the table
    // is committed (the Cluster's members report at once, so it dies in the
    // same tick as the publish).
    while (c.published.length === 0 && c.now < T0 + MAX) c.run(100);
    const first = c.published[0];
    t.ok(first !== undefined && slotsOf(first.to, "m-07").length > 0, `${mode}: a first table gives the member slots`);
    const lost = c.pool.get("m-07");
    if (lost !== undefined) lost.state = MemberState.Dead;
    c.run(1_000);
    // Overlap waits for every gainer's list before it commits; exclusive
    // commits a first table at once (no loser to narrow), and the lost
    // member is then a crash of a committed owner.
    if (mode === HandoffMode.Overlap) t.equal(c.state.committed.owners.some((o) => o !== undefined), false, `${mode}: that table was not committed`);
    const f = step(c.state, { type: "fenced", member: "m-07" }, c.now, mode);
    c.state = f.state;
    if (lost !== undefined) lost.state = MemberState.Fenced;
    c.run(2_000);
    t.ok(c.stable(), `${mode}: settled without the lost member`);
    const final = c.state.committed.owners;
    const before = first?.to ?? [];
    const moved = names.filter((n) => n !== "m-07" && slotsOf(before, n).some((s) => final[s] !== n));
    t.same(moved, [], `${mode}: no surviving member lost a slot it was given in the first table`);
    const gained = names.filter((n) => n !== "m-07" && slotsOf(final, n).length > slotsOf(before, n).length);
    t.ok(gained.length <= slotsOf(before, "m-07").length, `${mode}: only ${gained.length} members take the lost member's ${slotsOf(before, "m-07").length} slots`);
  }
});
