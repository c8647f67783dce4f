/**
 * Which objects belong to a shard, computed from the server's own data by
 * hashing each object here (FNV-1a of its uid or namespace), never by asking
 * the proxy; and set comparisons for caches. Objects are named `ns/name@uid`.
 */
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, type Range } from "../../src/shard/range.ts";
import type { ShardKey } from "../../src/shard/selector.ts";
import { listAll, type KubeObject, type Target } from "./http.ts";

/** The value a key hashes (uid or namespace name). */
export function keyOf(o: KubeObject, key: ShardKey): string {
  return (key === "uid" ? o.metadata?.uid : o.metadata?.namespace) ?? "";
}

export function inShard(o: KubeObject, ranges: readonly Range[], key: ShardKey): boolean {
  return contains(ranges, fnv1a64(keyOf(o, key)));
}

/** `ns/name@uid`: how the lane names an object in sets and diffs. */
export function ident(o: KubeObject): string {
  return `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}@${o.metadata?.uid ?? ""}`;
}

/** The identities of the objects at `path` whose key hashes into `ranges`, listed from the server itself. */
export async function expectedShard(target: Target, path: string, ranges: readonly Range[], key: ShardKey): Promise<Set<string>> {
  const { items } = await listAll(target, path);
  return new Set(items.filter((o) => inShard(o, ranges, key)).map(ident));
}

export function setDiff(got: ReadonlySet<string>, want: ReadonlySet<string>, show = 5): { missing: string[]; extra: string[] } {
  return { missing: [...want].filter((x) => !got.has(x)).slice(0, show), extra: [...got].filter((x) => !want.has(x)).slice(0, show) };
}

export function setsEqual(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}
