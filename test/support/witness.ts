/**
 * Records every object a controller was ever handed, not only what its cache
 * holds at the end: a proxy that lets an out-of-range object through for a
 * moment (a half-filtered relist, a stream resumed unfiltered after a fault)
 * leaves no trace in a final cache the next relist cleaned, but the
 * controller already reconciled it. Each object is checked against the
 * shard's ranges the moment an informer's add, update or delete handler
 * receives it.
 */
import type { Informer, KubernetesObject } from "@kubernetes/client-node";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, type Range } from "../../src/shard/range.ts";
import type { ShardKey } from "../../src/shard/selector.ts";

export interface Sighting {
  readonly informer: string;
  readonly verb: "add" | "update" | "delete";
  /** `ns/name@uid` */
  readonly object: string;
}

export class Witness {
  /** Handler calls seen, per informer. */
  readonly handled = new Map<string, number>();
  /** Every handler call whose object was outside its informer's ranges at that moment. */
  readonly outOfRange: Sighting[] = [];

  /**
   * Watches `informer`'s handlers from now on. `ranges` is read at each call
   * (a ring member's ranges change), `key` says what the shard hashes.
   */
  watch(name: string, informer: Informer<KubernetesObject>, ranges: () => readonly Range[], key: ShardKey = "uid"): void {
    this.handled.set(name, this.handled.get(name) ?? 0);
    for (const verb of ["add", "update", "delete"] as const) {
      informer.on(verb, (o: KubernetesObject) => {
        this.handled.set(name, (this.handled.get(name) ?? 0) + 1);
        const meta = o.metadata ?? {};
        const value = (key === "uid" ? meta.uid : meta.namespace) ?? "";
        if (!contains(ranges(), fnv1a64(value))) this.outOfRange.push({ informer: name, verb, object: `${meta.namespace ?? ""}/${meta.name ?? ""}@${meta.uid ?? ""}` });
      });
    }
  }

  /** Handler calls seen by all informers together. */
  total(): number {
    let n = 0;
    for (const v of this.handled.values()) n += v;
    return n;
  }
}
