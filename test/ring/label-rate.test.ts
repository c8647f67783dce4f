import t from "tap";
import { ACHIEVED_WINDOW_MS, ADAPT_INTERVAL_MS, achievedRate, adaptRate, defaultFloor, initialRate, rateBounds, recordSend, sendAllowedAt, type RatePolicy } from "../../src/ring/label-rate.ts";

const P: RatePolicy = { maxRatePerSecond: 100, minRatePerSecond: 20, slowPatchMs: 250 };
const fast = (rateBound = true) => ({ type: "answered", latencyMs: 10, rateBound }) as const;

t.test("the labelling target starts at the floor and doubles once a second while fast answers meet a backlog, up to the ceiling", async (t) => {
  const s = initialRate(P, 0);
  t.equal(s.target, 20);
  t.notOk(adaptRate(s, P, fast(), ADAPT_INTERVAL_MS - 1), "no change within the interval");
  const seen: number[] = [];
  for (let now = ADAPT_INTERVAL_MS; now <= 10 * ADAPT_INTERVAL_MS; now += ADAPT_INTERVAL_MS) {
    adaptRate(s, P, fast(), now);
    seen.push(s.target);
  }
  t.same(seen, [40, 80, 100, 100, 100, 100, 100, 100, 100, 100], "slow start, held at the ceiling");
});

t.test("after the apiserver has pushed back once, the labelling target climbs by the floor, not by doubling", async (t) => {
  const s = initialRate(P, 0);
  adaptRate(s, P, fast(), 1_000);
  adaptRate(s, P, fast(), 2_000);
  adaptRate(s, P, { type: "throttled" }, 3_000);
  t.equal(s.target, 40);
  adaptRate(s, P, fast(), 4_000);
  adaptRate(s, P, fast(), 5_000);
  t.equal(s.target, 80, "40 + 20 + 20");
});

t.test("the target does not rise unless the rate is what holds work back (no backlog, or every in-flight slot taken)", async (t) => {
  const s = initialRate(P, 0);
  t.notOk(adaptRate(s, P, fast(false), 5 * ADAPT_INTERVAL_MS));
  t.equal(s.target, 20);
});

t.test("a 429 or a slow PATCH halves the target, once per interval, never below the floor", async (t) => {
  const s = initialRate(P, 0);
  for (let i = 1; i <= 3; i++) adaptRate(s, P, fast(), i * ADAPT_INTERVAL_MS);
  t.equal(s.target, 100);
  t.ok(adaptRate(s, P, { type: "throttled" }, 5 * ADAPT_INTERVAL_MS));
  t.equal(s.target, 50, "halved on a 429");
  t.notOk(adaptRate(s, P, { type: "throttled" }, 5 * ADAPT_INTERVAL_MS + 10), "the other PATCHes in flight are the same signal");
  t.equal(s.target, 50);
  t.ok(adaptRate(s, P, { type: "answered", latencyMs: 251, rateBound: true }, 6 * ADAPT_INTERVAL_MS));
  t.equal(s.target, 25, "halved on a PATCH slower than slowPatchMs");
  adaptRate(s, P, { type: "throttled" }, 7 * ADAPT_INTERVAL_MS);
  t.equal(s.target, 20, "not below the floor");
  t.notOk(adaptRate(s, P, { type: "throttled" }, 8 * ADAPT_INTERVAL_MS), "at the floor a 429 changes nothing");
  t.equal(s.backoffs, 3);
});

t.test("a floor equal to the ceiling is a fixed rate", async (t) => {
  const fixed = { ...P, minRatePerSecond: 100 };
  const s = initialRate(fixed, 0);
  for (let i = 1; i <= 5; i++) adaptRate(s, fixed, i === 3 ? { type: "throttled" } : fast(), i * ADAPT_INTERVAL_MS);
  t.equal(s.target, 100);
});

t.test("--label-rate 5 alone is a ceiling with room under it: it starts at 5/s, the floor defaults to a tenth of it (at most 20/s), and 429s and slow PATCHes back off below 5", async (t) => {
  t.equal(defaultFloor(500), 20, "the default ceiling keeps kube-controller-manager's 20/s as its floor");
  t.equal(defaultFloor(100), 10);
  const gentle: RatePolicy = { maxRatePerSecond: 5, slowPatchMs: 250 };
  t.same(rateBounds(gentle), { floor: 0.5, start: 5, ceiling: 5 });
  t.same(rateBounds({ maxRatePerSecond: 500, slowPatchMs: 250 }), { floor: 20, start: 20, ceiling: 500 }, "the default: from 20/s, up to 500/s");
  t.same(rateBounds({ maxRatePerSecond: 500, minRatePerSecond: 100, slowPatchMs: 250 }), { floor: 100, start: 100, ceiling: 500 }, "never starting below the floor");
  t.same(rateBounds({ ...gentle, minRatePerSecond: 50 }), { floor: 5, start: 5, ceiling: 5 }, "a floor above the ceiling is held to it (the CLI refuses it outright)");
  const s = initialRate(gentle, 0);
  t.equal(s.target, 5, "at the user's rate from the start");
  for (let i = 1; i <= 5; i++) adaptRate(s, gentle, fast(), i * ADAPT_INTERVAL_MS);
  t.equal(s.target, 5, "and never above it");
  adaptRate(s, gentle, { type: "throttled" }, 6 * ADAPT_INTERVAL_MS);
  t.equal(s.target, 2.5, "a 429 halves it below the user's rate");
  adaptRate(s, gentle, { type: "answered", latencyMs: 1_000, rateBound: true }, 7 * ADAPT_INTERVAL_MS);
  t.equal(s.target, 1.25, "so does a slow PATCH");
});

t.test("the ceiling: at most --label-rate PATCHes begin in any one second, whatever the target", async (t) => {
  const p: RatePolicy = { maxRatePerSecond: 5, slowPatchMs: 250 };
  const s = initialRate(p, 0);
  const sent: number[] = [];
  // Send whenever the ceiling allows, as fast as a token bucket of any size would.
  for (let now = 0; now < 10_000; now = sendAllowedAt(s, p, now + 1)) {
    recordSend(s, now);
    sent.push(now);
  }
  const worst = Math.max(...sent.map((at) => sent.filter((x) => x >= at && x < at + 1_000).length));
  t.equal(worst, 5, "never 6 in any second");
  t.equal(sent.length, 50, "and 5 in each of the ten");
  const frac: RatePolicy = { maxRatePerSecond: 0.5, slowPatchMs: 250 };
  const f = initialRate(frac, 0);
  recordSend(f, 0);
  t.equal(sendAllowedAt(f, frac, 1), 2_000, "a ceiling below 1/s: one per 2 s");
});

t.test("the achieved rate is the PATCHes answered over the last 10 s, per second", async (t) => {
  const s = initialRate(P, 0);
  t.equal(achievedRate(s, 0), 0);
  for (let now = 100; now <= 20_000; now += 100) adaptRate(s, P, fast(false), now);
  t.equal(achievedRate(s, 20_000), 10, "ten answers a second");
  t.equal(achievedRate(s, 20_000 + ACHIEVED_WINDOW_MS / 2), 5, "half the window empty");
  t.equal(achievedRate(s, 20_000 + ACHIEVED_WINDOW_MS), 0, "it falls to 0 when nothing is answered");
});
