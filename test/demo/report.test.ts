/**
 * The demo's figures in plain words (src/demo/report.ts): what a reader of
 * a scene's "saved" line sees.
 */
import t from "tap";
import { fmtPct } from "../../src/demo/report.ts";

t.test("a saving that rounds to nothing reads 0.0%, never -0.0%; real savings and losses keep their sign", async (t) => {
  t.equal(fmtPct(-0.00001), "0.0%");
  t.equal(fmtPct(0), "0.0%");
  t.equal(fmtPct(0.6667), "66.7%");
  t.equal(fmtPct(-0.012), "-1.2%", "controllers that received more than their unsharded twins show it");
});
