/**
 * The pod annotations that make up shardcar's user interface, and their
 * validation. Every value is checked; a bad one produces a message that names
 * the annotation, quotes the value and says what is allowed, because that
 * message is all a user sees (in the ReplicaSet's FailedCreate event).
 *
 * Pure: no I/O, no clock.
 */
import { ConfigError } from "../errors.ts";
import { parseLockSpec } from "../proxy/lock-rename.ts";
import { canonicalSelector } from "../shard/selector.ts";
import { parseResources, parseShardSpec, type ShardSpec, type ShardedResource } from "../shard/spec.ts";

/** Every annotation (and the one label) shardcar reads or writes. */
export const ANNOTATIONS = {
  inject: "shardcar.io/inject",
  resources: "shardcar.io/resources",
  shards: "shardcar.io/shards",
  ring: "shardcar.io/ring",
  fallback: "shardcar.io/fallback",
  filter: "shardcar.io/filter",
  handoff: "shardcar.io/handoff",
  syntheticDeletes: "shardcar.io/synthetic-deletes",
  leaderElection: "shardcar.io/leader-election",
  kubeconfig: "shardcar.io/kubeconfig",
  /** Written by the webhook: what it injected. Never set it by hand. */
  status: "shardcar.io/status",
} as const;

const KNOWN = new Set<string>(Object.values(ANNOTATIONS));
const PREFIX = "shardcar.io/";

export type Fallback = "filter" | "fail";
/** How the proxy asks the server to filter: KEP-5866's shardSelector, or a slot label (docs/label-slots.md). */
export type FilterMode = "shardselector" | "labels";
export type Handoff = "overlap" | "exclusive";

/** The validated per-pod settings, ready to become sidecar flags. */
export interface PodSettings {
  readonly resources: readonly ShardedResource[];
  readonly shards: ShardSpec;
  /** `shardcar.io/ring` as written; the default (the owning workload) is resolved by the decision. */
  readonly ring: string | undefined;
  readonly fallback: Fallback;
  readonly filter: FilterMode;
  readonly handoff: Handoff;
  /** Ring mode: narrow with synthetic DELETEDs instead of relisting (the proxy's default). */
  readonly syntheticDeletes: boolean;
  /** The controller's lock, `<resource>/<name>` (leases, configmaps or endpoints). */
  readonly leaderElection: string | undefined;
  readonly kubeconfig: boolean;
}

export type ParseResult = { readonly ok: true; readonly settings: PodSettings } | { readonly ok: false; readonly problems: readonly string[] };

/** Whether the pod asked for injection, and where the answer came from. */
export type InjectToggle =
  | { readonly ok: true; readonly inject: boolean; readonly source: "label" | "annotation" | "default" }
  | { readonly ok: false; readonly problem: string };

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
// A ring name becomes a label value on member Leases (63 characters at most)
// and part of the Lease name `shardcar-<ring>-<pod>`.
const MAX_RING = 63;

/**
 * Reads the `shardcar.io/inject` toggle. The label wins over the annotation
 * (the label is what the webhook's objectSelector sees, so it is the more
 * deliberate signal); only `"true"` and `"false"` are accepted.
 */
export function readInjectToggle(labels: Readonly<Record<string, string>>, annotations: Readonly<Record<string, string>>): InjectToggle {
  for (const source of ["label", "annotation"] as const) {
    const value = source === "label" ? labels[ANNOTATIONS.inject] : annotations[ANNOTATIONS.inject];
    if (value === undefined) continue;
    if (value === "true" || value === "false") return { ok: true, inject: value === "true", source };
    return { ok: false, problem: `invalid ${ANNOTATIONS.inject} ${source} ${JSON.stringify(value)}: allowed values are "true" and "false"` };
  }
  return { ok: true, inject: false, source: "default" };
}

/**
 * Validates every `shardcar.io/` annotation of an opted-in pod. Collects all
 * problems rather than stopping at the first, so one failed rollout shows
 * everything to fix.
 */
