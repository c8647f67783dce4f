/**
 * The demo behind `npm start`: devapi seeded with pods, three controller
 * replicas (real client-node informers) each behind its own proxy, and a table
 * per replica after each scene. Every scene checks the invariant that each
 * cache holds exactly its shard and that together they hold every pod.
 */
import type { Writable } from "node:stream";
import { seedPods, startDevApi, type DevApi, type GateMode } from "../devapi/index.ts";
import type { Logger } from "../log.ts";
import { StaticOwnership } from "../proxy/ownership.ts";
import { fnv1a64, formatBound } from "../shard/hash.ts";
import { contains, split, type Range } from "../shard/range.ts";
import { parseResources } from "../shard/spec.ts";
import { startPodReplica, type Replica } from "./replica.ts";

export interface DemoOptions {
  readonly out: Writable;
  readonly logger: Logger;
  readonly pods: number;
  readonly replicas: number;
  readonly signal: AbortSignal;
}

export interface SceneResult {
  readonly scene: string;
  readonly ok: boolean;
  readonly rows: readonly ReplicaRow[];
  readonly total: number;
}

export interface ReplicaRow {
  readonly replica: string;
  readonly ranges: string;
  readonly cached: number;
  readonly expected: number;
  readonly bytesToController: number;
  readonly bytesFromServer: number;
  readonly filteredBy: string;
}

// Namespace names spread over the keyspace, so the demo looks like a cluster.
const NAMESPACES = ["alpha", "beta", "gamma", "delta", "team-a", "team-b"];

