/**
 * What the ring's proxies last said about the handoff, kept in memory so that
 * a wait that never ends can say what it was waiting for.
 *
 * A ring test that hangs ends in `settled()`: the leader waits for a member
 * to report a generation applied, the member waits for its proxy, and the
 * proxy waits for a cache lineage to relist. Only the proxy's log says which
 * lineage it owes (its "owned ranges changed … relisting" line) and when it
 * stopped owing ("every watched resource relisted"), so every ring logger
 * feeds this record (test/ring/harness.ts ringTestLog) at info level, cheap
 * since those lines come once per range change.
 */
import { clusterClock } from "../support/wait.ts";

export interface ProxyHandoff {
  /** The last range change the proxy enforced, and the lineages it then owed. */
  readonly changed?: { readonly generation: number; readonly epoch: number; readonly relisting: readonly string[]; readonly narrowed: number; readonly at: number };
  /** The last generation it reported applied. */
  readonly applied?: { readonly generation: number; readonly at: number };
}

const byReplica = new Map<string, ProxyHandoff>();

/** A pino destination: parses each line and keeps the proxies' handoff lines by replica. */
export const handoffLog = {
  write(line: string): void {
    let j: { replica?: unknown; msg?: unknown; generation?: unknown; epoch?: unknown; relisting?: unknown; narrowed?: unknown };
    try {
      j = JSON.parse(line) as typeof j;
    } catch {
      return;
    }
    if (typeof j.replica !== "string" || typeof j.generation !== "number") return;
    const was = byReplica.get(j.replica) ?? {};
    const at = clusterClock.now();
    if (j.msg === "owned ranges changed") {
      const relisting = Array.isArray(j.relisting) ? j.relisting.map(readableLineage) : [];
      byReplica.set(j.replica, { ...was, changed: { generation: j.generation, epoch: Number(j.epoch), relisting, narrowed: Number(j.narrowed), at } });
    } else if (j.msg === "every watched resource relisted under the new ranges") {
      byReplica.set(j.replica, { ...was, applied: { generation: j.generation, at } });
    }
  },
};

/** A lineage key (src/proxy/handoff/lineage.ts lineageKey: a JSON array of path and selectors) as `path labelSelector=…`. */
function readableLineage(key: unknown): string {
  try {
    const [path, labels, fields, as] = JSON.parse(String(key)) as string[];
    return [path, labels && `labelSelector=${labels}`, fields && `fieldSelector=${fields}`, as && `as=${as}`].filter(Boolean).join(" ");
  } catch {
    return String(key);
  }
}

/** Forgets a replica (a new ring reuses its name). */
export function forgetReplica(name: string): void {
  byReplica.delete(name);
}

/** One line: the proxy's last range change, what it owed then, and the last generation it reported applied. */
export function describeProxyHandoff(name: string): string {
  const h = byReplica.get(name);
  if (h === undefined) return "proxy: no range change logged";
  const now = clusterClock.now();
  const ago = (at: number): string => `${Math.round(now - at)} ms ago`;
  const c = h.changed;
  const changed =
    c === undefined
      ? "no range change logged"
      : `enforces g${c.generation} (epoch ${c.epoch}) since ${ago(c.at)}, owing a relist of ${c.relisting.length === 0 ? "nothing" : c.relisting.join(", ")}, ${c.narrowed} watch(es) narrowed in place`;
  const applied = h.applied === undefined ? "never reported a generation applied" : `last reported g${h.applied.generation} applied ${ago(h.applied.at)}`;
  return `proxy: ${changed}; ${applied}`;
}
