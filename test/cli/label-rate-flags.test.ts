/**
 * `shardcar manager`'s label-rate flags: `--label-rate` is the ceiling a
 * user sets to be gentle, `--label-rate-min` a floor under it, and
 * `--label-rate-max` the ceiling's former name.
 */
import t from "tap";
import { labelRateFlags } from "../../src/cli/label-rate-flags.ts";
import { managerCommand } from "../../src/cli/commands/manager.ts";
import { DEFAULT_LABEL_RATE } from "../../src/ring/labeller.ts";

t.test("--label-rate is the most PATCHes per second: a user's --label-rate 5 is a ceiling of 5, with the default floor under it", async (t) => {
  t.same(labelRateFlags({ "label-rate": "5" }), { maxRatePerSecond: 5, minRatePerSecond: undefined, warning: undefined });
  t.same(labelRateFlags({}), { maxRatePerSecond: DEFAULT_LABEL_RATE, minRatePerSecond: undefined, warning: undefined }, "the default ceiling");
  t.equal(DEFAULT_LABEL_RATE, 500, "500/s: 200,000 objects in minutes, not hours");
  t.same(labelRateFlags({ "label-rate": "100", "label-rate-min": "100" }), { maxRatePerSecond: 100, minRatePerSecond: 100, warning: undefined }, "a floor equal to it: a fixed rate");
});

t.test("a --label-rate-min above --label-rate is refused, naming both values", async (t) => {
  t.throws(() => labelRateFlags({ "label-rate": "5", "label-rate-min": "20" }), { message: "invalid --label-rate-min 20: above --label-rate 5, the most PATCHes per second" });
  t.throws(() => labelRateFlags({ "label-rate-max": "5", "label-rate-min": "20" }), { message: /above --label-rate-max 5/ });
});

t.test("--label-rate-max, the ceiling's former name: alone it is the ceiling (with a warning); beside --label-rate the two must agree", async (t) => {
  t.same(labelRateFlags({ "label-rate-max": "100" }), { maxRatePerSecond: 100, minRatePerSecond: undefined, warning: "--label-rate-max is deprecated: it is --label-rate now (the most PATCHes per second); use --label-rate 100" });
  t.match(labelRateFlags({ "label-rate": "100", "label-rate-max": "100" }), { maxRatePerSecond: 100 });
  t.throws(() => labelRateFlags({ "label-rate": "20", "label-rate-max": "500" }), {
    message: "--label-rate 20 and --label-rate-max 500 disagree: --label-rate is the most PATCHes per second and --label-rate-max its former name, so give one; for what they used to mean (start at 20/s, climb to at most 500/s) set --label-rate 500 --label-rate-min 20",
  });
  t.throws(() => labelRateFlags({ "label-rate": "500", "label-rate-max": "20" }), { message: /^--label-rate 500 and --label-rate-max 20 disagree: .*so give one$/ });
  t.throws(() => labelRateFlags({ "label-rate": "0" }), { message: /invalid --label-rate "0": expected an integer from 1 to 10000/ });
});

t.test("--help says --label-rate is the ceiling and the rate adapts under it", async (t) => {
  t.match(managerCommand.usage, /--label-rate N +the most slot-label PATCHes per second/);
  t.match(managerCommand.usage, /--label-rate-min N +the least PATCHes per second the rate halves to/);
  t.match(managerCommand.usage, /--label-rate-max N +the former name of --label-rate/);
});