function fmtBytes(n: number): string {
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(0)} KiB`;
  return `${n} B`;
}

function fmtRanges(ranges: readonly Range[]): string {
  return ranges.map((r) => `[${formatBound(r.start).slice(0, 6)}…, ${formatBound(r.end).slice(0, 6)}…)`).join(" ");
}

function keyOf(o: { metadata?: { namespace?: string; name?: string; uid?: string } }): string {
  return `${o.metadata?.namespace}/${o.metadata?.name}@${o.metadata?.uid}`;
}

function table(rows: readonly ReplicaRow[]): string {
  const head = ["replica", "owned ranges", "cached", "expected", "bytes to controller", "bytes from server", "filtered by"];
  const cells = rows.map((r) => [r.replica, r.ranges, String(r.cached), String(r.expected), fmtBytes(r.bytesToController), fmtBytes(r.bytesFromServer), r.filteredBy]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] ?? "").length)));
  const line = (c: readonly string[]): string => c.map((x, i) => x.padEnd(widths[i] ?? 0)).join("  ");
  return [line(head), line(widths.map((w) => "-".repeat(w))), ...cells.map(line)].join("\n");
}

async function settle(check: () => boolean, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end && !signal.aborted) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return check();
}

class Demo {
  readonly api: DevApi;
  readonly ranges: Range[][];
  replicas: Replica[] = [];
  readonly #opts: DemoOptions;

  constructor(api: DevApi, opts: DemoOptions) {
    this.api = api;
    this.#opts = opts;
    this.ranges = split(opts.replicas).map((r) => [r]);
  }

  async startReplicas(): Promise<void> {
    const resources = parseResources("pods");
    this.replicas = await Promise.all(
      this.ranges.map((r, i) =>
        startPodReplica({ name: `replica-${i}`, upstreamUrl: this.api.url, resources, ownership: new StaticOwnership(r), logger: this.#opts.logger, token: `demo-controller-${i}` }),
      ),
    );
  }

  async restartReplicas(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.stop()));
    await this.startReplicas();
  }

  expected(i: number): Set<string> {
    const mine = this.ranges[i] ?? [];
    return new Set(this.api.store.list("pods").filter((o) => contains(mine, fnv1a64(o.metadata?.uid ?? ""))).map(keyOf));
  }

  exact(): boolean {
    return this.replicas.every((r, i) => {
      const got = new Set(r.informer.list().map(keyOf));
      const want = this.expected(i);
      return got.size === want.size && [...got].every((k) => want.has(k));
    });
  }

  rows(): ReplicaRow[] {
    return this.replicas.map((r, i) => {
      const s = r.proxy.proxy.stats().get("pods");
      const verdict = s?.lastVerdict;
      return {
        replica: r.name,
        ranges: fmtRanges(this.ranges[i] ?? []),
        cached: r.informer.list().length,
        expected: this.expected(i).size,
        bytesToController: s?.clientBytes ?? 0,
        bytesFromServer: s?.upstreamBytes ?? 0,
        filteredBy: verdict === "confirmed" ? "server (shardInfo)" : verdict === "no" ? "proxy (fallback)" : verdict === "inferred" ? "server (inferred)" : "-",
      };
    });
  }

  async scene(name: string, action: () => Promise<void>): Promise<SceneResult> {
    const out = this.#opts.out;
    out.write(`\n== ${name}\n`);
    await action();
    const ok = await settle(() => this.exact(), 20_000, this.#opts.signal);
    const all = new Set(this.api.store.list("pods").map(keyOf));
    const union = new Set(this.replicas.flatMap((r) => r.informer.list().map(keyOf)));
    const covered = union.size === all.size && [...all].every((k) => union.has(k));
    const rows = this.rows();
    out.write(table(rows) + "\n");
    const total = rows.reduce((n, r) => n + r.bytesToController, 0);
    out.write(
      ok && covered
        ? `invariant holds: every one of ${all.size} pods is cached by exactly the replica that owns it (controllers received ${fmtBytes(total)} in all)\n`
        : `INVARIANT BROKEN: ${ok ? "" : "a cache differs from its shard; "}${covered ? "" : `${all.size - union.size} pods are cached by no replica`}\n`,
    );
    return { scene: name, ok: ok && covered, rows, total: all.size };
  }
}

/** Runs the demo; resolves to whether every invariant held. */
export async function runDemo(opts: DemoOptions): Promise<{ ok: boolean; scenes: SceneResult[] }> {
  const api = await startDevApi({ gate: "on" as GateMode });
  const out = opts.out;
  try {
    seedPods(api, { count: opts.pods, namespaces: NAMESPACES, podBytes: 2048 });
    out.write(`devapi on ${api.url}: ${opts.pods} pods in ${NAMESPACES.length} namespaces; ${opts.replicas} controller replicas, each a client-node informer behind its own shardcar proxy\n`);
    const demo = new Demo(api, opts);
    const scenes: SceneResult[] = [];
    scenes.push(await demo.scene("scene 1: the server's ShardedListAndWatch gate is on — the apiserver filters", () => demo.startReplicas()));
    scenes.push(
      await demo.scene("scene 2: churn — 300 pods created, updated and deleted while the informers watch", async () => {
        for (let i = 0; i < 100; i++) {
          const o = api.store.create("pods", { metadata: { name: `churn-${i}`, namespace: NAMESPACES[i % NAMESPACES.length] ?? "alpha" }, spec: { containers: [{ name: "c", image: "x" }] } });
          api.store.patch("pods", o.metadata?.namespace, o.metadata?.name ?? "", { metadata: { labels: { touched: "yes" } } });
          if (i % 2 === 0) api.store.delete("pods", o.metadata?.namespace, o.metadata?.name ?? "");
        }
        await Promise.resolve();
      }),
    );
    scenes.push(
      await demo.scene("scene 3: the gate is turned off (the server ignores shardSelector) — the proxies filter instead; controllers restart", async () => {
        api.gate = "off";
        await demo.restartReplicas();
      }),
    );
    scenes.push(
      await demo.scene("scene 4: the gate is back on — the server filters again", async () => {
        api.gate = "on";
        await demo.restartReplicas();
      }),
    );
    await Promise.all(demo.replicas.map((r) => r.stop()));
    const ok = scenes.every((s) => s.ok);
    out.write(`\n${ok ? "every invariant held" : "some invariant did NOT hold"}: ${scenes.length} scenes\n`);
    return { ok, scenes };
  } finally {
    await api.close();
  }
}