export function parsePodSettings(annotations: Readonly<Record<string, string>>): ParseResult {
  const problems: string[] = [];
  const get = (key: string): string | undefined => annotations[key];

  for (const key of Object.keys(annotations).sort()) {
    // Fail closed on typos: `shardcar.io/shard: 0/3` silently ignored would
    // run every replica over the whole keyspace.
    if (key.startsWith(PREFIX) && !KNOWN.has(key)) {
      problems.push(`unknown annotation ${key}: shardcar understands ${[...KNOWN].sort().join(", ")}`);
    }
  }

  let resources: ShardedResource[] = [];
  const rawResources = get(ANNOTATIONS.resources);
  if (rawResources === undefined) {
    problems.push(
      `missing ${ANNOTATIONS.resources}: a pod that opts in must list the resources to shard, e.g. "pods, configmaps=namespace, releases.example.com"`,
    );
  } else {
    try {
      resources = parseResources(rawResources, ANNOTATIONS.resources);
    } catch (e) {
      problems.push(
        `${configMessage(e)} (allowed: a comma-separated list of <plural>[.<group>][=uid|namespace|owner], e.g. "pods, configmaps=namespace, deployments.apps=owner")`,
      );
    }
  }

  let shards: ShardSpec = { mode: "ring" };
  const rawShards = get(ANNOTATIONS.shards);
  if (rawShards !== undefined) {
    try {
      shards = parseShardSpec(rawShards, ANNOTATIONS.shards);
    } catch (e) {
      problems.push(configMessage(e));
    }
  }

  const filter = oneOf(get(ANNOTATIONS.filter), ANNOTATIONS.filter, ["shardselector", "labels"] as const, "shardselector", problems);
  const ring = get(ANNOTATIONS.ring);
  if (ring !== undefined) {
    if (!DNS_LABEL.test(ring) || ring.length > MAX_RING) {
      problems.push(
        `invalid ${ANNOTATIONS.ring} ${JSON.stringify(ring)}: allowed is a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most ${MAX_RING} characters)`,
      );
    } else if (rawShards !== undefined && shards.mode !== "ring" && filter !== "labels") {
      // Static shards in labels mode name their ring too: the ShardRing
      // that says what the manager labels, and the label key.
      problems.push(
        `${ANNOTATIONS.ring} ${JSON.stringify(ring)} is allowed only with ${ANNOTATIONS.shards}: ring or ${ANNOTATIONS.filter}: labels, but ${ANNOTATIONS.shards} is ${JSON.stringify(rawShards)}; remove one of them`,
      );
    }
  } else if (filter === "labels" && shards.mode !== "ring") {
    problems.push(
      `${ANNOTATIONS.filter} "labels" with ${ANNOTATIONS.shards} ${JSON.stringify(rawShards ?? "")} needs ${ANNOTATIONS.ring}: the ShardRing (spec.filter: labels) whose slot label shard.shardcar.io/<ring> the proxy selects by`,
    );
  }

  const fallback = oneOf(get(ANNOTATIONS.fallback), ANNOTATIONS.fallback, ["filter", "fail"] as const, "filter", problems);
  const handoff = oneOf(get(ANNOTATIONS.handoff), ANNOTATIONS.handoff, ["overlap", "exclusive"] as const, "overlap", problems);
  const syntheticDeletes = oneOf(get(ANNOTATIONS.syntheticDeletes), ANNOTATIONS.syntheticDeletes, ["true", "false"] as const, "true", problems) === "true";
  const kubeconfig = oneOf(get(ANNOTATIONS.kubeconfig), ANNOTATIONS.kubeconfig, ["true", "false"] as const, "false", problems) === "true";

  let leaderElection: string | undefined;
  const rawLock = get(ANNOTATIONS.leaderElection);
  if (rawLock !== undefined) {
    // The proxy's own parser: the annotation accepts exactly what
    // `shardcar proxy --leader-election` accepts.
    try {
      const lock = parseLockSpec(rawLock, ANNOTATIONS.leaderElection);
      leaderElection = `${lock.resource}/${lock.name}`;
    } catch (e) {
      problems.push(configMessage(e));
    }
  }

  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, settings: { resources, shards, ring, fallback, filter, handoff, syntheticDeletes, leaderElection, kubeconfig } };
}

/** The `--resources` value, in one canonical spelling. */
export function formatResources(resources: readonly ShardedResource[]): string {
  return resources.map((r) => `${r.resource}${r.group === "" ? "" : `.${r.group}`}${r.key === "uid" ? "" : `=${r.key}`}`).join(",");
}

/** The `--shards` value, in one canonical spelling. */
export function formatShards(spec: ShardSpec): string {
  switch (spec.mode) {
    case "ring":
      return "ring";
    case "index":
      return `${spec.index}/${spec.count}`;
    case "ordinal":
      return `ordinal/${spec.count}`;
    case "selector":
      // parseShardSpec only returns non-empty ranges, so this is defined.
      return canonicalSelector(spec.key, spec.ranges) ?? "";
  }
}

/** Whether `name` can name a ring (used for the default taken from the owner). */
export function isValidRingName(name: string): boolean {
  return DNS_LABEL.test(name) && name.length <= MAX_RING;
}

function oneOf<const T extends string>(
  value: string | undefined,
  key: string,
  allowed: readonly T[],
  fallback: T,
  problems: string[],
): T {
  if (value === undefined) return fallback;
  const hit = allowed.find((a) => a === value);
  if (hit !== undefined) return hit;
  problems.push(`invalid ${key} ${JSON.stringify(value)}: allowed values are ${allowed.map((a) => JSON.stringify(a)).join(" and ")}`);
  return fallback;
}

function configMessage(e: unknown): string {
  if (e instanceof ConfigError) return e.message;
  throw e;
}
