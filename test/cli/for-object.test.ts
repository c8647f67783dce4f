/**
 * `shardcar hash --for-object` and `shardcar ranges N --for-object`: which
 * range of N, and which ring member, owns a live object, read from the
 * cluster; bad flags exit 2 naming the flag.
 */
import t from "tap";
import { seedPods, startDevApi } from "../../src/devapi/index.ts";
import { fnv1a64, formatBound } from "../../src/shard/hash.ts";
import { contains, split } from "../../src/shard/range.ts";
import { cli, kubeconfigFile, TestRing } from "../ops/support.ts";

t.test("hash --for-object prints uid, hash, the range of N and the ring member that owns and delivers it", async (t) => {
  const api = await startDevApi({ gate: "on" });
  seedPods(api, { count: 50, namespaces: ["shop"] });
  const ring = new TestRing(api, "shop", "web");
  t.teardown(async () => {
    await ring.stop();
    await api.close();
  });
  ring.startCoordinator();
  for (const m of ["web-0", "web-1"]) await ring.add(m);
  await ring.settled(["web-0", "web-1"]);
  const pod = api.store.list("pods")[7];
  const uid = pod?.metadata?.uid ?? "";
  const h = fnv1a64(uid);
  const owner = [...ring.members.values()].find((m) => contains(m.current().ranges, h));
  const kc = kubeconfigFile(api.url, "shop");
  const r = await cli(["hash", "--kubeconfig", kc, "--for-object", `shop/${pod?.metadata?.name ?? ""}`, "--resource", "pods", "--shards", "3", "--ring", "web"]);
  t.equal(r.code, 0, r.err);
  t.match(r.out, `uid ${uid}`);
  t.match(r.out, `hash ${formatBound(h)}`);
  t.match(r.out, `range ${split(3).findIndex((x) => contains([x], h))}/3`);
  const name = owner === undefined ? "?" : [...ring.members.entries()].find(([, m]) => m === owner)?.[0];
  t.match(r.out, new RegExp(`committed owner ${name ?? "?"} \\(generation \\d+\\)`));
  t.match(r.out, new RegExp(`delivered now by: ${name ?? "?"}$`, "m"));
  const j = await cli(["ranges", "4", "--kubeconfig", kc, "--for-object", `shop/${pod?.metadata?.name ?? ""}`, "--resource", "pods=namespace", "--json"]);
  t.equal(j.code, 0, j.err);
  const loc = JSON.parse(j.out) as { keyValue: string; hash: string; shard: { index: number; of: number } };
  t.equal(loc.keyValue, "shop", "namespace keying hashes the namespace");
  t.same(loc.shard, { index: split(4).findIndex((x) => contains([x], fnv1a64("shop"))), of: 4 });
});

t.test("--for-object mistakes exit 2 naming the flag", async (t) => {
  const api = await startDevApi({ gate: "on" });
  t.teardown(() => api.close());
  const kc = kubeconfigFile(api.url, "shop");
  const cases: Array<[string[], RegExp]> = [
    [["hash", "--kubeconfig", kc, "--for-object", "shop/x"], /--for-object needs --resource/],
    [["hash", "--kubeconfig", kc, "--for-object", "x", "--resource", "pods"], /--for-object "x": expected namespace\/name/],
    [["hash", "--kubeconfig", kc, "--for-object", "shop/missing", "--resource", "pods"], /pods shop\/missing: HTTP 404/],
    [["hash", "--kubeconfig", kc, "--for-object", "shop/x", "--resource", "pods", "abc"], /either VALUEs or --for-object/],
    [["hash", "--resource", "pods", "abc"], /--resource only applies with --for-object/],
    [["ranges", "3", "--kubeconfig", kc, "--for-object", "shop/x", "--resource", "pods", "--key", "namespace"], /--key.*comes from --resource/],
    [["ranges", "3", "--kubeconfig", kc, "--for-object", "shop/x", "--resource", "pods", "--ring", "Bad"], /--ring "Bad"/],
    [["ranges", "3", "--kubeconfig", kc, "--for-object", "shop/x", "--resource", "pods", "--context", "nope"], /--context "nope"/],
  ];
  for (const [argv, re] of cases) {
    const r = await cli(argv);
    t.equal(r.code, 2, argv.join(" "));
    t.match(r.err, re);
  }
});
