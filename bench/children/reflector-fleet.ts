/**
 * Many controllers' pod caches in one process, for S1 (bench/macro/s1-ring-scale.ts),
 * where 64 client-node informer processes (each ~100 MB and a core-second to
 * start) do not fit next to 64 proxies on a 2-core machine.
 *
 * Each "controller" is client-node's own reflector, `ListWatch` with its
 * `Watch` (the code every client-node informer runs: the LIST, the WATCH
 * from the list's resourceVersion, relist on 410, the 1 s → 30 s reconnect
 * delay, the 30 s inactivity timeout), over verified TLS to its own shardcar
 * proxy with its own token. Two things are lighter than an informer: the
 * LIST is read as a stream through shardcar's JSON list tap
 * (src/proxy/scan/json-tap.ts) and only each pod's name, namespace and uid
 * are kept (a cold start hands the first member every pod, 800 MB at full
 * size, more than one JSON string can hold), and watch events are not turned
 * into typed objects (client-node's `Watch` parses each line as plain JSON).
 * The proxy cannot tell these clients from informers: same paths, queries,
 * headers and order of requests.
 *
 * Messages (IPC):
 * - `{ type: "add", name, server, token }` → `{ type: "added", name }`: the
 *   reflector starts at once (its proxy holds the LIST until it has ranges);
 * - `{ type: "remove", name }` → `{ type: "removed", name }`;
 * - `{ type: "exact", slotCount, members: { name: slots[] }, perSlot }` →
 *   `{ type: "exact", wrong: [{ name, objects, outside, expected }] }`: each
 *   cache against its member's slots, `perSlot` the store's pods per slot;
 * - `{ type: "lists", since }` → `{ type: "lists", lists: ListRecord[] }`:
 *   every LIST sent or still running at or after `since` (epoch ms);
 * - `{ type: "inventory", uids }` → `{ type: "inventory" }`: every pod in the
 *   store, for `uncovered`;
 * - `{ type: "uncovered" }` → `{ type: "uncovered", pods }`: how many of the
 *   inventory's pods are in no reflector's cache right now (S5);
 * - `{ type: "probe", server, token, selector }` → `{ type: "probe", ms, items }`:
 *   one LIST straight from devapi with that shard selector, timed.
 */
import { Agent, get } from "node:https";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { KubeConfig, ListWatch, Watch, type KubernetesObject } from "@kubernetes/client-node";
import { createJsonListTap } from "../../src/proxy/scan/json-tap.ts";
import { slotOfValue } from "../../src/shard/slots.ts";

export interface ListRecord {
  readonly name: string;
  /** Epoch ms: when the client sent the LIST (its proxy may hold it until the member has ranges). */
  readonly sent: number;
  /** When the answer's headers arrived: the server is serving it from here on. */
  readonly start: number;
  readonly end: number;
  readonly items: number;
  readonly ok: boolean;
}

interface Pod extends KubernetesObject {
  metadata: { name: string; namespace: string; uid: string };
}

const now = (): number => performance.timeOrigin + performance.now();

/** GET a pod list as a stream; keeps each item's identity only. Rejects with `statusCode` like client-node's list calls. */
function streamList(url: string, agent: Agent, token: string, onHeaders: () => void = () => {}): Promise<{ metadata: { resourceVersion: string }; items: Pod[] }> {
  return new Promise((resolve, reject) => {
    const req = get(url, { agent, headers: { accept: "application/json", authorization: `Bearer ${token}` } }, (res) => {
      onHeaders();
      if (res.statusCode !== 200) {
        res.resume();
        reject(Object.assign(new Error(`LIST ${url}: HTTP ${res.statusCode}`), { statusCode: res.statusCode }));
        return;
      }
      const items: Pod[] = [];
      let rv = "";
      let unreadable: string | undefined;
      const tap = createJsonListTap(
        {
          upsert: (o) => void items.push({ metadata: { name: o.name, namespace: o.namespace, uid: o.uid } }),
          remove: () => {},
          typeMeta: () => {},
          resourceVersion: (v) => (rv = v),
          continueToken: () => {},
          unreadable: (why) => (unreadable = why),
        },
        "uid",
      );
      res.on("data", (chunk: Buffer) => tap.write(chunk));
      res.on("error", reject);
      res.on("end", () => (unreadable === undefined ? resolve({ metadata: { resourceVersion: rv }, items }) : reject(new Error(`LIST ${url}: ${unreadable}`))));
    });
    req.on("error", reject);
  });
}

class Reflector {
  readonly name: string;
  readonly #lw: ListWatch<Pod>;
  #stopped = false;

