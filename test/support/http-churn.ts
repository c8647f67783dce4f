/**
 * Steady pod churn over HTTP, against devapi or a real apiserver alike:
 * creates, label patches and deletes of its own pods, and label patches of
 * pods it did not create (so an event that wrongly reaches a cache stays
 * there), at about `ratePerSec`, paced by the clock rather than by counting
 * timer ticks (a loaded machine fires timers late). Writes that fail while a
 * fault is on (the server restarting) are counted, not thrown: the churn goes
 * on when the server is back. Deterministic choices for a seed.
 */
import type { Test } from "tap";
import { callJson, HttpError, listAll, type KubeObject, type Target } from "./http.ts";
import { clusterClock } from "./wait.ts";

export interface ChurnOptions {
  readonly ratePerSec: number;
  readonly namespaces: readonly string[];
  /** Name prefix of the pods it creates; unique per run by default. */
  readonly prefix?: string;
  readonly seed?: number;
  /** Writes in flight at most (default 8); a slow server slows the churn rather than piling requests up. */
  readonly concurrency?: number;
  /** Delete what it created when stopped (default true). */
  readonly cleanUp?: boolean;
}

export interface ChurnResult {
  readonly ops: number;
  /** Writes that failed for another reason than a 404/409 race with the churn's own writes. */
  readonly errors: number;
}

export interface Churn {
  /** Writes done so far. */
  ops(): number;
  /** Stops, waits for writes in flight, and (by default) deletes the pods it created. */
  stop(): Promise<ChurnResult>;
}

function pod(name: string, namespace: string, i: number): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, labels: { app: "churn", index: String(i) } },
    spec: { containers: [{ name: "main", image: "registry.invalid/app:1" }] },
  };
}

/** Stopped by `stop()` or, at the latest, at `t`'s teardown (a scenario that fails halfway must not leave it writing). */
export async function startHttpChurn(t: Pick<Test, "teardown">, target: Target, opts: ChurnOptions): Promise<Churn> {
  let seed = opts.seed ?? 1;
  const rnd = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  const prefix = opts.prefix ?? `churn-${Date.now().toString(36)}`;
  // Pods that existed before: patched, never deleted.
  const others = (await listAll(target, "/api/v1/pods")).items.map((o) => [o.metadata?.namespace ?? "", o.metadata?.name ?? ""] as const).filter(([, n]) => !n.startsWith(prefix));
  const live: Array<[string, string]> = [];
  let n = 0;
  let ops = 0;
  let errors = 0;
  let inFlight = 0;
  const pending = new Set<Promise<void>>();
  const limit = opts.concurrency ?? 8;
  const patch = { metadata: { labels: { touched: "" } } };

  const one = async (): Promise<void> => {
    const choice = rnd() % 4;
    try {
      if (choice === 3 && others.length > 0) {
        const [ns, name] = others[rnd() % others.length] as readonly [string, string];
        patch.metadata.labels.touched = String(ops);
        await callJson(target, "PATCH", `/api/v1/namespaces/${ns}/pods/${name}`, patch, "application/merge-patch+json");
      } else if (choice === 0 || live.length < 4) {
        const ns = opts.namespaces[rnd() % opts.namespaces.length] ?? "default";
        const name = `${prefix}-${n++}`;
        await callJson(target, "POST", `/api/v1/namespaces/${ns}/pods`, pod(name, ns, n));
        live.push([ns, name]);
      } else {
        const i = rnd() % live.length;
        const [ns, name] = live[i] as [string, string];
        if (choice === 1) {
          patch.metadata.labels.touched = String(ops);
          await callJson(target, "PATCH", `/api/v1/namespaces/${ns}/pods/${name}`, patch, "application/merge-patch+json");
        } else {
          live[i] = live[live.length - 1] as [string, string];
          live.pop();
          await callJson(target, "DELETE", `/api/v1/namespaces/${ns}/pods/${name}`);
        }
      }
    } catch (e) {
      if (!(e instanceof HttpError) || (e.status !== 404 && e.status !== 409)) errors++;
    }
  };

  // Paced on the cluster clock, as startChurn (test/support/cluster.ts): the
  // proxies and controllers under test share this process.
  const t0 = clusterClock.now();
  let slots = 0;
  const timer = setInterval(() => {
    const due = Math.floor(((clusterClock.now() - t0) * opts.ratePerSec) / 1000) - slots;
    for (let k = 0; k < due; k++) {
      slots++;
      // A slot missed while the server is slow is skipped, not made up in a burst later.
      if (inFlight >= limit) continue;
      ops++;
      inFlight++;
      const p = one().finally(() => {
        inFlight--;
        pending.delete(p);
      });
      pending.add(p);
    }
  }, 20);
  t.teardown(() => clearInterval(timer));

  return {
    ops: () => ops,
    async stop() {
      clearInterval(timer);
      await Promise.all([...pending]);
      if (opts.cleanUp !== false) {
        for (const [ns, name] of live.splice(0)) {
          await callJson(target, "DELETE", `/api/v1/namespaces/${ns}/pods/${name}`).catch(() => {
            errors++;
          });
        }
      }
      return { ops, errors };
    },
  };
}
