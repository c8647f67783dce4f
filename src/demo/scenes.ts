/**
 * The demo's six scenes as data: what each does to the stage, which ring
 * members it must end with, and which claims (checks.ts) hold once it
 * settled. Apart from the runner (run.ts), which plays any list of scenes
 * the same way, so that a scene is added or changed here alone.
 *
 * Start N replicas; scale to N+1; kill one (no goodbye: its Lease expires
 * and the manager moves its slots); the apiserver's gate off (the proxies
 * fall back to filtering: the apiserver still sends every byte); labels
 * mode with the gate still off, as on a managed cluster; and a scale-out
 * while parents are created, whose owner-keyed children an unmodified
 * controller creates exactly once.
 */
import { slotLabelKey } from "../shard/slots.ts";
import { parseResources } from "../shard/spec.ts";
import { exclusiveGap, familyChecks, killGapBounded, noGap, operatorCheck, proxyPassedItsShard, serverSentItsShare, verdicts, type Invariant } from "./checks.ts";
import { createParent, DEPLOYMENTS, FAMILY_RESOURCES, REPLICASETS } from "./families.ts";
import { RING, RING_NS, RING_REF, sleep, type Demo, type ReplicaRow } from "./stage.ts";

// The last scene's parents: created one by one while the ring hands off.
const PARENTS = 40;
const PARENT_EVERY_MS = 60;
const LABELLED_TIMEOUT_MS = 20_000;

/** One scene: played in order by the runner, which prints and checks it once it settled. */
export interface SceneSpec {
  readonly title: string;
  /** A few words for the charts' scene markers. */
  readonly short: string;
  readonly action: () => Promise<void>;
  /** Ring members the scene must end with. */
  readonly members: () => string[];
  /** Scene-specific claims, checked after it settled. */
  readonly checks?: (ctx: { rows: readonly ReplicaRow[]; startedAt: number; settledAt: number }) => Invariant[];
  /** Said after the bytes line (e.g. why a scene costs more than unsharded). */
  readonly bytesNote?: string;
  /** Runs once the scene settled; its lines are printed and its invariants count (e.g. an operator's audit). */
  readonly after?: () => Promise<{ lines: string[]; invariants: Invariant[] }>;
  /** Runs before the scene's bytes are counted (e.g. the manager's backfill, which is not the controllers' traffic); its lines are printed first. */
  readonly prepare?: () => Promise<string[]>;
  /** The scene's own condition for having settled, beside the ring's and the pods' caches. */
  readonly settledWhen?: () => boolean;
}

/**
 * The scenes for `n` starting replicas, in the order they are played. Each
 * acts on `demo` only when played: building the list does nothing.
 */
