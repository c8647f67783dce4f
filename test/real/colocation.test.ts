/**
 * Issue 13 §3 against the real server: the co-location run of
 * test/support/colocation.ts (an unmodified parent/child controller, ring
 * mode scaled 3→4→2 under churn of its parents, every create observed),
 * with real Leases, the shipped ShardRing CRD, and in labels mode the
 * manager's stamping webhook called by the apiserver's own
 * MutatingAdmissionWebhook plugin (on the port run.sh maps the webhook
 * Service to). Parents and children are both custom resources here
 * (`gizmos` and `parts` of coloc.example.com): labels mode labels every
 * object of a sharded resource cluster-wide, and the lane's other suites
 * own the ConfigMaps. Smaller than the devapi run (200 parents), so the lane
 * keeps its time; docs/testing.md has both sizes.
 *
 * Gate on: owner keys in shardselector mode, and the negative control (uid
 * keys). Gate off: owner keys in shardselector mode and in labels mode, and
 * the negative control in labels mode.
 */
import t, { type Test } from "tap";
import { readFileSync } from "node:fs";
import { load } from "js-yaml";
import { kubeConfigFor } from "../../src/demo/replica.ts";
import { createLocalCa } from "../../src/pki/ca.ts";
import { assertColocated, assertDuplicated, runColocation, type ColocationLane, type ColocationMode } from "../support/colocation.ts";
import type { ResourceRef } from "../../src/demo/kube-resources.ts";
import { startLabelSlotPieces } from "../support/label-slot-manager.ts";
import { ensure, installCrd } from "./support/dataset.ts";
import { startRealProxy } from "./support/proxies.ts";
import { call, callJson, listAll, realApiEnv, type KubeObject } from "./support/realapi.ts";

const env = realApiEnv();
const server = { url: env.url, caPem: env.caPem, token: env.token };
const PORT = Number(process.env["SHARDCAR_REAL_WEBHOOK_PORT"] ?? "");
const GROUP = "coloc.example.com";
const GIZMOS: ResourceRef = { group: GROUP, version: "v1", plural: "gizmos", kind: "Gizmo" };
const PARTS: ResourceRef = { group: GROUP, version: "v1", plural: "parts", kind: "Part" };
const SIZES = { parents: 200, writesPerStep: 20, slots: 64 } as const;
const MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";

