/**
 * The two user-facing configuration values that describe sharding: which
 * resources are sharded (and by which key), and where a replica's ranges come
 * from, each with its parser and its printer. The pod settings vocabulary
 * (src/settings/) spells them as annotations, sidecar args and flags.
 */
import { ConfigError, SelectorSyntaxError } from "../errors.ts";
import { normalize, shardRange, type Range } from "./range.ts";
import { canonicalSelector, parseSelector, type ShardKey } from "./selector.ts";
import type { ResourceKey } from "./slots.ts";

export interface ShardedResource {
  /** Plural resource name, e.g. `pods`. */
  readonly resource: string;
  /** API group; `""` for the core group. */
  readonly group: string;
  /** What an object is hashed by; `owner` follows its controller ownerReference (slots.ts `keyValue`). */
  readonly key: ResourceKey;
}

export type ShardSpec =
  | { readonly mode: "ring" }
  | { readonly mode: "index"; readonly index: number; readonly count: number }
  | { readonly mode: "ordinal"; readonly count: number }
  | { readonly mode: "selector"; readonly key: ShardKey; readonly ranges: readonly Range[] };

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
// Upper bound on N keeps `i/N` arithmetic and the selector (one range per
// replica at worst) far below CEL's 100k code point limit.
const MAX_SHARDS = 4096;

/**
 * Parses `pods, configmaps=namespace, deployments.apps=owner, releases.convoy.kumodo.io`.
 * Throws {@link ConfigError} naming `flag` and the offending entry.
 */
export function parseResources(value: string, flag = "--resources"): ShardedResource[] {
  const fail = (why: string): never => {
    throw new ConfigError(flag, `invalid ${flag} ${JSON.stringify(value)}: ${why}`);
  };
  const entries = value.split(",").map((s) => s.trim());
  if (value.trim() === "") fail("at least one resource is required, e.g. pods,configmaps=namespace");
  const out: ShardedResource[] = [];
  const seen = new Set<string>();
  for (const entry of entries) {
    if (entry === "") fail("empty entry (doubled or trailing comma)");
    const [name, key = "uid", ...rest] = entry.split("=").map((s) => s.trim());
    if (rest.length > 0) fail(`entry ${JSON.stringify(entry)} has more than one '='`);
    if (key !== "uid" && key !== "namespace" && key !== "owner") fail(`entry ${JSON.stringify(entry)}: key must be uid, namespace or owner, got ${JSON.stringify(key)}`);
    const [resource = "", ...groupParts] = (name ?? "").split(".");
    const group = groupParts.join(".");
    if (!DNS_LABEL.test(resource)) fail(`entry ${JSON.stringify(entry)}: ${JSON.stringify(resource)} is not a lowercase plural resource name`);
    if (group !== "" && !group.split(".").every((p) => DNS_LABEL.test(p))) fail(`entry ${JSON.stringify(entry)}: ${JSON.stringify(group)} is not a valid API group`);
    const id = `${resource}.${group}`;
    if (seen.has(id)) fail(`${JSON.stringify(name)} is listed twice`);
    seen.add(id);
    out.push({ resource, group, key: key as ResourceKey });
  }
  return out;
}

/** The one spelling of `resources` that {@link parseResources} reads back to the same list. */
export function formatResources(resources: readonly ShardedResource[]): string {
  return resources.map((r) => `${r.resource}${r.group === "" ? "" : `.${r.group}`}${r.key === "uid" ? "" : `=${r.key}`}`).join(",");
}

/**
 * Parses `ring`, `i/N`, `ordinal/N`, or a shard selector.
 * Throws {@link ConfigError} naming `flag` and the value.
 */
export function parseShardSpec(value: string, flag = "--shards"): ShardSpec {
  const v = value.trim();
  const fail = (why: string, cause?: unknown): never => {
    throw new ConfigError(flag, `invalid ${flag} ${JSON.stringify(value)}: ${why}`, { cause });
  };
  if (v === "ring") return { mode: "ring" };
  const m = /^(\d+|ordinal)\/(\d+)$/.exec(v);
  if (m) {
    const count = Number(m[2]);
    if (count < 1 || count > MAX_SHARDS) fail(`N must be between 1 and ${MAX_SHARDS}`);
    if (m[1] === "ordinal") return { mode: "ordinal", count };
    const index = Number(m[1]);
    if (index >= count) fail(`index ${index} must be less than N (${count})`);
    return { mode: "index", index, count };
  }
  if (v.includes("shardRange")) {
    try {
      const sel = parseSelector(v);
      return { mode: "selector", key: sel.key, ranges: normalize(sel.ranges) };
    } catch (e) {
      if (e instanceof SelectorSyntaxError) fail(e.message, e);
      throw e;
    }
  }
  return fail("expected ring, i/N (e.g. 0/3), ordinal/N, or a shardRange(...) selector");
}

/** The one spelling of `spec` that {@link parseShardSpec} reads back to the same spec. */
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

/** StatefulSet pods are named `<set>-<ordinal>`. */
export function ordinalOf(podName: string): number | undefined {
  const m = /-(\d+)$/.exec(podName);
  return m ? Number(m[1]) : undefined;
}

/**
 * The fixed ranges of a static spec. `podName` is needed for `ordinal/N`.
 * Returns `undefined` for ring mode, whose ranges come from the ring.
 */
export function staticRanges(spec: ShardSpec, podName?: string): readonly Range[] | undefined {
  switch (spec.mode) {
    case "ring":
      return undefined;
    case "index":
      return [shardRange(spec.index, spec.count)];
    case "selector":
      return spec.ranges;
    case "ordinal": {
      const ord = podName === undefined ? undefined : ordinalOf(podName);
      if (ord === undefined) throw new ConfigError("--shards", `ordinal/${spec.count} needs a StatefulSet pod name ending in -<ordinal>, got ${JSON.stringify(podName ?? "")}`);
      if (ord >= spec.count) throw new ConfigError("--shards", `pod ordinal ${ord} is not below N (${spec.count}) in ordinal/${spec.count}`);
      return [shardRange(ord, spec.count)];
    }
  }
}

/** Identity used to rename per-shard leader-election locks in static modes. */
export function shardIdentity(spec: ShardSpec, podName?: string): string | undefined {
  switch (spec.mode) {
    case "index":
      return String(spec.index);
    case "ordinal":
      return podName === undefined ? undefined : String(ordinalOf(podName));
    default:
      return undefined;
  }
}

// A label key: an optional DNS-subdomain prefix and `/`, then a name of at
// most 63 characters (alphanumerics, '-', '_', '.', alphanumeric at both ends).
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Parses an explicit slot label key (`--slot-label`). Throws {@link ConfigError} naming `flag` and the value. */
export function parseLabelKey(value: string, flag = "--slot-label"): string {
  const slash = value.lastIndexOf("/");
  const prefix = slash < 0 ? undefined : value.slice(0, slash);
  const name = slash < 0 ? value : value.slice(slash + 1);
  const prefixOk = prefix === undefined || (prefix.length <= 253 && DNS_SUBDOMAIN.test(prefix));
  if (!prefixOk || !LABEL_NAME.test(name)) {
    throw new ConfigError(flag, `invalid ${flag} ${JSON.stringify(value)}: need a label key, [prefix/]name, with a DNS-subdomain prefix and a name of at most 63 alphanumerics, '-', '_' or '.'`);
  }
  return value;
}
