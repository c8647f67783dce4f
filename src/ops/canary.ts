/**
 * The audit's canaries, pure parts: what a canary object looks like for a
 * resource, which owner a new canary serves, a namespace name that hashes
 * into given ranges (namespace keying: names can be chosen, uids cannot),
 * and the verdict from what each proxy said it delivered.
 */
import { fnv1a64, formatBound } from "../shard/hash.ts";
import { contains, type Range } from "../shard/range.ts";
import { groupVersion, type ResolvedResource } from "./resource.ts";
import type { Owner } from "./owners.ts";

export const CANARY_LABEL = "shardcar.io/canary";

/**
 * A minimal object of the resource, labelled with the run id. Pods are
 * created with a scheduling gate so they are never scheduled or run.
 */
export function canaryBody(r: ResolvedResource, namespace: string | undefined, runId: string): Record<string, unknown> {
  const metadata: Record<string, unknown> = { generateName: "shardcar-canary-", labels: { [CANARY_LABEL]: runId } };
  if (r.namespaced && namespace !== undefined) metadata["namespace"] = namespace;
  const body: Record<string, unknown> = { apiVersion: groupVersion(r), kind: r.kind, metadata };
  if (r.group === "" && r.resource === "pods") {
    body["spec"] = {
      // Never scheduled: the gate is only removed by whoever added it (nobody).
      schedulingGates: [{ name: "shardcar.io/canary" }],
      containers: [{ name: "canary", image: "registry.k8s.io/pause:3.10" }],
      terminationGracePeriodSeconds: 0,
    };
  } else if (r.group === "" && (r.resource === "configmaps" || r.resource === "secrets")) {
    body["data"] = {};
  } else if (r.group === "coordination.k8s.io" && r.resource === "leases") {
    body["spec"] = {};
  }
  return body;
}

/** The first owner without a canary yet whose ranges hold `hash`; undefined when the canary is not needed. */
export function ownerNeeding(owners: readonly Owner[], covered: ReadonlySet<string>, hash: bigint): Owner | undefined {
  return owners.find((o) => !covered.has(o.name) && contains(o.ranges, hash));
}

/**
 * A namespace name `<prefix>-<n>` whose hash lies in `ranges`, trying n =
 * 0, 1, … up to `maxTries`. Undefined if the ranges are too small to hit.
 */
export function namespaceIn(ranges: readonly Range[], prefix: string, maxTries = 1_000_000): string | undefined {
  for (let n = 0; n < maxTries; n++) {
    const name = `${prefix}-${n}`;
    if (contains(ranges, fnv1a64(name))) return name;
  }
  return undefined;
}

/** One canary and what the proxies said about it. */
export interface CanaryResult {
  /** The owner it was created for. */
  readonly target: string;
  readonly id: string;
  /** The value hashed (uid, or the canary's namespace). */
  readonly keyValue: string;
  /** Serving owners whose ranges hold it: each must deliver it. */
  readonly expectedBy: readonly string[];
  readonly seenBy: readonly string[];
  /** Proxies that delivered it although their ranges do not hold it. */
  readonly leakedTo: readonly string[];
  /** Owners whose debug endpoint could not be asked, with why. */
  readonly unreachable: readonly string[];
  /** ms from creation until the last expected owner saw it; undefined if one never did. */
  readonly latencyMs: number | undefined;
}

export interface CanaryReport {
  readonly results: readonly CanaryResult[];
  /** Owners that got no canary within the bound on objects created. */
  readonly uncovered: readonly string[];
  readonly created: number;
  readonly ok: boolean;
}

export function judgeCanary(r: Omit<CanaryResult, "latencyMs"> & { latencyMs?: number | undefined }): "ok" | "unserved" | "missed" | "leaked" {
  if (r.expectedBy.length === 0) return "unserved";
  if (r.expectedBy.some((o) => !r.seenBy.includes(o))) return "missed";
  if (r.leakedTo.length > 0) return "leaked";
  return "ok";
}

export function canaryOk(results: readonly CanaryResult[], uncovered: readonly string[]): boolean {
  return uncovered.length === 0 && results.every((r) => judgeCanary(r) === "ok");
}

export function formatCanary(report: CanaryReport): string {
  const out = [`canaries: ${report.results.length} placed (${report.created} objects created, the extra ones deleted at once)`];
  for (const r of report.results) {
    const v = judgeCanary(r);
    const hash = formatBound(fnv1a64(r.keyValue));
    const head = `  ${r.target}: ${r.id} (hash ${hash})`;
    if (v === "ok") out.push(`${head} — delivered by ${r.seenBy.join(", ")} in ${r.latencyMs ?? "?"} ms`);
    else if (v === "unserved") out.push(`${head} — NO serving replica owns it: a gap`);
    else if (v === "missed") {
      const missed = r.expectedBy.filter((o) => !r.seenBy.includes(o));
      out.push(`${head} — NOT delivered by ${missed.join(", ")}${r.unreachable.length > 0 ? ` (could not ask: ${r.unreachable.join("; ")})` : ""}`);
    } else out.push(`${head} — delivered by ${r.leakedTo.join(", ")} although outside its ranges (stale ranges?)`);
  }
  for (const u of report.uncovered) out.push(`  ${u}: no canary landed in its ranges within the bound; raise --canary-max`);
  out.push(report.ok ? "canaries: OK, every range's owner delivered its canary" : "canaries: NOT OK");
  return out.join("\n") + "\n";
}
