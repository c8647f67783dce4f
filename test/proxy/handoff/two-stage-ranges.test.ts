/**
 * src/proxy/handoff/two-stage-ranges.ts, the order in which parents (owners) and their
 * owner-keyed children (dependents) move: random runs of range changes and
 * of the two groups reporting their relists, in any order and at any delay.
 *
 * The model of a group's cache: until the group reports its newest view
 * applied, the cache may be at any view published since the last one it
 * applied (a relist in flight). Co-location holds when, at every moment,
 * every owners' range set the cache may be at lies inside every dependents'
 * range set it may be at (a cached parent's children are cached).
 */
import t from "tap";
import { difference, equal, normalize, shardRange, type Range } from "../../../src/shard/range.ts";
import type { Ownership } from "../../../src/shard/ownership.ts";
import { initialStaging, step, STAGE_GROUPS, type StageGroup, type StagingEffect, type StagingEvent, type StagingState } from "../../../src/proxy/handoff/two-stage-ranges.ts";
import { rng } from "../../support/rng.ts";

const SLOTS = 8;
const slots = (set: readonly number[]): Range[] => normalize(set.map((s) => shardRange(s, SLOTS)));
const randomSlots = (random: () => number): Range[] => slots([...Array(SLOTS).keys()].filter(() => random() < 0.5));
const inside = (a: readonly Range[], b: readonly Range[]): boolean => difference(a, b).length === 0;

class Run {
  state: StagingState;
  /** Per group: views published since its last applied one, oldest first (the cache is at one of them). */
  readonly possible: Record<StageGroup, Ownership[]>;
  readonly reported: number[] = [];
  readonly violations: string[] = [];
  constructor(initial: Ownership) {
    this.state = initialStaging(initial);
    this.possible = { owners: [initial], dependents: [initial] };
  }
  send(e: StagingEvent): StagingEffect[] {
    const before = this.state;
    const { state, effects } = step(this.state, e);
    this.state = state;
    // The group's cache is now exactly the view it reported.
    if (e.type === "applied" && e.generation === before.views[e.group].generation && !before.applied[e.group]) this.possible[e.group] = [before.views[e.group]];
    for (const fx of effects) {
      if (fx.type === "applied") {
        this.reported.push(fx.generation);
        const t = before.target.generation === fx.generation ? state.target : undefined;
        for (const g of STAGE_GROUPS) {
          if (this.possible[g].length !== 1 || t === undefined || !equal(this.possible[g][0]?.ranges ?? [], t.ranges)) this.violations.push(`applied(${fx.generation}) reported while ${g} may still be at ${this.possible[g].length} views`);
        }
      } else this.possible[fx.group].push(fx.ownership);
    }
    for (const o of this.possible.owners) for (const d of this.possible.dependents) if (!inside(o.ranges, d.ranges)) this.violations.push(`after ${JSON.stringify(e.type === "target" ? { target: e.ownership.generation } : e)}: owners may cache ranges outside the dependents'`);
    return effects;
  }
  /** The group's relist for its newest view completes. */
  apply(group: StageGroup): void {
    this.send({ type: "applied", group, generation: this.state.views[group].generation });
  }
}

