/**
 * The pod settings vocabulary: what a controller pod asks of shardcar, in
 * its three spellings. A user writes annotations (`shardcar.io/fallback:
 * fail`); the webhook turns them into the sidecar's args (`--fallback
 * fail`); the proxy parses those flags. Each setting is defined once, here,
 * with its one parser and printer, its default, and the names it goes by in
 * each spelling, so the three cannot drift: what the webhook admits, the
 * proxy accepts, and means the same.
 *
 * Pure: no I/O, no clock.
 */
import { switchFlags, valueFlags } from "../flag-table.ts";
import { ConfigError } from "../errors.ts";
import { formatResources, formatShards, parseResources, parseShardSpec, type ShardSpec, type ShardedResource } from "../shard/spec.ts";
import { formatLockSpec, parseLockSpec, type LockSpec } from "./lock.ts";

/** What the proxy does when the server did not filter: filter itself, or answer 503. */
export type Fallback = "filter" | "fail";
/** How the ring hands ranges over: overlap (duplicates, never gaps) or exclusive. */
export type Handoff = "overlap" | "exclusive";
/** How the proxy asks the server to filter: KEP-5866's shardSelector, or a slot label (docs/label-slots.md). */
export type FilterMode = "shardselector" | "labels";

/** One pod's settings, validated: what the webhook reads and the proxy runs with. */
export interface PodSettings {
  readonly resources: readonly ShardedResource[];
  readonly shards: ShardSpec;
  /** The ring this pod joins (ring mode) or whose slot label it selects by (labels mode). */
  readonly ring: string | undefined;
  readonly filter: FilterMode;
  readonly fallback: Fallback;
  readonly handoff: Handoff;
  /** Ring mode: narrow with synthetic DELETEDs instead of relisting. */
  readonly syntheticDeletes: boolean;
  /** The controller's lock, renamed per shard. */
  readonly leaderElection: LockSpec | undefined;
  /** Injected mode: also write a kubeconfig for the app containers. */
  readonly kubeconfig: boolean;
}

/** The `shardcar proxy` flags that carry pod settings, as node:util's parseArgs takes them. */
export const SETTING_FLAGS = {
  ...valueFlags("resources", "shards", "ring", "filter", "fallback", "handoff", "synthetic-deletes", "leader-election"),
  ...switchFlags("write-kubeconfig"),
} as const;

type FlagName = keyof typeof SETTING_FLAGS;

/** What parseArgs returns for {@link SETTING_FLAGS}. */
export type SettingFlagValues = { readonly [F in FlagName]?: (typeof SETTING_FLAGS)[F]["type"] extends "boolean" ? boolean : string };

/** Where a setting was read from, which decides the name a message blames. */
export type Spelling = "annotation" | "flag";

interface Setting<K extends keyof PodSettings> {
  readonly annotation: string;
  readonly flag: FlagName;
  /** A boolean flag: present means true; printed only when true. */
  readonly switch?: true;
  /** Printed in the sidecar's args even at its default: what a reader of the pod spec looks for first. */
  readonly always?: true;
  /** Absent: what to say. Otherwise the setting has {@link default}. */
  readonly required?: string;
  readonly default: PodSettings[K];
  /**
   * The default given the pod's other settings, where it depends on them
   * (read after every setting; printing omits a value equal to it).
   */
  readonly defaultFor?: (s: PodSettings) => PodSettings[K];
  /** Throws {@link ConfigError} naming `name` and quoting `text`. */
  parse(text: string, name: string): PodSettings[K];
  format(value: NonNullable<PodSettings[K]>): string;
}

function oneOf<const T extends string>(allowed: readonly T[]): (text: string, name: string) => T {
  return (text, name) => {
    const hit = allowed.find((a) => a === text);
    if (hit !== undefined) return hit;
    throw new ConfigError(name, `invalid ${name} ${JSON.stringify(text)}: allowed values are ${allowed.map((a) => JSON.stringify(a)).join(" and ")}`);
  };
}

const parseBoolean = (text: string, name: string): boolean => oneOf(["true", "false"] as const)(text, name) === "true";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
// A ring name becomes a label value on member Leases (63 characters at most)
// and part of the Lease name `shardcar-<ring>-<pod>`.
const MAX_RING = 63;

/** Whether `name` can name a ring (used for the default the webhook takes from the owner). */
export function isValidRingName(name: string): boolean {
  return DNS_LABEL.test(name) && name.length <= MAX_RING;
}

