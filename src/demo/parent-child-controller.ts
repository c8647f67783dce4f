/**
 * An unmodified parent/child controller that knows nothing of sharding, as
 * real controllers are written (controller-runtime's `For(parent).Owns(child)`,
 * client-go's sample-controller): a real `@kubernetes/client-node` informer on
 * the parents (a custom resource) and one on their children (ConfigMaps or a
 * second custom resource, with a controller ownerReference to the parent), a
 * work queue of parent keys fed by both (a child's events enqueue its owner),
 * optional periodic resync, and a reconcile that creates a child with
 * `generateName` whenever its cache shows the parent without one.
 *
 * It avoids duplicates by its cache alone: no GET or LIST before a create,
 * no expectations, no deterministic child names. Whatever its informers
 * show is what it acts on, so a cache that holds a parent without the
 * children it already has makes it create another: exactly the failure the
 * co-location tests look for (test/support/colocation.ts), and what the
 * demo's last scene shows does not happen when children are keyed by
 * `owner`.
 */
import { makeInformer, type Informer, type KubeConfig, type KubernetesObject, type ObjectCache } from "@kubernetes/client-node";
import { apiVersionOf, controllerRef, ident, resourceClient, type ResourceClient, type ResourceRef } from "./kube-resources.ts";
import { WorkQueue } from "./work-queue.ts";

/** The annotation each created child carries: which replica created it (for diagnosis only; the controller never reads it back). */
export const CREATED_BY = "demo.shardcar.io/created-by";

export interface ParentChildControllerOptions {
  /** The replica's name, written into each child it creates ({@link CREATED_BY}). */
  readonly identity: string;
  /** Where the controller's requests go: its shardcar proxy, or the apiserver itself. */
  readonly kubeConfig: KubeConfig;
  /** The parents (a custom resource, namespaced) and their children (namespaced, in the parent's namespace). */
  readonly parent: ResourceRef;
  readonly child: ResourceRef;
  /** Re-enqueue every cached parent this often, as client-go's resync does; default never (controller-runtime's 10 h). */
  readonly resyncMs?: number;
  /** Concurrent reconciles; default 2, as client-go's sample-controller. */
  readonly workers?: number;
}

/** One child this controller created, and what made it do so. */
export interface CreatedChild {
  readonly parent: string;
  readonly parentUid: string;
  /** `ns/name@uid` */
  readonly child: string;
  /** The create's resourceVersion (one counter orders it against every other write). */
  readonly createdRv: string;
  /** The event that last enqueued the parent before the reconcile that created it. */
  readonly trigger: string;
}

type Cache = Informer<KubernetesObject> & ObjectCache<KubernetesObject>;

export class ParentChildController {
  readonly identity: string;
  readonly created: CreatedChild[] = [];
  readonly stats = { reconciles: 0, createErrors: 0 };
  readonly #o: ParentChildControllerOptions;
  readonly #childApi: ResourceClient;
  readonly #parents: Cache;
  readonly #children: Cache;
  readonly #queue = new WorkQueue();
  readonly #triggers = new Map<string, string>();
  #stopped = false;
  #resync: NodeJS.Timeout | undefined;
  #workers: Promise<void>[] = [];
  #synced = false;
  readonly #listed = new Set<"parents" | "children">();

