/**
 * Test harness: a devapi plus N replicas (informer behind proxy), a churn
 * driver, and the expected shard contents computed independently from the
 * store by hashing each object.
 */
import type { Test } from "tap";
import { startDevApi, seedPods, type DevApi, type GateMode, type KubeObject } from "../../src/devapi/index.ts";
import { startPodReplica, type Replica } from "../../src/demo/replica.ts";
import { silentLogger } from "../../src/log.ts";
import { StaticOwnership, type OwnershipSource } from "../../src/shard/ownership.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, split, type Range } from "../../src/shard/range.ts";
import type { ShardKey } from "../../src/shard/selector.ts";
import { parseResources } from "../../src/shard/spec.ts";
import { clusterClock } from "./wait.ts";

export interface Cluster {
  readonly api: DevApi;
  readonly replicas: Replica[];
  readonly ranges: Range[][];
  stop(): Promise<void>;
}

export async function startCluster(opts: { gate: GateMode; replicas: number; pods: number; namespaces: readonly string[]; key?: ShardKey; podBytes?: number; ownership?: (i: number, ranges: Range[]) => OwnershipSource }): Promise<Cluster> {
  const api = await startDevApi({ gate: opts.gate });
  seedPods(api, { count: opts.pods, namespaces: opts.namespaces, ...(opts.podBytes === undefined ? {} : { podBytes: opts.podBytes }) });
  const key = opts.key ?? "uid";
  const resources = parseResources(key === "uid" ? "pods" : "pods=namespace");
  const ranges = split(opts.replicas).map((r) => [r]);
  const replicas: Replica[] = [];
  for (let i = 0; i < opts.replicas; i++) {
    const r = ranges[i] as Range[];
    replicas.push(
      await startPodReplica({
        name: `r${i}`,
        upstreamUrl: api.url,
        resources,
        ownership: opts.ownership?.(i, r) ?? new StaticOwnership(r),
        logger: silentLogger(),
        token: `controller-token-${i}`,
      }),
    );
  }
  return {
    api,
    replicas,
    ranges,
    async stop() {
      await Promise.all(replicas.map((r) => r.stop()));
      await api.close();
    },
  };
}

/** The key value an object hashes on. */
export function keyValue(obj: KubeObject, key: ShardKey): string {
  return (key === "uid" ? obj.metadata?.uid : obj.metadata?.namespace) ?? "";
}

/** `ns/name@uid` of every pod in the store whose key hashes into `ranges`. */
export function expectedShard(api: DevApi, ranges: readonly Range[], key: ShardKey): Set<string> {
  return new Set(
    api.store
      .list("pods")
      .filter((o) => contains(ranges, fnv1a64(keyValue(o, key))))
      .map((o) => `${o.metadata?.namespace}/${o.metadata?.name}@${o.metadata?.uid}`),
  );
}

export function cacheContents(replica: Replica): Set<string> {
  return new Set(replica.informer.list().map((o) => `${o.metadata?.namespace}/${o.metadata?.name}@${o.metadata?.uid}`));
}

export interface Churn {
  /** The writes made so far. */
  ops(): number;
  /** Resolves once `writes` writes were made in all (count them, not seconds: a loaded machine makes fewer per second). */
  reached(writes: number): Promise<void>;
  /** Stops writing; resolves with the number of writes made. */
  stop(): Promise<number>;
}

/**
 * Creates, updates and deletes pods through the store at about `ratePerSec`
 * until `stop()`, or `t`'s teardown: a test that fails halfway must not
 * leave a timer writing, which keeps its process alive until tap's timeout
 * and reports a hang instead of the failure. Deterministic for a given seed.
 */
export function startChurn(t: Pick<Test, "teardown">, api: DevApi, opts: { ratePerSec: number; namespaces: readonly string[]; seed?: number; prefix?: string }): Churn {
  let seed = opts.seed ?? 1;
  const rnd = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  let n = 0;
  let ops = 0;
  // A local index of live pods: listing the store per write would dominate.
  const live: Array<[string | undefined, string]> = api.store.list("pods").map((o) => [o.metadata?.namespace, o.metadata?.name ?? ""]);
  const tick = 20;
  const waiting: Array<{ writes: number; done: () => void }> = [];
  // Paced by the clock, not by the timer: on a loaded machine a 20 ms timer
  // fires late, and counting ticks would quietly halve the rate. The
  // cluster's clock (test/support/quiet-clock.ts), as the ring runs on: a
  // process kept from running slows the cluster's writes with its members,
  // instead of piling a wall-clock rate of writes onto each handoff.
  const t0 = clusterClock.now();
  const timer = setInterval(() => {
    const due = Math.floor(((clusterClock.now() - t0) * opts.ratePerSec) / 1000) - ops;
    for (let k = 0; k < due; k++) {
      const choice = rnd() % 3;
      ops++;
      if (choice === 0 || live.length === 0) {
        const o = api.store.create("pods", { metadata: { name: `${opts.prefix ?? "churn"}-${n++}`, namespace: opts.namespaces[rnd() % opts.namespaces.length] ?? "default", labels: { app: "churn" } }, spec: { containers: [{ name: "c", image: "x" }] } });
        live.push([o.metadata?.namespace, o.metadata?.name ?? ""]);
      } else {
        const i = rnd() % live.length;
        const [ns, name] = live[i] as [string | undefined, string];
        if (choice === 1) api.store.patch("pods", ns, name, { metadata: { labels: { touched: String(ops) } } });
        else {
          api.store.delete("pods", ns, name);
          live[i] = live[live.length - 1] as [string | undefined, string];
          live.pop();
        }
      }
    }
    for (const w of waiting.filter((x) => ops >= x.writes)) {
      waiting.splice(waiting.indexOf(w), 1);
      w.done();
    }
  }, tick);
  t.teardown(() => clearInterval(timer));
  return {
    ops: () => ops,
    reached(writes) {
      return ops >= writes ? Promise.resolve() : new Promise((done) => waiting.push({ writes, done }));
    },
    stop() {
      clearInterval(timer);
      return Promise.resolve(ops);
    },
  };
}

export { eventually } from "./wait.ts";