  constructor(name: string, server: string, caPem: string, token: string, lists: ListRecord[]) {
    this.name = name;
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server, caData: Buffer.from(caPem).toString("base64"), skipTLSVerify: false }],
      users: [{ name: "u", token }],
      contexts: [{ name: "ctx", cluster: "c", user: "u" }],
      currentContext: "ctx",
    });
    const agent = new Agent({ keepAlive: true, ca: caPem });
    const listFn = async (): Promise<{ metadata: { resourceVersion: string }; items: Pod[] }> => {
      const sent = now();
      let start = Number.NaN;
      try {
        const l = await streamList(`${server}/api/v1/pods`, agent, token, () => (start = now()));
        lists.push({ name, sent, start, end: now(), items: l.items.length, ok: true });
        return l;
      } catch (e) {
        lists.push({ name, sent, start, end: now(), items: 0, ok: false });
        throw e;
      }
    };
    this.#lw = new ListWatch<Pod>("/api/v1/pods", new Watch(kc), listFn, false);
    // A controller restarts its informer after an error (controller-child.ts does the same).
    this.#lw.on("error", () => {
      if (!this.#stopped) setTimeout(() => void this.#lw.start().catch(() => undefined), 500).unref();
    });
    void this.#lw.start().catch(() => undefined);
  }

  objects(): readonly Pod[] {
    return this.#lw.list();
  }

  stop(): void {
    this.#stopped = true;
    void this.#lw.stop();
  }
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { ca: { type: "string" } } });
  const caPem = readFileSync(values.ca ?? "", "utf8");
  const reflectors = new Map<string, Reflector>();
  const lists: ListRecord[] = [];
  // uid → slot, computed once per uid (slotOfValue hashes with BigInt).
  const slotOf = new Map<string, number>();
  const slot = (uid: string, slotCount: number): number => {
    let s = slotOf.get(uid);
    if (s === undefined) slotOf.set(uid, (s = slotOfValue(uid, slotCount)));
    return s;
  };

  let inventory: readonly string[] = [];

  process.on("message", (raw: unknown) => {
    const m = raw as { type: string; name?: string; server?: string; token?: string; since?: number; slotCount?: number; members?: Record<string, number[]>; perSlot?: number[]; selector?: string; uids?: string[] };
    switch (m.type) {
      case "inventory":
        inventory = m.uids ?? [];
        process.send?.({ type: "inventory" });
        return;
      case "uncovered": {
        const held = new Set<string>();
        for (const r of reflectors.values()) for (const o of r.objects()) held.add(o.metadata.uid);
        let pods = 0;
        for (const u of inventory) if (!held.has(u)) pods++;
        process.send?.({ type: "uncovered", pods });
        return;
      }
      case "add": {
        const name = m.name ?? "";
        reflectors.get(name)?.stop();
        reflectors.set(name, new Reflector(name, m.server ?? "", caPem, m.token ?? `bench-${name}`, lists));
        process.send?.({ type: "added", name });
        return;
      }
      case "remove":
        reflectors.get(m.name ?? "")?.stop();
        reflectors.delete(m.name ?? "");
        process.send?.({ type: "removed", name: m.name });
        return;
      case "exact": {
        const slotCount = m.slotCount ?? 256;
        const perSlot = m.perSlot ?? [];
        const wrong: Array<{ name: string; objects: number; outside: number; expected: number }> = [];
        for (const [name, slots] of Object.entries(m.members ?? {})) {
          const mine = new Set(slots);
          const expected = slots.reduce((n, s) => n + (perSlot[s] ?? 0), 0);
          const objs = reflectors.get(name)?.objects() ?? [];
          const outside = objs.filter((o) => !mine.has(slot(o.metadata.uid, slotCount))).length;
          if (outside !== 0 || objs.length !== expected) wrong.push({ name, objects: objs.length, outside, expected });
        }
        process.send?.({ type: "exact", wrong });
        return;
      }
      case "lists":
        process.send?.({ type: "lists", lists: lists.filter((l) => l.sent >= (m.since ?? 0) || l.end >= (m.since ?? 0)) });
        return;
      case "probe": {
        const agent = new Agent({ keepAlive: false, ca: caPem });
        const t0 = performance.now();
        // No selector: the full list, what one unsharded replica pays to start.
        const url = `${m.server ?? ""}/api/v1/pods${m.selector ? `?shardSelector=${encodeURIComponent(m.selector)}` : ""}`;
        streamList(url, agent, m.token ?? "bench-probe").then(
          (l) => process.send?.({ type: "probe", ms: performance.now() - t0, items: l.items.length }),
          (e: unknown) => process.send?.({ type: "probe", ms: Number.NaN, items: 0, error: String(e) }),
        );
        return;
      }
    }
  });
  process.on("disconnect", () => {
    for (const r of reflectors.values()) r.stop();
    process.exit(0);
  });
  process.send?.({ type: "ready" });
}
