/**
 * The demo's figures in plain words (src/demo/report.ts): what a reader of
 * a scene's "saved" line sees.
 */
import t from "tap";
import { fmtPct, renderLines } from "../../src/demo/report.ts";

t.test("a saving that rounds to nothing reads 0.0%, never -0.0%; real savings and losses keep their sign", async (t) => {
  t.equal(fmtPct(-0.00001), "0.0%");
  t.equal(fmtPct(0), "0.0%");
  t.equal(fmtPct(0.6667), "66.7%");
  t.equal(fmtPct(-0.012), "-1.2%", "controllers that received more than their unsharded twins show it");
});

t.test("a command's output in a scene (the operator's audit) renders as one aligned block, the prose around it as paragraphs", async (t) => {
  const html = renderLines(["gap: none", "  $ shardcar audit --resource pods", "  owner  keyspace  objects", "  web-0  50.0%     300", "the operator's audit agrees"]);
  t.equal(html, ["<p>gap: none</p>", "<pre>$ shardcar audit --resource pods\nowner  keyspace  objects\nweb-0  50.0%     300</pre>", "<p>the operator's audit agrees</p>"].join("\n"));
});
