/**
 * devapi for P5 and P7 in its own process (forked, IPC): HTTPS with the
 * bench CA, seeded with pods of realistic and varied size (2–6 KB, five
 * equal buckets, spread over six namespaces), and churn on request.
 *
 * Args: `--pods N --cert FILE --key FILE [--gate on|off] [--slot-label KEY
 * --slot-count S]`; with a slot label every pod carries it, set to the slot
 * of its uid (src/shard/slots.ts), as labels mode's webhook would.
 * Prints nothing on stdout; sends `{ type: "ready", url, pods, bytes }`.
 *
 * Messages:
 * - `{ type: "gate", mode }` → `{ type: "gate" }`;
 * - `{ type: "inventory" }` → `{ type: "inventory", uids }` (every pod's uid);
 * - `{ type: "churn", count, rate, seed }` → `{ type: "churned", final }`:
 *   `count` merge patches (one annotation changed, size kept) on pods picked
 *   by a seeded generator, `rate` per second; `final` maps `ns/name` to the
 *   last resourceVersion written and the uid, so callers can wait until every cache
 *   caught up;
 * - `{ type: "stats" }` → `{ type: "stats", lists, watches }` (pods).
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { seedPods, startDevApi, isGateMode } from "../../src/devapi/index.ts";
import { formatSlot, slotOfValue } from "../../src/shard/slots.ts";

export interface ChurnReply {
  readonly type: "churned";
  /** `ns/name` → [last resourceVersion written, uid]. */
  readonly final: Record<string, [string, string]>;
  readonly ms: number;
}

// Five size buckets spanning the "2–6 KB": 2, 3, 4, 5 and 6 KB.
const BUCKETS = [2048, 3072, 4096, 5120, 6144];
const NAMESPACES = 6;

/** mulberry32: a small seeded generator, so every configuration churns the same pods. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { pods: { type: "string" }, cert: { type: "string" }, key: { type: "string" }, gate: { type: "string" }, "slot-label": { type: "string" }, "slot-count": { type: "string" } } });
  const pods = Number(values.pods ?? "2000");
  const gate = values.gate ?? "on";
  if (!isGateMode(gate)) throw new Error(`bad --gate ${gate}`);
  const tls = values.cert !== undefined && values.key !== undefined ? { cert: readFileSync(values.cert, "utf8"), key: readFileSync(values.key, "utf8") } : undefined;
  // History long enough that no reconnecting watch in a run gets 410.
  const api = await startDevApi({ gate, watchHistory: 100_000, ...(tls === undefined ? {} : { tls }) });
  const names: Array<[string, string]> = [];
  const per = Math.ceil(pods / BUCKETS.length);
  BUCKETS.forEach((podBytes, b) => {
    const count = Math.min(per, pods - b * per);
    if (count <= 0) return;
    const r = seedPods(api, { count, namespaces: NAMESPACES, podBytes, prefix: `pod-${podBytes / 1024}k-` });
    r.names.forEach((n, i) => names.push([r.namespaces[i % r.namespaces.length] ?? "ns-0", n]));
  });
  const label = values["slot-label"];
  if (label !== undefined) {
    const slotCount = Number(values["slot-count"] ?? "256");
    for (const p of api.store.list("pods")) api.store.patch("pods", p.metadata?.namespace, p.metadata?.name ?? "", { metadata: { labels: { [label]: formatSlot(slotOfValue(p.metadata?.uid ?? "", slotCount)) } } });
  }
  const uids = api.store.list("pods").map((p) => p.metadata?.uid ?? "");
  const bytes = api.store.list("pods").reduce((n, p) => n + JSON.stringify(p).length, 0);

  let churning = false;
  // Every patch writes a value never written before: devapi, like the
  // apiserver, turns a no-op patch into no event.
  let written = 0;
  process.on("message", (raw: unknown) => {
    const m = raw as { type: string; mode?: string; count?: number; rate?: number; seed?: number };
    switch (m.type) {
      case "gate":
        if (m.mode !== undefined && isGateMode(m.mode)) api.gate = m.mode;
        process.send?.({ type: "gate" });
        return;
      case "inventory":
        process.send?.({ type: "inventory", uids });
        return;
      case "stats":
        process.send?.({ type: "stats", lists: api.stats.lists.get("pods") ?? 0, watches: api.stats.watches.get("pods") ?? 0 });
        return;
      case "churn": {
        if (churning) throw new Error("one churn at a time");
        churning = true;
        const count = m.count ?? 0;
        const rate = m.rate ?? 100;
        const next = rng(m.seed ?? 1);
        const final: Record<string, [string, string]> = {};
        const t0 = performance.now();
        let done = 0;
        const tick = (): void => {
          const due = Math.min(count, Math.floor(((performance.now() - t0) * rate) / 1000) + 1);
          for (; done < due; done++) {
            const [ns, name] = names[Math.floor(next() * names.length)] ?? ["ns-0", "pod-2k-00000"];
            const o = api.store.patch("pods", ns, name, { metadata: { annotations: { "bench.shardcar.io/churn": String(written++).padStart(8, "0") } } });
            final[`${ns}/${name}`] = [o.metadata?.resourceVersion ?? "", o.metadata?.uid ?? ""];
          }
          if (done < count) setTimeout(tick, Math.max(0, t0 + (done * 1000) / rate - performance.now()));
          else {
            churning = false;
            const reply: ChurnReply = { type: "churned", final, ms: performance.now() - t0 };
            process.send?.(reply);
          }
        };
        tick();
        return;
      }
      case "exit":
        void api.close().then(() => process.disconnect());
        return;
    }
  });
  process.on("disconnect", () => void api.close());
  process.send?.({ type: "ready", url: api.url, pods: uids.length, bytes });
}
