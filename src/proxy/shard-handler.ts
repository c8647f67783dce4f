/**
 * The proxy for a controller that shards parents and their owner-keyed
 * children together in ring mode: two {@link ShardProxy} groups behind one
 * handler, each enforcing its own ranges, moved in the order handoff/two-stage-ranges.ts
 * decides (children gain first, parents lose first), so the controller never
 * caches a parent without the children it already has.
 *
 * Without ownership that changes, or without both kinds of resource, there
 * is nothing to order and {@link createShardHandler} returns one plain
 * ShardProxy.
 *
 * The parents' group relists on every range change (no synthetic DELETEs):
 * a narrowing in place is written to the controller's socket but never
 * acknowledged, while its relist ends with the controller watching again,
 * after its cache dropped the parents it lost. Only then may their children
 * leave.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { formatResources } from "../shard/spec.ts";
import { classify, indexResources, type ResourceIndex } from "./request/classify.ts";
import type { Ownership, OwnershipSource } from "../shard/ownership.ts";
import { ShardProxy, type HandoffView, type ResourceStats, type ShardProxyOptions } from "./server.ts";
import { initialStaging, step, type StageGroup, type StagingEvent, type StagingState } from "./handoff/two-stage-ranges.ts";

/** What the listener and the admin endpoint need of a proxy. */
export interface ShardHandler {
  readonly handle: (req: IncomingMessage, res: ServerResponse) => void;
  readonly handleUpgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  stats(): ReadonlyMap<string, Readonly<ResourceStats>>;
  /** What the handoff ledger (or, staged, both groups' ledgers) waits for right now. */
  handoff(): HandoffView;
  delivered(key: string): Record<string, boolean>;
  close(): void;
}

export function createShardHandler(opts: ShardProxyOptions): ShardHandler {
  const dependents = opts.resources.filter((r) => r.key === "owner");
  const owners = opts.resources.filter((r) => r.key !== "owner");
  if (opts.ownership.markApplied === undefined || dependents.length === 0 || owners.length === 0) return new ShardProxy(opts);
  opts.logger.info({ owners: formatResources(owners), dependents: formatResources(dependents) }, "owner-keyed children and their parents move in order: children gain ranges first, parents lose them first (the parents relist at every change)");
  return new StagedShardProxy(opts, owners, dependents);
}

class StagedShardProxy implements ShardHandler {
  readonly #index: ResourceIndex;
  readonly #staging: Staging;
  readonly #owners: ShardProxy;
  readonly #dependents: ShardProxy;

  constructor(opts: ShardProxyOptions, owners: ShardProxyOptions["resources"], dependents: ShardProxyOptions["resources"]) {
    this.#index = indexResources(opts.resources);
    this.#staging = new Staging(opts.ownership);
    this.#owners = new ShardProxy({ ...opts, resources: owners, ownership: this.#staging.view("owners"), syntheticDeletes: false, logger: opts.logger.child({ group: "owners" }) });
    // The leader-election lock is a single object, passed through by the owners' group.
    const { lock, ...rest } = opts;
    void lock;
    this.#dependents = new ShardProxy({ ...rest, resources: dependents, ownership: this.#staging.view("dependents"), logger: opts.logger.child({ group: "dependents" }) });
  }

  /** Sharded requests for an owner-keyed resource go to the dependents' group; everything else (other resources, writes, the lock) to the owners'. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    const cls = classify(req.method ?? "GET", req.url ?? "/", this.#index);
    if (cls.kind !== "passthrough" && cls.resource.key === "owner") this.#dependents.handle(req, res);
    else this.#owners.handle(req, res);
  };

  readonly handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    this.#owners.handleUpgrade(req, socket, head);
  };

  stats(): ReadonlyMap<string, Readonly<ResourceStats>> {
    return new Map([...this.#owners.stats(), ...this.#dependents.stats()]);
  }

  /** The owners' generation and epoch (they move last); what both wait for. */
  handoff(): HandoffView {
    const o = this.#owners.handoff();
    const d = this.#dependents.handoff();
    return { generation: o.generation, epoch: o.epoch, applied: o.applied && d.applied, owed: [...o.owed, ...d.owed], narrowing: [...o.narrowing, ...d.narrowing], held: o.held + d.held, waiting: [...o.waiting, ...d.waiting] };
  }

  delivered(key: string): Record<string, boolean> {
    return { ...this.#owners.delivered(key), ...this.#dependents.delivered(key) };
  }

  close(): void {
    this.#staging.stop();
    this.#owners.close();
    this.#dependents.close();
  }
}

/** The shell of handoff/two-stage-ranges.ts: follows the source, feeds each group its view, and reports back to the source. */
class Staging {
  readonly #source: OwnershipSource;
  readonly #listeners: Record<StageGroup, Set<(next: Ownership, prev: Ownership) => void>> = { owners: new Set(), dependents: new Set() };
  readonly #unsubscribe: () => void;
  #state: StagingState;
  // Events raised while one is handled (a target change from inside a
  // listener) wait their turn.
  readonly #queue: StagingEvent[] = [];
  #busy = false;

  constructor(source: OwnershipSource) {
    this.#source = source;
    this.#state = initialStaging(source.current());
    this.#unsubscribe = source.subscribe((next) => this.#dispatch({ type: "target", ownership: next }));
  }

  view(group: StageGroup): OwnershipSource {
    return {
      current: () => this.#state.views[group],
      subscribe: (listener) => {
        this.#listeners[group].add(listener);
        return () => this.#listeners[group].delete(listener);
      },
      // Never inside the group's own call: it reports from the middle of
      // serving a watch, and the next stage may end that very watch.
      markApplied: (generation) => queueMicrotask(() => this.#dispatch({ type: "applied", group, generation })),
    };
  }

  stop(): void {
    this.#unsubscribe();
  }

  #dispatch(event: StagingEvent): void {
    this.#queue.push(event);
    if (this.#busy) return;
    this.#busy = true;
    try {
      for (let e = this.#queue.shift(); e !== undefined; e = this.#queue.shift()) {
        const prev = this.#state;
        const { state, effects } = step(prev, e);
        this.#state = state;
        for (const fx of effects) {
          if (fx.type === "applied") this.#source.markApplied?.(fx.generation);
          else for (const l of this.#listeners[fx.group]) l(fx.ownership, prev.views[fx.group]);
        }
      }
    } finally {
      this.#busy = false;
    }
  }
}
