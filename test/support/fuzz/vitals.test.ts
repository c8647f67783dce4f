/**
 * The fuzz lanes' memory judge (vitals.ts): a leak fails it, and the
 * high-water mark one burst of large bodies leaves in RSS does not.
 */
import t from "tap";
import { VitalsLog, type Vitals } from "./vitals.ts";

const MiB = 1024 * 1024;
const BOUNDS = { rssMiB: 160, heapMiB: 32, fds: 16 };

/** A run of `cases` cases (the warm sample at a third), RSS as `rssAt` says per case; heap and descriptors flat. */
function run(cases: number, rssAt: (i: number) => number): readonly string[] {
  let now = 0;
  const read = (): Vitals => ({ rssBytes: 300 * MiB + rssAt(now), heapUsedBytes: 40 * MiB, heapTotalBytes: 160 * MiB, externalBytes: 10 * MiB, fds: 40 });
  const log = new VitalsLog({ cases, seconds: undefined }, 2000, read);
  for (now = 1; now <= cases; now++) log.sample({ cases: now, seconds: now / 100 });
  const judged = log.judge(log.final(cases), BOUNDS, false);
  if ("skipped" in judged) throw new Error(judged.skipped);
  return judged.problems;
}

t.test("a burst's high-water mark in the first half of a run is not a leak", async (t) => {
  t.same(run(78_000, (i) => (i >= 35_000 ? 113 * MiB : 0) + (i >= 60_000 ? 20 * MiB : 0)), []);
});

t.test("RSS that grows all through a run fails it", async (t) => {
  const problems = run(90_000, (i) => i * 4096);
  t.equal(problems.length, 1);
  t.match(problems[0], /^RSS grew by 17\d\.\d MiB \(bound 160 MiB\)/, "the growth over the second half, named");
});

t.test("a step in the second half of a run fails it", async (t) => {
  t.match(run(78_000, (i) => (i >= 50_000 ? 170 * MiB : 0)), [/^RSS grew by 170\.0 MiB/]);
});

t.test("a short run, with no sample between the warm one and the end, is judged from the warm one", async (t) => {
  t.match(run(300, (i) => (i > 100 ? 200 * MiB : 0)), [/^RSS grew by 200\.0 MiB/]);
  t.same(run(300, (i) => (i === 300 ? 150 * MiB : 0)), []);
});