function crd(r: ResourceRef): KubeObject {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${r.plural}.${r.group}` },
    spec: {
      group: r.group,
      names: { plural: r.plural, kind: r.kind, singular: r.kind.toLowerCase(), listKind: `${r.kind}List` },
      scope: "Namespaced",
      versions: [{ name: r.version, served: true, storage: true, schema: { openAPIV3Schema: { type: "object", properties: { spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } } } }],
    },
  };
}

const collection = (r: ResourceRef, namespace: string): string => `/apis/${r.group}/${r.version}/namespaces/${namespace}/${r.plural}`;

const RINGS: ResourceRef = { group: "shardcar.io", version: "v1alpha1", plural: "shardrings", kind: "ShardRing" };

/**
 * Deletes every gizmo and part, in whichever namespaces an earlier run (or
 * the other gate's) left them, since the informers are cluster-wide; and
 * this file's ShardRings, since two labels-mode rings of one name would both
 * claim the same label for the same resources, and neither would label them.
 */
async function clean(): Promise<void> {
  for (const r of [GIZMOS, PARTS, RINGS]) {
    const items = (await listAll(server, `/apis/${r.group}/${r.version}/${r.plural}`)).items;
    const namespaces = new Set(items.filter((o) => r !== RINGS || (o.metadata?.namespace ?? "").startsWith("coloc-")).map((o) => o.metadata?.namespace ?? ""));
    for (const ns of namespaces) await call(server, collection(r, ns), { method: "DELETE" });
  }
}

let runs = 0;
async function realColocation(t: Test, mode: ColocationMode): Promise<Awaited<ReturnType<typeof runColocation>>> {
  const namespace = `coloc-${env.gate}-${++runs}`;
  await ensure(server, "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } });
  await clean();
  t.teardown(clean);
  const kc = kubeConfigFor(env.url, env.token, env.caPem);
  let leaderTasks: ColocationLane["leaderTasks"] = [];
  if (mode.filter === "labels") {
    // The manager's webhook on the port the kit maps shardcar-system/shardcar-webhook:443 to.
    const ca = await createLocalCa("co-location real-lane CA", new Date(), 3600_000);
    const pieces = await startLabelSlotPieces(kc, { ca, port: PORT, policy: { maxRatePerSecond: 500, minRatePerSecond: 500, burst: 100, maxInFlight: 16 } });
    t.teardown(() => pieces.stop());
    const name = "shardcar-coloc-slots";
    await call(server, `${MWC}/${name}`, { method: "DELETE" });
    await callJson(server, "POST", MWC, {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "MutatingWebhookConfiguration",
      metadata: { name },
      webhooks: [
        {
          name: "slots.coloc.shardcar.io",
          clientConfig: { service: { namespace: "shardcar-system", name: "shardcar-webhook", path: "/label-slots" }, caBundle: Buffer.from(ca.certPem).toString("base64") },
          rules: [{ apiGroups: [GROUP], apiVersions: ["v1"], resources: [GIZMOS.plural, PARTS.plural], operations: ["CREATE", "UPDATE"] }],
          failurePolicy: "Ignore",
          sideEffects: "None",
          admissionReviewVersions: ["v1"],
        },
      ],
    });
    t.teardown(async () => {
      await call(server, `${MWC}/${name}`, { method: "DELETE" });
    });
    leaderTasks = [pieces.labeller];
  }
  const lane: ColocationLane = {
    kubeConfig: kc,
    namespace,
    parent: GIZMOS,
    child: PARTS,
    leaderTasks,
    async startProxy(_name, o) {
      const lp = await startRealProxy(env, { resources: o.resources, ownership: o.ownership, filtering: o.filtering, tls: true, syntheticDeletes: true, waitForRangesMs: 30_000 });
      return { kubeConfig: kubeConfigFor(lp.proxy.url, env.token, lp.target.caPem ?? ""), close: () => lp.proxy.close() };
    },
  };
  return runColocation(lane, "coloc", mode, SIZES, (line) => t.comment(line));
}

const labelsSkip = env.gate === "on" ? "labels mode is run with the gate off" : !Number.isInteger(PORT) || PORT <= 0 ? "SHARDCAR_REAL_WEBHOOK_PORT is not set (run through test/real/run.sh)" : false;

t.before(async () => {
  // The shipped ShardRing CRD (js-yaml: client-node's loadYaml drops `enum` and CEL rules).
  const ringCrd = load(readFileSync(new URL("../../manifests/base/crds/shardrings.shardcar.io.yaml", import.meta.url), "utf8")) as KubeObject;
  await installCrd(server, ringCrd, "/apis/shardcar.io/v1alpha1/shardrings");
  await ensure(server, "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "shardcar-system" } });
  for (const r of [GIZMOS, PARTS]) await installCrd(server, crd(r), `/apis/${r.group}/${r.version}/${r.plural}`);
});

t.test(`gate ${env.gate}, shardselector mode, children keyed by owner: no parent ever gets a second child, every parent gets one, every cache is its shard`, async (t) => {
  assertColocated(t, await realColocation(t, { filter: "shardselector", childKey: "owner" }));
});

t.test(`gate ${env.gate}, labels mode, children keyed by owner: the same`, { skip: labelsSkip }, async (t) => {
  assertColocated(t, await realColocation(t, { filter: "labels", childKey: "owner" }));
});

t.test(`gate ${env.gate}, negative control, children keyed by uid (${env.gate === "on" ? "shardselector" : "labels"} mode): the same run creates duplicate children`, { skip: env.gate === "off" ? labelsSkip : false }, async (t) => {
  assertDuplicated(t, await realColocation(t, { filter: env.gate === "on" ? "shardselector" : "labels", childKey: "uid" }));
});
