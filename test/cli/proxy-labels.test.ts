/**
 * `shardcar proxy --filter labels` with static shards: the flags make a
 * proxy that asks the apiserver for its slots by label, whole slots of
 * `--slot-count` (an `i/N` whose bounds cut slots becomes its slot-aligned
 * neighbour), and for owner keys in shardselector mode for no selector.
 * Runs `main` in-process against devapi and reads what reached devapi.
 */
import t, { type Test } from "tap";
import { Writable } from "node:stream";
import { main } from "../../src/cli/main.ts";
import { startDevApi, type DevApi } from "../../src/devapi/index.ts";

/** Starts the proxy with `flags`, sends one LIST of pods through it, stops it; returns the query devapi received. */
async function listThrough(t: Test, api: DevApi, flags: string[]): Promise<URLSearchParams> {
  let out = "";
  const stop = new AbortController();
  let listening: (url: string) => void = () => {};
  const url = new Promise<string>((resolve) => (listening = resolve));
  const stdout = new Writable({
    write(c: Buffer, _e, cb) {
      out += c.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m?.[1] !== undefined) listening(m[1]);
      cb();
    },
  });
  const stderr = new Writable({ write: (_c, _e, cb) => cb() });
  const running = main(["proxy", "--server", api.url, "--listen", "127.0.0.1:0", "--admin-listen", "off", "--log-level", "silent", ...flags], { stdout, stderr, env: {}, signal: stop.signal });
  const before = api.stats.requests.length;
  const res = await fetch(`${await url}/api/v1/pods`);
  t.equal(res.status, 200);
  await res.arrayBuffer();
  stop.abort();
  t.equal(await running, 0, "exits cleanly");
  const sent = api.stats.requests.slice(before).find((q) => q.url.startsWith("/api/v1/pods"));
  return new URL(sent?.url ?? "/", "http://devapi").searchParams;
}

t.test("labels mode, static shards: 1/3 of 8 slots asks for slots 3, 4 and 5 by the ring's label, and no shardSelector", async (t) => {
  const api = await startDevApi({ gate: "off" });
  t.teardown(() => api.close());
  const q = await listThrough(t, api, ["--resources", "pods", "--shards", "1/3", "--filter", "labels", "--ring", "web", "--slot-count", "8"]);
  t.equal(q.get("labelSelector"), "shard.shardcar.io/web in (3,4,5)");
  t.equal(q.get("shardSelector"), null);
  const explicit = await listThrough(t, api, ["--resources", "pods", "--shards", "0/2", "--filter", "labels", "--slot-label", "example.com/slot"]);
  t.equal(explicit.get("labelSelector"), `example.com/slot in (${Array.from({ length: 128 }, (_, i) => i).join(",")})`, "an explicit label, the default 256 slots");
});

t.test("shardselector mode: an owner-keyed resource is sent no shardSelector, a uid-keyed one is", async (t) => {
  const api = await startDevApi({ gate: "on" });
  t.teardown(() => api.close());
  const owner = await listThrough(t, api, ["--resources", "pods=owner", "--shards", "0/2"]);
  t.same([owner.get("shardSelector"), owner.get("labelSelector")], [null, null]);
  const uid = await listThrough(t, api, ["--resources", "pods", "--shards", "0/2"]);
  t.match(uid.get("shardSelector"), /^shardRange\(object\.metadata\.uid/);
});