function parseRing(text: string, name: string): string {
  if (isValidRingName(text)) return text;
  throw new ConfigError(
    name,
    `invalid ${name} ${JSON.stringify(text)}: allowed is a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most ${MAX_RING} characters)`,
  );
}

function parseResourceList(text: string, name: string): readonly ShardedResource[] {
  try {
    return parseResources(text, name);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    throw new ConfigError(name, `${e.message} (allowed: a comma-separated list of <plural>[.<group>][=uid|namespace|owner], e.g. "pods, configmaps=namespace, deployments.apps=owner")`, { cause: e });
  }
}

/** Every setting, in the order the sidecar's args list them. */
const SETTINGS: { readonly [K in keyof PodSettings]: Setting<K> } = {
  resources: {
    annotation: "shardcar.io/resources",
    flag: "resources",
    always: true,
    required: 'list the resources to shard, e.g. "pods, configmaps=namespace, releases.example.com"',
    default: [],
    parse: parseResourceList,
    format: formatResources,
  },
  shards: { annotation: "shardcar.io/shards", flag: "shards", always: true, default: { mode: "ring" }, parse: parseShardSpec, format: formatShards },
  ring: { annotation: "shardcar.io/ring", flag: "ring", default: undefined, parse: parseRing, format: (r) => r },
  filter: { annotation: "shardcar.io/filter", flag: "filter", default: "shardselector", parse: oneOf(["shardselector", "labels"] as const), format: (f) => f },
  fallback: { annotation: "shardcar.io/fallback", flag: "fallback", default: "filter", parse: oneOf(["filter", "fail"] as const), format: (f) => f },
  handoff: {
    annotation: "shardcar.io/handoff",
    flag: "handoff",
    default: "overlap",
    // Default handoff (design.md): a controller that shards children by
    // `owner` creates them, and an overlap handoff lets two owners of a
    // parent's slot both create its child; exclusive never has two owners.
    defaultFor: (s) => (s.resources.some((r) => r.key === "owner") ? "exclusive" : "overlap"),
    parse: oneOf(["overlap", "exclusive"] as const),
    format: (h) => h,
  },
  syntheticDeletes: { annotation: "shardcar.io/synthetic-deletes", flag: "synthetic-deletes", default: true, parse: parseBoolean, format: String },
  leaderElection: { annotation: "shardcar.io/leader-election", flag: "leader-election", default: undefined, parse: parseLockSpec, format: formatLockSpec },
  kubeconfig: { annotation: "shardcar.io/kubeconfig", flag: "write-kubeconfig", switch: true, default: false, parse: parseBoolean, format: String },
};

const KEYS = Object.keys(SETTINGS) as (keyof PodSettings)[];

/** The annotation of each setting, by its key in {@link PodSettings}. */
export const SETTING_ANNOTATIONS = Object.fromEntries(KEYS.map((k) => [k, SETTINGS[k].annotation])) as { readonly [K in keyof PodSettings]: string };

/** The name a setting goes by in a spelling: `shardcar.io/fallback` or `--fallback`. */
export function settingName(key: keyof PodSettings, spelling: Spelling): string {
  return spelling === "annotation" ? SETTINGS[key].annotation : `--${SETTINGS[key].flag}`;
}

export interface Problem {
  /** The annotation or flag to blame. */
  readonly name: string;
  readonly message: string;
}

function readOne<K extends keyof PodSettings>(key: K, text: string | undefined, spelling: Spelling, problems: Problem[]): PodSettings[K] {
  const s: Setting<K> = SETTINGS[key];
  const name = settingName(key, spelling);
  if (text === undefined) {
    if (s.required !== undefined) problems.push({ name, message: `${name} is required: ${s.required}` });
    return s.default;
  }
  try {
    return s.parse(text, name);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    problems.push({ name, message: e.message });
    return s.default;
  }
}

/** Extra facts the settings are checked against: the proxy's explicit slot label replaces the ring's. */
export interface CheckContext {
  readonly slotLabel?: boolean;
}

