import t from "tap";
import { Writable } from "node:stream";
import { runDemo } from "../../src/demo/run.ts";
import { silentLogger } from "../../src/log.ts";

t.test("the demo holds its invariant in every scene, and shows who filtered", async (t) => {
  let text = "";
  const out = new Writable({
    write(c: Buffer, _e, cb) {
      text += c.toString();
      cb();
    },
  });
  const { ok, scenes } = await runDemo({ out, logger: silentLogger(), pods: 600, replicas: 3, signal: new AbortController().signal });
  t.ok(ok, "runDemo reports success");
  t.equal(scenes.length, 4);
  for (const s of scenes) {
    t.ok(s.ok, `${s.scene}: invariant held`);
    t.equal(s.rows.reduce((n, r) => n + r.cached, 0), s.total, `${s.scene}: the caches add up to every pod`);
  }
  t.ok(scenes[0]?.rows.every((r) => r.filteredBy === "server (shardInfo)"), "gate on: the server filtered");
  t.ok(scenes[2]?.rows.every((r) => r.filteredBy === "proxy (fallback)"), "gate off: the proxies filtered");
  const off = scenes[2]?.rows ?? [];
  t.ok(off.every((r) => r.bytesFromServer > 2 * r.bytesToController), "gate off: each proxy received the whole list but passed on only its shard");
  t.match(text, /invariant holds/);
});