export function demoScenes(demo: Demo, n: number): SceneSpec[] {
  const api = demo.api;
  const names = (k: number): string[] => Array.from({ length: k }, (_, i) => `replica-${i}`);
  const killed = "replica-1";
  const kept = (): string[] => names(n + 1).filter((x) => x !== killed);
  /** Scenes 4 and 5: the apiserver's gate turned `gate`, then every controller restarted under it. */
  const regate = async (gate: "on" | "off"): Promise<void> => {
    api.gate = gate;
    await demo.restartReplicas();
  };

  const t1 = `scene 1: start ${n} replicas — the manager assigns the ring's slots; the apiserver filters`;
  const t2 = `scene 2: scale to ${n + 1} — the new replica widens first, the others narrow after the commit`;
  const t3 = `scene 3: kill ${killed} — no goodbye: its Lease expires, the manager fences it and hands its slots on`;
  const t4 = "scene 4: the apiserver's ShardedListAndWatch gate is turned off — it ignores shardSelector; the controllers restart one by one and their proxies filter";
  const t5 = "scene 5: labels mode, the gate still off (as on EKS, AKS, GKE) — the manager labels every pod with its slot, the controllers roll out with --filter labels, and the apiserver sends each proxy only its share";
  const label = slotLabelKey(RING);
  const joiner = `replica-${n + 1}`;
  let t6Started = Date.now();
  const t6 = `scene 6: scale to ${n + 1} while ${PARENTS} Deployments are created — each gets one ReplicaSet, from the replica that owns it; children keyed by owner carry their parent's slot and move with it`;
  return [
    {
      title: t1,
      short: `1 start ${n}`,
      action: async () => {
        await Promise.all(names(n).map((x) => demo.addReplica(x)));
        demo.churn(100);
      },
      members: () => names(n),
      checks: verdicts(t1, "server (shardInfo)"),
    },
    { title: t2, short: `2 scale to ${n + 1}`, action: () => demo.addReplica(`replica-${n}`), members: () => names(n + 1), checks: noGap(demo, t2) },
    {
      title: t3,
      short: "3 kill one",
      action: () => demo.killReplica(killed),
      members: kept,
      bytesNote: "(the survivors relisted to take over the killed replica's slots, which unsharded replicas never need to: the price of sharding a failure)",
      checks: killGapBounded(demo, t3),
    },
    {
      title: t4,
      short: "4 gate off",
      action: async () => {
        await regate("off");
        demo.churn(100);
      },
      members: kept,
      checks: (c) => [...verdicts(t4, "proxy (fallback)")(c), ...proxyPassedItsShard(t4)(c)],
    },
    {
      title: t5,
      short: "5 labels mode",
      prepare: () => switchToLabels(demo, label),
      action: async () => {
        demo.wiring = { filter: "labels", resources: parseResources(`pods, ${FAMILY_RESOURCES}`), families: true };
        await demo.restartReplicas();
        demo.churn(100);
      },
      members: kept,
      checks: (c) => [...verdicts(t5, "server (slot label)")(c), ...serverSentItsShare(t5)(c)],
    },
    {
      title: t6,
      short: `6 scale, families`,
      action: async () => {
        t6Started = Date.now();
        const joining = demo.addReplica(joiner);
        for (let i = 0; i < PARENTS; i++) {
          createParent(api, `web-${i}`);
          await sleep(PARENT_EVERY_MS);
        }
        await joining;
      },
      members: () => [...kept(), joiner],
      bytesNote:
        "(every member relisted its pods: while owner-keyed children are sharded beside them, a handoff moves uid-keyed resources as possible parents, in order with their children, and that costs a relist also where slots only shrink; docs/rings.md)",
      settledWhen: () => {
        const c = demo.census();
        return c.parents === PARENTS && c.childless === 0 && c.split.length === 0;
      },
      checks: () => familyChecks(demo, t6, PARENTS),
      after: async () => {
        const gap = exclusiveGap(demo, t6Started);
        const audit = await operatorCheck(demo, t6);
        return { lines: [gap, ...audit.lines], invariants: audit.invariants };
      },
    },
  ];
}

/**
 * The operator's switch to labels mode, as docs/label-slots.md describes
 * it: the stamping webhook in the admission chain, the ShardRing's
 * `spec.filter: labels` with its resources (and exclusive handoff, for the
 * controller that creates children), then wait for `Labelled=True` before
 * the controllers roll out.
 */
async function switchToLabels(demo: Demo, label: string): Promise<string[]> {
  const slots = demo.labelSlots;
  if (slots === undefined) return ["BROKEN: the manager's label-slot pieces did not start"];
  slots.admit(demo.api, [
    { group: "", resource: "pods" },
    { group: DEPLOYMENTS.group, resource: DEPLOYMENTS.plural },
    { group: REPLICASETS.group, resource: REPLICASETS.plural },
  ]);
  const spec = { filter: "labels", resources: `pods, ${FAMILY_RESOURCES}`, handoff: "exclusive" };
  const started = Date.now();
  demo.api.store.patch(RING_REF, RING_NS, RING, { spec });
  const end = started + LABELLED_TIMEOUT_MS;
  while (demo.labelled()?.status !== "True" && Date.now() < end && !demo.opts.signal.aborted) await sleep(50);
  const c = demo.labelled();
  const pods = demo.api.store.identities("pods");
  const done = pods.filter((p) => p.labels[label] !== undefined).length;
  return [
    `$ kubectl patch shardring ${RING} -n ${RING_NS} --type merge -p '${JSON.stringify({ spec })}'`,
    c?.status === "True"
      ? `the manager's labeller labelled ${done} of ${pods.length} pods with ${label}=<slot> in ${((Date.now() - started) / 1000).toFixed(1)} s (Labelled=True; its rate raised for devapi); new children get theirs from the stamping webhook at CREATE`
      : `BROKEN: the ring was not Labelled=True within ${LABELLED_TIMEOUT_MS / 1000} s (${done} of ${pods.length} pods labelled; ${c?.message ?? "no condition yet"})`,
  ];
}
