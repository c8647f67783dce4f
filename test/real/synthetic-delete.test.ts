/**
 * Narrowing without a relist, against the real server (docs/rings.md): a
 * watch shaped like a client-go 0.36 informer's (watch-list, protobuf or
 * JSON) goes through a proxy whose ranges then shrink. The stream must stay
 * open, carry one DELETED (decoded by protobufjs or JSON.parse, typed as the
 * stream's objects, at a resourceVersion no older than the client's) for
 * every object that left, and afterwards only events in the narrower ranges;
 * the cache rebuilt from the stream must equal the server's own list of the
 * narrower shard.
 */
import t from "tap";
import { MutableOwnership } from "../../src/shard/ownership.ts";
import { SYNTHETIC_DELETE_ANNOTATION } from "../../src/proxy/handoff/synthetic-delete.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, FULL_RANGE, shardRange } from "../../src/shard/range.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { NAMESPACES, pod } from "./support/dataset.ts";
import { startRealProxy } from "./support/proxies.ts";
import { callJson, listAll, realApiEnv, type KubeMeta, type Target } from "./support/realapi.ts";
import { isInitialEventsEnd, isMutation, openWatch } from "./support/watch.ts";

const env = realApiEnv();
const server: Target = { url: env.url, caPem: env.caPem, token: env.token };
const HALF = [shardRange(0, 2)];
const metaIdent = (m: KubeMeta): string => `${m.namespace ?? ""}/${m.name ?? ""}@${m.uid ?? ""}`;
const inHalf = (m: KubeMeta): boolean => contains(HALF, fnv1a64(m.uid ?? ""));

for (const encoding of ["protobuf", "json"] as const) {
  t.test(`${encoding} watch-list through a proxy whose ranges shrink: synthetic DELETEDs, then only the narrower shard, on the same stream`, async (t) => {
    const own = new MutableOwnership({ generation: 1, ranges: [FULL_RANGE] });
    const lane = await startRealProxy(env, { resources: parseResources("pods"), ownership: own, syntheticDeletes: true });
    t.teardown(() => lane.proxy.close());
    const accept = encoding === "protobuf" ? "application/vnd.kubernetes.protobuf;stream=watch, application/json" : "application/json";
    const w = await openWatch(lane.target, "/api/v1/pods?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=300&watch=true", { accept });
    t.teardown(() => w.close());
    t.equal(w.status, 200, "the watch is served");
    t.ok(await w.waitFor((es) => es.some(isInitialEventsEnd), 30_000), "initial events through");
    const endAt = w.events.findIndex(isInitialEventsEnd);
    const clientRv = Number(w.events[endAt]?.meta.resourceVersion ?? "0");

    own.set({ generation: 2, ranges: HALF });
    t.same(own.applied, [2], "applied at once: nothing to relist");
    // Writes after the narrowing, on both sides of the boundary.
    const tag = `sd-${encoding}-${Date.now().toString(36)}`;
    const created = [];
    for (let i = 0; i < 16; i++) {
      const ns = NAMESPACES[i % NAMESPACES.length] ?? "alpha";
      created.push(await callJson(server, "POST", `/api/v1/namespaces/${ns}/pods`, pod(`${tag}-${i}`, ns, i)));
    }
    const wantNew = created.map((o) => o.metadata ?? {}).filter(inHalf).map(metaIdent);
    t.ok(wantNew.length > 0 && wantNew.length < created.length, `some new pods are in the half (${wantNew.length}/${created.length})`);
    t.ok(await w.waitFor((es) => wantNew.every((id) => es.some((e) => e.type === "ADDED" && metaIdent(e.meta) === id)), 30_000), "every new in-range pod arrived");

    const after = w.events.slice(endAt + 1);
    const synthetic = after.filter((e) => e.type === "DELETED" && e.meta.annotations?.[SYNTHETIC_DELETE_ANNOTATION] !== undefined);
    const initial = w.events.slice(0, endAt).filter(isMutation).map((e) => e.meta);
    const leaving = initial.filter((m) => !inHalf(m)).map(metaIdent).sort();
    t.same(synthetic.map((e) => metaIdent(e.meta)).sort(), leaving, `one synthetic DELETED per object that left (${leaving.length})`);
    t.ok(synthetic.every((e) => e.kind === "Pod"), "typed as the stream's objects");
    t.ok(synthetic.every((e) => Number(e.meta.resourceVersion) >= clientRv), "never older than the client's resourceVersion");
    const firstSynthetic = after.findIndex((e) => e === synthetic[0]);
    t.same(after.slice(firstSynthetic + synthetic.length).filter((e) => isMutation(e) && !inHalf(e.meta)).map((e) => metaIdent(e.meta)), [], "afterwards nothing outside the half");
    t.notOk(w.ended, "the stream is still open: no 410");

    // The cache a reflector would hold, against the server's own list.
    const cache = new Map<string, string>();
    for (const e of w.events) {
      if (!isMutation(e)) continue;
      const k = `${e.meta.namespace ?? ""}/${e.meta.name ?? ""}`;
      if (e.type === "DELETED") cache.delete(k);
      else cache.set(k, metaIdent(e.meta));
    }
    const direct = await listAll(server, "/api/v1/pods");
    const want = direct.items.map((o) => o.metadata ?? {}).filter(inHalf).map(metaIdent).sort();
    t.same([...cache.values()].sort(), want, "the rebuilt cache is exactly the server's narrower shard");
    for (const o of created) await callJson(server, "DELETE", `/api/v1/namespaces/${o.metadata?.namespace ?? ""}/pods/${o.metadata?.name ?? ""}`);
  });
}