t.test("parents never cached without their children: any order of range changes and relists", async (t) => {
  let runs = 0;
  let violations: string[] = [];
  let unfinished = 0;
  for (let seed = 1; seed <= 400; seed++) {
    const random = rng(seed);
    let gen = 1;
    const run = new Run({ generation: gen, ranges: randomSlots(random) });
    for (let i = 0; i < 40; i++) {
      const r = random();
      if (r < 0.3) run.send({ type: "target", ownership: { generation: (gen += 1 + Math.floor(random() * 2)), ranges: randomSlots(random) } });
      else if (r < 0.85) run.apply(random() < 0.5 ? "owners" : "dependents");
      // A stale report: an older generation, or a repeat.
      else run.send({ type: "applied", group: random() < 0.5 ? "owners" : "dependents", generation: Math.max(0, gen - 1 - Math.floor(random() * 3)) });
    }
    // Then quiet: every relist completes.
    for (let i = 0; i < 10 && run.state.reported !== run.state.target.generation; i++) for (const g of STAGE_GROUPS) run.apply(g);
    runs++;
    violations = violations.concat(run.violations.map((v) => `seed ${seed}: ${v}`));
    const s = run.state;
    if (!(equal(s.views.owners.ranges, s.target.ranges) && equal(s.views.dependents.ranges, s.target.ranges) && run.reported.at(-1) === s.target.generation)) unfinished++;
  }
  t.same(violations.slice(0, 5), [], `${runs} random runs: no moment where a parent could be cached without its children, and applied only once both caches are at the target`);
  t.equal(unfinished, 0, "once the relists complete, both groups enforce the target and it is reported applied");
});

t.test("a gain moves the children first, a loss the parents first", async (t) => {
  const run = new Run({ generation: 1, ranges: slots([0, 1]) });
  const gain = run.send({ type: "target", ownership: { generation: 2, ranges: slots([0, 1, 2, 3]) } });
  t.same(
    gain.map((fx) => (fx.type === "publish" ? [fx.group, fx.ownership.ranges] : fx)),
    [
      ["owners", slots([0, 1])],
      ["dependents", slots([0, 1, 2, 3])],
    ],
    "gain, stage A: the dependents widen; the owners only take the new generation",
  );
  t.same(run.send({ type: "applied", group: "owners", generation: 2 }), [], "nothing more until the dependents relisted");
  const b = run.send({ type: "applied", group: "dependents", generation: 2 });
  t.same(b.map((fx) => (fx.type === "publish" ? [fx.group, fx.ownership.ranges] : fx)), [["owners", slots([0, 1, 2, 3])]], "stage B: then the owners widen");
  t.same(run.send({ type: "applied", group: "owners", generation: 2 }), [{ type: "applied", generation: 2 }], "generation 2 is applied once the owners relisted too");

  const loss = run.send({ type: "target", ownership: { generation: 4, ranges: slots([3]) } });
  t.same(
    loss.map((fx) => (fx.type === "publish" ? [fx.group, fx.ownership.ranges] : fx)),
    [
      ["owners", slots([3])],
      ["dependents", slots([0, 1, 2, 3])],
    ],
    "loss, stage A: the owners narrow; the dependents keep theirs",
  );
  run.apply("dependents");
  const lossB = run.send({ type: "applied", group: "owners", generation: 4 });
  t.same(lossB.map((fx) => (fx.type === "publish" ? [fx.group, fx.ownership.ranges] : fx)), [["dependents", slots([3])]], "stage B: then the dependents narrow");
  t.same(run.send({ type: "applied", group: "dependents", generation: 4 }), [{ type: "applied", generation: 4 }]);
  t.same(run.violations, []);
});

t.test("a new target preempts a stage in flight; a fenced source (generation 0) is staged too and never reported", async (t) => {
  const run = new Run({ generation: 1, ranges: slots([0, 1, 2, 3]) });
  run.send({ type: "target", ownership: { generation: 3, ranges: slots([0, 1]) } });
  const pre = run.send({ type: "target", ownership: { generation: 0, ranges: [] } });
  t.same(
    pre.map((fx) => (fx.type === "publish" ? [fx.group, fx.ownership] : fx)),
    [
      ["owners", { generation: 0, ranges: [] }],
      ["dependents", { generation: 0, ranges: slots([0, 1, 2, 3]) }],
    ],
    "fenced while the owners were narrowing: they drop everything at once; the dependents wait for them",
  );
  run.apply("owners");
  run.apply("dependents");
  t.same(run.state.views.dependents, { generation: 0, ranges: [] }, "then the dependents drop everything");
  run.apply("dependents");
  t.same(run.reported, [], "generation 0 is never reported applied");
  t.same(run.violations, []);
});
