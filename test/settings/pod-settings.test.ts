/**
 * One definition per pod setting: whatever a pod's annotations ask for, the
 * webhook writes as sidecar args that `shardcar proxy`'s own flag parser
 * reads back to the very same settings, for every setting, for chosen and
 * for random values. A bad value is refused in both spellings with a
 * message that names the annotation or the flag and quotes the value.
 */
import t, { type Test } from "tap";
import { PROXY_FLAGS } from "../../src/cli/commands/proxy.ts";
import { parseFlags } from "../../src/cli/flags.ts";
import { ConfigError } from "../../src/errors.ts";
import { makeRange, normalize, type Range } from "../../src/shard/range.ts";
import type { ShardSpec, ShardedResource } from "../../src/shard/spec.ts";
import type { LockResource } from "../../src/settings/lock.ts";
import { settingName, settingsFromAnnotations, settingsFromFlags, settingsToAnnotations, settingsToArgs, type PodSettings } from "../../src/settings/pod-settings.ts";
import { decideInjection } from "../../src/webhook/decide.ts";
import type { JsonObject } from "../../src/webhook/json.ts";
import { buildInjectionPatch } from "../../src/webhook/patch.ts";
import { rng } from "../support/rng.ts";
import { testConfig } from "../webhook/support.ts";

const DEFAULTS: PodSettings = {
  resources: [{ resource: "pods", group: "", key: "uid" }],
  shards: { mode: "ring" },
  ring: undefined,
  filter: "shardselector",
  fallback: "filter",
  handoff: "overlap",
  syntheticDeletes: true,
  leaderElection: undefined,
  kubeconfig: false,
};