  constructor(o: ParentChildControllerOptions) {
    this.#o = o;
    this.identity = o.identity;
    const parentApi = resourceClient(o.kubeConfig, o.parent);
    this.#childApi = resourceClient(o.kubeConfig, o.child);
    // HasSynced: an informer whose first LIST failed has started, but holds nothing yet.
    const listed = <T>(which: "parents" | "children", list: () => Promise<T>) => async (): Promise<T> => {
      const r = await list();
      this.#listed.add(which);
      return r;
    };
    this.#parents = makeInformer(o.kubeConfig, parentApi.path, listed("parents", () => parentApi.list()));
    this.#children = makeInformer(o.kubeConfig, this.#childApi.path, listed("children", () => this.#childApi.list()));
    const key = (o: KubernetesObject): string => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;
    this.#parents.on("add", (p) => this.#enqueue(key(p), "parent added"));
    this.#parents.on("update", (p) => this.#enqueue(key(p), "parent updated"));
    const owner = (verb: string) => (c: KubernetesObject) => {
      const ref = controllerRef(c);
      if (ref?.kind === o.parent.kind) this.#enqueue(`${c.metadata?.namespace ?? ""}/${ref.name}`, `child ${c.metadata?.name ?? ""} ${verb}`);
    };
    this.#children.on("add", owner("added"));
    this.#children.on("update", owner("updated"));
    this.#children.on("delete", owner("deleted"));
    for (const informer of [this.#parents, this.#children]) {
      // client-node's informer stops on an error (a relist refused, a
      // connection reset); restart it the way a controller's would be. Its own
      // stop() is reported as an AbortError.
      informer.on("error", (err: unknown) => {
        if (this.#stopped || (err instanceof Error && err.name === "AbortError")) return;
        setTimeout(() => {
          if (!this.#stopped) informer.start().catch(() => undefined);
        }, 200).unref();
      });
    }
  }

  /**
   * Starts both informers and, once both have listed (controller-runtime's
   * WaitForCacheSync), the workers and the resync. Resolves when they run;
   * a proxy holding the first LISTs (ring mode) delays that.
   */
  async start(): Promise<void> {
    await Promise.all([this.#parents.start(), this.#children.start()]);
    // A failed first LIST is retried by the error handler: wait for both.
    // The flag is set just before the informer fills its cache from the list,
    // in the same chain of microtasks, so a timer tick later it is filled.
    while (this.#listed.size < 2 && !this.#stopped) await new Promise((r) => setTimeout(r, 20));
    if (this.#stopped) return;
    this.#synced = true;
    // The queue already holds every parent: each was an `add` of the first LIST.
    this.#workers = Array.from({ length: this.#o.workers ?? 2 }, () => this.#work());
    if (this.#o.resyncMs !== undefined) {
      this.#resync = setInterval(() => {
        for (const p of this.#parents.list()) this.#enqueue(`${p.metadata?.namespace ?? ""}/${p.metadata?.name ?? ""}`, "resync");
      }, this.#o.resyncMs);
    }
  }

  get synced(): boolean {
    return this.#synced;
  }

  /** `ns/name@uid` of every cached parent. */
  parents(): Set<string> {
    return new Set(this.#parents.list().map(ident));
  }

  /** `ns/name@uid` of every cached child. */
  children(): Set<string> {
    return new Set(this.#children.list().map(ident));
  }

  /** Keys waiting for a worker. */
  get queued(): number {
    return this.#queue.length;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#resync !== undefined) clearInterval(this.#resync);
    this.#queue.shutDown();
    await Promise.all([this.#parents.stop(), this.#children.stop()]);
    await Promise.all(this.#workers);
  }

  #enqueue(key: string, trigger: string): void {
    this.#triggers.set(key, trigger);
    this.#queue.add(key);
  }

  async #work(): Promise<void> {
    for (;;) {
      const key = await this.#queue.get();
      if (key === undefined) return;
      try {
        await this.#reconcile(key);
        this.#queue.forget(key);
      } catch {
        this.stats.createErrors++;
        if (!this.#stopped) this.#queue.addRateLimited(key);
      } finally {
        this.#queue.done(key);
      }
    }
  }

  async #reconcile(key: string): Promise<void> {
    this.stats.reconciles++;
    const slash = key.indexOf("/");
    const namespace = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const parent = this.#parents.get(name, namespace);
    const uid = parent?.metadata?.uid;
    if (parent === undefined || uid === undefined || parent.metadata?.deletionTimestamp !== undefined) return;
    if (this.#children.list(namespace).some((c) => controllerRef(c)?.uid === uid)) return;
    const trigger = this.#triggers.get(key) ?? "";
    const child = await this.#childApi.create(namespace, {
      apiVersion: apiVersionOf(this.#o.child),
      kind: this.#o.child.kind,
      metadata: {
        generateName: `${name}-`,
        namespace,
        ownerReferences: [{ apiVersion: apiVersionOf(this.#o.parent), kind: this.#o.parent.kind, name, uid, controller: true, blockOwnerDeletion: true }],
        annotations: { [CREATED_BY]: this.identity },
      },
    });
    this.created.push({ parent: key, parentUid: uid, child: ident(child), createdRv: child.metadata?.resourceVersion ?? "", trigger });
  }
}
