/**
 * The proxy remembers the shard keys of the watch events it recently passed,
 * and `/debug/shardcar?key=` answers from that memory: what `shardcar audit
 * --canary` asks to prove a replica's controller received its canary.
 */
import t from "tap";
import { RecentKeys, RecordingMatcher } from "../../../src/proxy/reporting/recent-keys.ts";
import { fnv1a64, fnv1a64Into } from "../../../src/shard/hash.ts";
import { contains, split } from "../../../src/shard/range.ts";
import { eventually, startCluster } from "../../support/cluster.ts";

t.test("RecentKeys forgets the oldest key once full, and counts repeats", async (t) => {
  const r = new RecentKeys(3);
  for (const k of ["a", "b", "a", "c"]) r.add(k);
  t.ok(r.has("a"), "a added twice, once evicted: still remembered");
  t.ok(r.has("b") && r.has("c"));
  r.add("d");
  r.add("e");
  t.notOk(r.has("b"), "b is the oldest and was evicted");
  t.notOk(r.has("a"), "both a's evicted");
  t.equal(r.added, 6);
});

t.test("RecordingMatcher records the keys it lets through, never the empty-key probe", async (t) => {
  const [lower] = split(2);
  const recent = new RecentKeys();
  const m = new RecordingMatcher(lower === undefined ? [] : [lower], recent);
  const keys = Array.from({ length: 40 }, (_, i) => `uid-${i}`);
  const h = new Uint32Array(2);
  for (const k of keys) {
    const b = Buffer.from(k);
    fnv1a64Into(b, 0, b.length, h);
    m.matchesKey(h[0] as number, h[1] as number);
  }
  // What a filter asks for an object without a key.
  m.matchesBytes(new Uint8Array(0), 0, 0);
  for (const k of keys) t.equal(recent.has(k), contains(lower === undefined ? [] : [lower], fnv1a64(k)), `${k}: remembered iff in range`);
  t.notOk(recent.has(""), "the empty probe key is not an object");
});

t.test("/debug/shardcar?key= says which replica's watch delivered a new pod", async (t) => {
  const cluster = await startCluster({ gate: "on", replicas: 2, pods: 50, namespaces: ["default"] });
  t.teardown(() => cluster.stop());
  const pod = cluster.api.store.create("pods", { metadata: { name: "canary", namespace: "default" }, spec: { containers: [{ name: "c", image: "x" }] } });
  const uid = pod.metadata?.uid ?? "";
  const owner = cluster.ranges.findIndex((r) => contains(r, fnv1a64(uid)));
  const ask = async (i: number): Promise<boolean | undefined> => {
    const res = await fetch(`${cluster.replicas[i]?.proxy.adminUrl ?? ""}/debug/shardcar?key=${uid}`);
    const body = (await res.json()) as { key?: string; delivered?: Record<string, boolean> };
    return body.delivered?.["pods"];
  };
  t.ok(await eventually(async () => (await ask(owner)) === true), `the owner (replica ${owner}) delivered it`);
  t.equal(await ask(1 - owner), false, "the other replica did not");
});
