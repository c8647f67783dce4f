import t from "tap";
import { ADAPT_INTERVAL_MS, adaptRate, initialRate, type RatePolicy } from "../../src/ring/label-rate.ts";

const P: RatePolicy = { ratePerSecond: 20, maxRatePerSecond: 100, slowPatchMs: 250 };
const fast = (waiting = true) => ({ type: "answered", latencyMs: 10, waiting }) as const;

t.test("the labelling rate starts at the floor and doubles once a second while fast answers meet a backlog, up to the ceiling", async (t) => {
  const s = initialRate(P, 0);
  t.equal(s.rate, 20);
  t.notOk(adaptRate(s, P, fast(), ADAPT_INTERVAL_MS - 1), "no change within the interval");
  const seen: number[] = [];
  for (let now = ADAPT_INTERVAL_MS; now <= 10 * ADAPT_INTERVAL_MS; now += ADAPT_INTERVAL_MS) {
    adaptRate(s, P, fast(), now);
    seen.push(s.rate);
  }
  t.same(seen, [40, 80, 100, 100, 100, 100, 100, 100, 100, 100], "slow start, held at the ceiling");
});

t.test("after the apiserver has pushed back once, the labelling rate climbs by the floor, not by doubling", async (t) => {
  const s = initialRate(P, 0);
  adaptRate(s, P, fast(), 1_000);
  adaptRate(s, P, fast(), 2_000);
  adaptRate(s, P, { type: "throttled" }, 3_000);
  t.equal(s.rate, 40);
  adaptRate(s, P, fast(), 4_000);
  adaptRate(s, P, fast(), 5_000);
  t.equal(s.rate, 80, "40 + 20 + 20");
});

t.test("an idle labeller does not raise its rate: only a backlog shows the rate is the limit", async (t) => {
  const s = initialRate(P, 0);
  t.notOk(adaptRate(s, P, fast(false), 5 * ADAPT_INTERVAL_MS));
  t.equal(s.rate, 20);
});

t.test("a 429 or a slow PATCH halves the rate, once per interval, never below the floor", async (t) => {
  const s = initialRate(P, 0);
  for (let i = 1; i <= 3; i++) adaptRate(s, P, fast(), i * ADAPT_INTERVAL_MS);
  t.equal(s.rate, 100);
  t.ok(adaptRate(s, P, { type: "throttled" }, 5 * ADAPT_INTERVAL_MS));
  t.equal(s.rate, 50, "halved on a 429");
  t.notOk(adaptRate(s, P, { type: "throttled" }, 5 * ADAPT_INTERVAL_MS + 10), "the other PATCHes in flight are the same signal");
  t.equal(s.rate, 50);
  t.ok(adaptRate(s, P, { type: "answered", latencyMs: 251, waiting: true }, 6 * ADAPT_INTERVAL_MS));
  t.equal(s.rate, 25, "halved on a PATCH slower than slowPatchMs");
  adaptRate(s, P, { type: "throttled" }, 7 * ADAPT_INTERVAL_MS);
  t.equal(s.rate, 20, "not below the floor");
  t.notOk(adaptRate(s, P, { type: "throttled" }, 8 * ADAPT_INTERVAL_MS), "at the floor a 429 changes nothing");
  t.equal(s.backoffs, 3);
});

t.test("a ceiling equal to the floor is a fixed rate", async (t) => {
  const fixed = { ...P, maxRatePerSecond: 20 };
  const s = initialRate(fixed, 0);
  for (let i = 1; i <= 5; i++) adaptRate(s, fixed, fast(), i * ADAPT_INTERVAL_MS);
  t.equal(s.rate, 20);
});