/** What no combination of otherwise valid settings may be, each blamed on the setting to change. */
function conflicts(s: PodSettings, spelling: Spelling, ctx: CheckContext): Problem[] {
  const n = (k: keyof PodSettings): string => settingName(k, spelling);
  const is = spelling === "annotation" ? ": " : " ";
  const problems: Problem[] = [];
  const staticShards = s.shards.mode !== "ring";
  if (s.ring !== undefined && staticShards && s.filter !== "labels") {
    // Static shards in labels mode name their ring too: the ShardRing that
    // says what the manager labels, and the label key.
    problems.push({
      name: n("ring"),
      message: `${n("ring")} ${JSON.stringify(s.ring)} is allowed only with ${n("shards")}${is}ring or ${n("filter")}${is}labels, but ${n("shards")} is ${JSON.stringify(formatShards(s.shards))}; remove one of them`,
    });
  }
  if (s.ring === undefined && staticShards && s.filter === "labels" && ctx.slotLabel !== true) {
    problems.push({
      name: n("ring"),
      message: `${n("filter")} "labels" with ${n("shards")} ${JSON.stringify(formatShards(s.shards))} needs ${n("ring")}: the ShardRing (spec.filter: labels) whose slot label shard.shardcar.io/<ring> the proxy selects by${spelling === "flag" ? " (or --slot-label KEY)" : ""}`,
    });
  }
  const owned = s.resources.filter((r) => r.key === "owner").map((r) => r.resource);
  if (s.fallback === "fail" && s.filter === "shardselector" && owned.length > 0) {
    problems.push({
      name: n("fallback"),
      message: `${n("fallback")} "fail" cannot hold with owner keys in shardselector mode (${owned.join(", ")}): no shardSelector can hash an ownerReference, so the server never filters them; use ${n("filter")}${is}labels or ${n("fallback")}${is}filter`,
    });
  }
  return problems;
}

function read(text: (key: keyof PodSettings) => string | undefined, spelling: Spelling, ctx: CheckContext): { readonly settings: PodSettings; readonly problems: readonly Problem[] } {
  const problems: Problem[] = [];
  const out: Partial<Record<keyof PodSettings, unknown>> = {};
  for (const key of KEYS) out[key] = readOne(key, text(key), spelling, problems);
  let settings = out as PodSettings;
  for (const key of KEYS) {
    const defaultFor = SETTINGS[key].defaultFor;
    if (defaultFor !== undefined && text(key) === undefined) settings = { ...settings, [key]: defaultFor(settings) };
  }
  // Combinations are judged only once every value is valid: a conflict
  // between a typo and its default would only confuse.
  return { settings, problems: problems.length > 0 ? problems : conflicts(settings, spelling, ctx) };
}

export type SettingsResult = { readonly ok: true; readonly settings: PodSettings } | { readonly ok: false; readonly problems: readonly Problem[] };

/** The settings of a pod's annotations (other annotations are ignored here); every problem at once. */
export function settingsFromAnnotations(annotations: Readonly<Record<string, string>>): SettingsResult {
  const { settings, problems } = read((k) => annotations[SETTINGS[k].annotation], "annotation", {});
  return problems.length > 0 ? { ok: false, problems } : { ok: true, settings };
}

/** The settings of `shardcar proxy`'s flags. Throws {@link ConfigError} for the first problem, naming its flag. */
export function settingsFromFlags(values: SettingFlagValues, ctx: CheckContext = {}): PodSettings {
  const { settings, problems } = read((k) => {
    const v = values[SETTINGS[k].flag];
    return typeof v === "boolean" ? (v ? "true" : undefined) : v;
  }, "flag", ctx);
  const [first] = problems;
  if (first !== undefined) throw new ConfigError(first.name, first.message);
  return settings;
}

function printed<K extends keyof PodSettings>(key: K, s: PodSettings): string | undefined {
  const setting: Setting<K> = SETTINGS[key];
  const value = s[key];
  if (value === undefined || value === null) return undefined;
  const text = setting.format(value);
  const def = setting.defaultFor?.(s) ?? setting.default;
  const atDefault = def !== undefined && def !== null && setting.format(def) === text;
  return atDefault && setting.always !== true ? undefined : text;
}

/** The sidecar's args for `s`: every setting not at its default, and resources and shards always. */
export function settingsToArgs(s: PodSettings): string[] {
  const args: string[] = [];
  for (const key of KEYS) {
    const text = printed(key, s);
    if (text === undefined) continue;
    if (SETTINGS[key].switch === true) {
      if (text === "true") args.push(`--${SETTINGS[key].flag}`);
    } else args.push(`--${SETTINGS[key].flag}`, text);
  }
  return args;
}

/** The annotations that ask for `s`: every setting not at its default. */
export function settingsToAnnotations(s: PodSettings): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of KEYS) {
    const text = printed(key, s);
    if (text !== undefined) out[SETTINGS[key].annotation] = text;
  }
  return out;
}
