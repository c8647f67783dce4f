/**
 * An unmodified controller as the fault tests and the soak run it: a real
 * `@kubernetes/client-node` pod informer (ListWatch + Watch, exactly what
 * `makeInformer` builds) talking to one proxy over verified TLS with its own
 * token, restarted after an error as a controller's informer would be.
 *
 * Differences from `makeInformer`: the watch's inactivity timeout
 * (client-node's `Watch.requestTimeoutMs`, 30 s) can be shortened, so a test
 * of a stalled stream does not wait half a minute; and the LIST calls are
 * counted, so a test can see that a relist followed.
 */
import { ApiException, CoreV1Api, ListWatch, Watch, type V1Pod, type V1PodList } from "@kubernetes/client-node";
import { kubeConfigFor } from "../../src/demo/replica.ts";
import type { Range } from "../../src/shard/range.ts";
import type { ShardKey } from "../../src/shard/selector.ts";
import type { Witness } from "./witness.ts";

export interface ControllerOptions {
  readonly name: string;
  /** The proxy the controller talks to, `https://127.0.0.1:N`. */
  readonly server: string;
  /** PEM the proxy's serving certificate chains to. */
  readonly caPem: string;
  readonly token: string;
  /** Client-side inactivity timeout of each watch; default client-node's 30 s. */
  readonly watchTimeoutMs?: number;
  /** Pause before restarting after an error (a relist refused, the proxy gone); default 500 ms. */
  readonly restartDelayMs?: number;
  /** Every object the informer hands to a handler is checked against `ranges()` (see {@link Witness}). */
  readonly witness?: { readonly witness: Witness; readonly ranges: () => readonly Range[]; readonly key?: ShardKey };
  /** Resolve only once the first LIST and WATCH started (default true); false for a LIST a test stalls. */
  readonly awaitStart?: boolean;
  /**
   * LIST in pages of this many, as client-go's pager does (`limit`, then
   * `continue`), falling back to one full list when a continue token has
   * expired (410), as client-go's reflector does. Default: one unpaged LIST,
   * as `makeInformer`.
   */
  readonly pageSize?: number;
  /** Called before each continue request with the page number (1 = the second page). */
  readonly beforePage?: (page: number) => Promise<void>;
}

export interface Controller {
  readonly name: string;
  readonly informer: ListWatch<V1Pod>;
  /** LISTs the informer made (its first and every relist). */
  readonly lists: () => number;
  /** Errors reported by the informer, in order (each followed by a restart). */
  readonly errors: unknown[];
  /** Paged LISTs whose continue token had expired (410), each followed by a full list. */
  readonly expiredContinues: () => number;
  /** `ns/name@uid` of every pod in the cache now. */
  idents(): Set<string>;
  /** Stops the informer for good. Idempotent. */
  stop(): Promise<void>;
}

export async function startController(opts: ControllerOptions): Promise<Controller> {
  const kc = kubeConfigFor(opts.server, opts.token, opts.caPem);
  const core = kc.makeApiClient(CoreV1Api);
  let lists = 0;
  let expiredContinues = 0;
  const pageSize = opts.pageSize;
  const paged = async (): Promise<V1PodList> => {
    if (pageSize === undefined) return core.listPodForAllNamespaces();
    const first = await core.listPodForAllNamespaces({ limit: pageSize });
    const items = [...first.items];
    let cont = first.metadata?._continue;
    for (let page = 1; cont !== undefined && cont !== ""; page++) {
      await opts.beforePage?.(page);
      try {
        const next = await core.listPodForAllNamespaces({ limit: pageSize, _continue: cont });
        items.push(...next.items);
        cont = next.metadata?._continue;
      } catch (e) {
        if (!(e instanceof ApiException) || e.code !== 410) throw e;
        // client-go's pager: the snapshot is gone; one full, unpaged list instead.
        expiredContinues++;
        return core.listPodForAllNamespaces();
      }
    }
    return { ...first, items, metadata: { ...first.metadata, _continue: undefined } };
  };
  const watch = new Watch(kc);
  // client-node's own inactivity timeout (30 s), private in its typings: set
  // shorter, its behaviour is unchanged (abort, then re-watch at once from
  // the last resourceVersion).
  if (opts.watchTimeoutMs !== undefined) (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = opts.watchTimeoutMs;
  const informer = new ListWatch<V1Pod>(
    "/api/v1/pods",
    watch,
    () => {
      lists++;
      return paged();
    },
    false,
  );
  if (opts.witness !== undefined) opts.witness.witness.watch(opts.name, informer, opts.witness.ranges, opts.witness.key);
  const errors: unknown[] = [];
  let stopped = false;
  informer.on("error", (err: unknown) => {
    // client-node reports its own stop() as an error (the aborted request).
    if (stopped) return;
    errors.push(err);
    setTimeout(() => {
      if (!stopped) informer.start().catch(() => undefined);
    }, opts.restartDelayMs ?? 500).unref();
  });
  const starting = informer.start();
  if (opts.awaitStart === false) starting.catch(() => undefined);
  else await starting;
  let done: Promise<void> | undefined;
  return {
    name: opts.name,
    informer,
    lists: () => lists,
    errors,
    expiredContinues: () => expiredContinues,
    idents: () => new Set(informer.list().map((o) => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}@${o.metadata?.uid ?? ""}`)),
    stop() {
      done ??= (async () => {
        stopped = true;
        await informer.stop();
      })();
      return done;
    },
  };
}