/** The StatefulSet pod every round trip injects: its owner names the default ring, its name an ordinal. */
function pod(annotations: Record<string, string>): JsonObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: "ctrl-0",
      namespace: "apps",
      labels: { "shardcar.io/inject": "true" },
      annotations,
      ownerReferences: [{ apiVersion: "apps/v1", kind: "StatefulSet", name: "ctrl", uid: "u", controller: true }],
    },
    spec: { containers: [{ name: "ctrl", image: "ctrl:1", volumeMounts: [{ name: "tok", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount", readOnly: true }] }], volumes: [{ name: "tok", projected: { sources: [] } }] },
  };
}

/** The sidecar's args as the webhook's patch writes them into the pod. */
function sidecarArgs(annotations: Record<string, string>): string[] {
  const raw = pod(annotations);
  const decision = decideInjection(raw, testConfig());
  if ("refuse" in decision) throw new Error(`refused: ${decision.refuse}`);
  if (!decision.inject) throw new Error(`skipped: ${decision.reason}`);
  const patch = buildInjectionPatch(raw, decision.plan);
  const init = patch.find((op) => op.op === "add" && op.path.startsWith("/spec/initContainers"));
  const value = init !== undefined && "value" in init ? (init.value as JsonObject | JsonObject[]) : undefined;
  const container = Array.isArray(value) ? value[0] : value;
  const args = container?.["args"];
  if (!Array.isArray(args)) throw new Error(`no sidecar args in ${JSON.stringify(patch)}`);
  return args.map(String);
}

/** What `shardcar proxy` makes of those args, through its own flag table. */
function proxyReads(args: readonly string[]): PodSettings {
  const [command, ...flags] = args;
  if (command !== "proxy") throw new Error(`the sidecar runs ${command ?? "nothing"}, not proxy`);
  const { values } = parseFlags(flags, PROXY_FLAGS);
  return settingsFromFlags(values, { slotLabel: values["slot-label"] !== undefined });
}

/** The settings the webhook resolves: the ring defaults to the owning StatefulSet's name in ring mode. */
const resolved = (s: PodSettings): PodSettings => ({ ...s, ring: s.ring ?? (s.shards.mode === "ring" ? "ctrl" : undefined) });

function roundTrip(t: Test, s: PodSettings, name: string): void {
  const annotations = settingsToAnnotations(s);
  const read = settingsFromAnnotations(annotations);
  if (!read.ok) {
    t.fail(`${name}: the annotations ${JSON.stringify(annotations)} were refused: ${read.problems.map((p) => p.message).join("; ")}`);
    return;
  }
  t.same(read.settings, s, `${name}: annotations read back to the settings`);
  t.same(proxyReads(sidecarArgs(annotations)), resolved(s), `${name}: the proxy reads the sidecar args back to the same settings`);
}

const selector = (key: "uid" | "namespace", ...bounds: Array<[bigint, bigint]>): ShardSpec => ({ mode: "selector", key, ranges: normalize(bounds.map(([a, b]) => makeRange(a, b))) });

t.test("every setting, away from its default, goes annotation → settings → sidecar args → proxy flags unchanged", async (t) => {
  const rows: Array<[string, Partial<PodSettings>]> = [
    ["defaults", {}],
    ["resources and keys", { resources: [{ resource: "widgets", group: "example.com", key: "uid" }, { resource: "configmaps", group: "", key: "owner" }, { resource: "deployments", group: "apps", key: "namespace" }] }],
    ["shards i/N", { shards: { mode: "index", index: 2, count: 5 } }],
    ["shards ordinal/N", { shards: { mode: "ordinal", count: 3 } }],
    ["shards selector", { shards: selector("namespace", [0n, 1n << 62n], [3n << 62n, 1n << 64n]) }],
    ["ring", { ring: "web-ring" }],
    ["filter labels (ring mode)", { filter: "labels" }],
    ["filter labels with static shards and a ring", { filter: "labels", shards: { mode: "index", index: 0, count: 2 }, ring: "web" }],
    ["fallback fail", { fallback: "fail" }],
    ["handoff exclusive", { handoff: "exclusive" }],
    ["synthetic deletes off", { syntheticDeletes: false }],
    ["leader election", { leaderElection: { resource: "configmaps", name: "ctrl.lock" } }],
    ["kubeconfig", { kubeconfig: true }],
  ];
  for (const [name, over] of rows) roundTrip(t, { ...DEFAULTS, ...over }, name);
});

t.test("the sidecar args carry only what differs from the proxy's defaults, besides resources and shards", async (t) => {
  t.same(settingsToArgs(DEFAULTS), ["--resources", "pods", "--shards", "ring"]);
  t.same(settingsToArgs({ ...DEFAULTS, fallback: "fail", kubeconfig: true }), ["--resources", "pods", "--shards", "ring", "--fallback", "fail", "--write-kubeconfig"]);
});

function randomSettings(random: () => number): PodSettings {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
  const int = (lo: number, hi: number): number => lo + Math.floor(random() * (hi - lo + 1));
  const label = (max: number): string => {
    const inner = "abcdefghijklmnopqrstuvwxyz0123456789-";
    const edge = "abcdefghijklmnopqrstuvwxyz0123456789";
    const n = int(1, max);
    return Array.from({ length: n }, (_, i) => (i === 0 || i === n - 1 ? pick([...edge]) : pick([...inner]))).join("");
  };
  const resources: ShardedResource[] = [];
  const seen = new Set<string>();
  for (let i = int(1, 4); i > 0; i--) {
    const r: ShardedResource = { resource: label(20), group: random() < 0.4 ? "" : Array.from({ length: int(1, 3) }, () => label(10)).join("."), key: pick(["uid", "namespace", "owner"] as const) };
    if (seen.has(`${r.resource}.${r.group}`)) continue;
    seen.add(`${r.resource}.${r.group}`);
    resources.push(r);
  }
  const bound = (): bigint => BigInt(Math.floor(random() * 2 ** 32)) * BigInt(Math.floor(random() * 2 ** 32));
  const ranges = (): Range[] => {
    const out: Range[] = [];
    for (let i = int(1, 3); i > 0; i--) {
      const a = bound();
      const b = bound();
      if (a !== b) out.push(makeRange(a < b ? a : b, a < b ? b : a));
    }
    return out.length > 0 ? normalize(out) : [makeRange(0n, 1n << 64n)];
  };
  const count = int(1, 4096);
  const shards = pick<() => ShardSpec>([
    () => ({ mode: "ring" }),
    () => ({ mode: "index", index: int(0, count - 1), count }),
    () => ({ mode: "ordinal", count }),
    () => ({ mode: "selector", key: pick(["uid", "namespace"] as const), ranges: ranges() }),
  ])();
  const filter = pick(["shardselector", "labels"] as const);
  let ring = random() < 0.5 ? undefined : label(63);
  // The combinations no pod may ask for (each is refused, and tested below).
  if (shards.mode !== "ring") ring = filter === "labels" ? (ring ?? label(63)) : undefined;
  let fallback = pick(["filter", "fail"] as const);
  if (fallback === "fail" && filter === "shardselector" && resources.some((r) => r.key === "owner")) fallback = "filter";
  const lockName = Array.from({ length: int(1, 3) }, () => label(30)).join(".");
  return {
    resources,
    shards,
    ring,
    filter,
    fallback,
    handoff: pick(["overlap", "exclusive"] as const),
    syntheticDeletes: random() < 0.5,
    leaderElection: random() < 0.5 ? undefined : { resource: pick<LockResource>(["leases", "configmaps", "endpoints"]), name: lockName },
    kubeconfig: random() < 0.5,
  };
}

t.test("random settings survive the round trip (seeded)", async (t) => {
  const random = rng(16);
  for (let i = 0; i < 300; i++) roundTrip(t, randomSettings(random), `case ${i}`);
});

const BAD: Array<[keyof PodSettings, string]> = [
  ["resources", "pods=name"],
  ["shards", "3"],
  ["ring", "Web_Ring"],
  ["filter", "label"],
  ["fallback", "ignore"],
  ["handoff", "graceful"],
  ["syntheticDeletes", "no"],
  ["leaderElection", "secrets/lock"],
];

t.test("a bad value is refused in both spellings, naming the annotation or flag and quoting the value", async (t) => {
  for (const [key, bad] of BAD) {
    const annotation = settingName(key, "annotation");
    const read = settingsFromAnnotations({ "shardcar.io/resources": "pods", [annotation]: bad });
    t.match(read.ok ? [] : read.problems.map((p) => p.message), [new RegExp(`^invalid ${annotation} ${escape(JSON.stringify(bad))}: `)], annotation);
    const flag = settingName(key, "flag");
    const values = { resources: "pods", [flag.slice(2)]: bad };
    const err = t.throws(() => settingsFromFlags(values), ConfigError, flag) as ConfigError;
    t.equal(err.flag, flag, `${flag} is blamed`);
    t.match(err.message, new RegExp(`^invalid ${flag} ${escape(JSON.stringify(bad))}: `), flag);
  }
  t.match(settingsFromAnnotations({ "shardcar.io/kubeconfig": "yes", "shardcar.io/resources": "pods" }), { ok: false, problems: [{ message: 'invalid shardcar.io/kubeconfig "yes": allowed values are "true" and "false"' }] });
  t.throws(() => settingsFromFlags({}), new ConfigError("--resources", '--resources is required: list the resources to shard, e.g. "pods, configmaps=namespace, releases.example.com"'));
});

t.test("combinations no pod may ask for are refused in both spellings, blaming the setting to change", async (t) => {
  const rows: Array<[string, Record<string, string>, keyof PodSettings, RegExp]> = [
    ["a ring with static shards in shardselector mode", { shards: "0/2", ring: "web" }, "ring", /"web" is allowed only with .*shards.? ring or .*filter.? labels, but .*shards is "0\/2"/],
    ["labels mode with static shards and no ring", { shards: "0/2", filter: "labels" }, "ring", /filter "labels" with .*shards "0\/2" needs .*ring/],
    ["fallback fail with owner keys in shardselector mode", { resources: "pods,configmaps=owner", fallback: "fail" }, "fallback", /fallback "fail" cannot hold with owner keys in shardselector mode \(configmaps\)/],
  ];
  for (const [name, given, blamed, message] of rows) {
    const annotations = Object.fromEntries(Object.entries({ resources: "pods", ...given }).map(([k, v]) => [`shardcar.io/${k}`, v]));
    t.match(settingsFromAnnotations(annotations), { ok: false, problems: [{ name: settingName(blamed, "annotation"), message }] }, `${name}: annotations`);
    const err = t.throws(() => settingsFromFlags({ resources: "pods", ...given }), ConfigError) as ConfigError;
    t.equal(err.flag, settingName(blamed, "flag"), `${name}: flags blame ${settingName(blamed, "flag")}`);
    t.match(err.message, message, `${name}: flags`);
  }
  t.doesNotThrow(() => settingsFromFlags({ resources: "pods", shards: "0/2", filter: "labels" }, { slotLabel: true }), "an explicit slot label stands in for the ring");
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

t.test("a pod that shards children by owner hands off exclusively by default, and may still ask for overlap (design.md, Default handoff)", async (t) => {
  const read = (annotations: Record<string, string>): PodSettings | undefined => {
    const r = settingsFromAnnotations(annotations);
    return r.ok ? r.settings : undefined;
  };
  t.equal(read({ "shardcar.io/resources": "pods" })?.handoff, "overlap", "no owner key: overlap, duplicates never gaps");
  t.equal(read({ "shardcar.io/resources": "deployments.apps, replicasets.apps=owner" })?.handoff, "exclusive", "an owner-keyed resource: never two owners of a parent's children");
  t.equal(settingsFromFlags({ resources: "configmaps, secrets=owner" }).handoff, "exclusive", "the proxy's flags mean the same");
  const overlap = read({ "shardcar.io/resources": "replicasets.apps=owner", "shardcar.io/handoff": "overlap" });
  t.equal(overlap?.handoff, "overlap", "asked for explicitly, overlap stays");
  if (overlap === undefined) return;
  t.same(settingsToArgs(overlap).slice(-2), ["--handoff", "overlap"], "and is written into the sidecar's args, since it is no longer the default");
  t.notOk(settingsToArgs({ ...overlap, handoff: "exclusive" }).includes("--handoff"), "the derived default is not written");
});
