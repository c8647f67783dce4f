/**
 * The unsharded observer of a parent/child run (test/support/parent-child-
 * controller.ts): real informers straight on the apiserver, no proxy, for the
 * whole run. It records every parent and every child it ever saw, with the
 * resourceVersions of their creation and deletion (one etcd revision, or
 * devapi's one counter, orders both resources), and answers the questions of
 * the co-location tests:
 *
 * - which parents got a second child while they lived: two children created
 *   before the parent's deletion. A child created after its parent was
 *   deleted (a controller reacting to the garbage collection of the first
 *   child before it saw the parent go) belongs to the dead parent and is not
 *   a second child of a live one;
 * - which live parents have no child yet;
 * - whether it saw every child the controllers say they created (so a child
 *   that lived for a moment between two looks cannot escape it).
 *
 * It also plays kube-controller-manager's garbage collector, which devapi and
 * the real-server kit lack: when a parent is deleted, its children are
 * deleted after it (background propagation), and a child created for a
 * parent already gone is deleted when it appears.
 */
import { makeInformer, type KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import { controllerRef, resourceClient, type ResourceClient, type ResourceRef } from "../../src/demo/kube-resources.ts";
import { CREATED_BY } from "../../src/demo/parent-child-controller.ts";

interface Seen {
  /** `ns/name` */
  readonly key: string;
  readonly createdRv: bigint;
  deletedRv?: bigint;
}

interface SeenChild extends Seen {
  readonly ownerUid: string | undefined;
  readonly createdBy: string;
}

export interface Duplicate {
  /** `ns/name@uid` */
  readonly parent: string;
  /** `name (created by replica)` of each child created while it lived, oldest first. */
  readonly children: readonly string[];
}

const rv = (o: KubernetesObject): bigint => BigInt(o.metadata?.resourceVersion ?? "0");

export class FamilyObserver {
  readonly #parents = new Map<string, Seen>();
  readonly #children = new Map<string, SeenChild>();
  readonly #informers: Array<{ start(): Promise<void>; stop(): Promise<void> }> = [];
  readonly #childApi: ResourceClient;
  readonly #gc: boolean;
  #stopped = false;
  #lists = 0;

  constructor(kc: KubeConfig, parent: ResourceRef, child: ResourceRef, opts: { collectGarbage: boolean }) {
    this.#gc = opts.collectGarbage;
    const parentApi = resourceClient(kc, parent);
    this.#childApi = resourceClient(kc, child);
    const counted = (list: ResourceClient["list"]): ResourceClient["list"] => () => {
      this.#lists++;
      return list();
    };
    const parents = makeInformer(kc, parentApi.path, counted(() => parentApi.list()));
    const children = makeInformer(kc, this.#childApi.path, counted(() => this.#childApi.list()));
    parents.on("add", (p) => this.#parentAdded(p));
    parents.on("delete", (p) => this.#parentDeleted(p));
    children.on("add", (c) => this.#childAdded(c));
    children.on("delete", (c) => {
      const seen = this.#children.get(c.metadata?.uid ?? "");
      if (seen !== undefined) seen.deletedRv ??= rv(c);
    });
    for (const informer of [parents, children]) {
      informer.on("error", (err: unknown) => {
        if (this.#stopped || (err instanceof Error && err.name === "AbortError")) return;
        setTimeout(() => {
          if (!this.#stopped) informer.start().catch(() => undefined);
        }, 200).unref();
      });
      this.#informers.push(informer);
    }
  }

  async start(): Promise<void> {
    await Promise.all(this.#informers.map((i) => i.start()));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#informers.map((i) => i.stop()));
  }

  /** Parents that had two children created while they lived. */
  duplicates(): Duplicate[] {
    const alive = new Map<string, SeenChild[]>();
    for (const c of this.#children.values()) {
      const parent = c.ownerUid === undefined ? undefined : this.#parents.get(c.ownerUid);
      if (c.ownerUid === undefined || parent === undefined || (parent.deletedRv !== undefined && c.createdRv > parent.deletedRv)) continue;
      const list = alive.get(c.ownerUid) ?? [];
      list.push(c);
      alive.set(c.ownerUid, list);
    }
    const out: Duplicate[] = [];
    for (const [uid, list] of alive) {
      if (list.length < 2) continue;
      list.sort((a, b) => (a.createdRv < b.createdRv ? -1 : 1));
      out.push({ parent: `${this.#parents.get(uid)?.key ?? ""}@${uid}`, children: list.map((c) => `${c.key} (${c.createdBy})`) });
    }
    return out;
  }

  /** Live parents (`ns/name@uid`) without a live child. */
  childless(): string[] {
    const have = new Set<string>();
    for (const c of this.#children.values()) if (c.deletedRv === undefined && c.ownerUid !== undefined) have.add(c.ownerUid);
    return [...this.#parents].filter(([uid, p]) => p.deletedRv === undefined && !have.has(uid)).map(([uid, p]) => `${p.key}@${uid}`);
  }

  /** Of these children (`ns/name@uid`), those it never saw. */
  unseen(children: Iterable<string>): string[] {
    return [...children].filter((id) => !this.#children.has(id.slice(id.lastIndexOf("@") + 1)));
  }

  /** Parents and children seen so far, and the LISTs its informers made (more than 2: it relisted, and may have missed a short-lived object). */
  counts(): { parents: number; children: number; lists: number } {
    return { parents: this.#parents.size, children: this.#children.size, lists: this.#lists };
  }

  #parentAdded(p: KubernetesObject): void {
    const uid = p.metadata?.uid ?? "";
    if (!this.#parents.has(uid)) this.#parents.set(uid, { key: `${p.metadata?.namespace ?? ""}/${p.metadata?.name ?? ""}`, createdRv: rv(p) });
  }

  #parentDeleted(p: KubernetesObject): void {
    const uid = p.metadata?.uid ?? "";
    const seen = this.#parents.get(uid);
    if (seen === undefined) return;
    seen.deletedRv ??= rv(p);
    if (!this.#gc) return;
    for (const c of this.#children.values()) if (c.ownerUid === uid && c.deletedRv === undefined) this.#collect(c.key);
  }

  #childAdded(c: KubernetesObject): void {
    const uid = c.metadata?.uid ?? "";
    if (this.#children.has(uid)) return;
    const ownerUid = controllerRef(c)?.uid;
    const key = `${c.metadata?.namespace ?? ""}/${c.metadata?.name ?? ""}`;
    this.#children.set(uid, { key, createdRv: rv(c), ownerUid, createdBy: c.metadata?.annotations?.[CREATED_BY] ?? "" });
    const owner = ownerUid === undefined ? undefined : this.#parents.get(ownerUid);
    if (this.#gc && owner?.deletedRv !== undefined) this.#collect(key);
  }

  #collect(key: string): void {
    const slash = key.indexOf("/");
    this.#childApi.delete(key.slice(0, slash), key.slice(slash + 1)).catch(() => undefined);
  }
}
