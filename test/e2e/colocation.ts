/**
 * The devapi lane of the co-location run (test/support/colocation.ts): one
 * devapi per run, the gate as asked, the parents a custom resource
 * (`gizmos.coloc.example.com`, stored unstructured as CRs are) and their
 * children ConfigMaps (typed, as the Deployments and ConfigMaps real
 * controllers own). In labels mode the manager's stamping webhook runs behind
 * devapi's mutating admission and its labeller in the ring's coordinator.
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Test } from "tap";
import { startReplicaProxy } from "../../src/demo/replica.ts";
import { startDevApi, type GateMode, type KubeObject } from "../../src/devapi/index.ts";
import { silentLogger } from "../../src/log.ts";
import { createLocalCa } from "../../src/pki/ca.ts";
import { runColocation, type ColocationLane, type ColocationMode, type ColocationResult, type ColocationSizes } from "../support/colocation.ts";
import { CONFIGMAPS, type ResourceRef } from "../../src/demo/kube-resources.ts";
import { startLabelSlotPieces } from "../support/label-slot-manager.ts";
import { kubeConfig } from "../ring/harness.ts";

const NS = "coloc";
export const GIZMOS: ResourceRef = { group: "coloc.example.com", version: "v1", plural: "gizmos", kind: "Gizmo" };
/** The acceptance's sizes (issue 13): 1,000 parents; every step sees at least this many churn writes. */
export const SIZES: ColocationSizes = { parents: 1000, writesPerStep: 40, slots: 64 };

export async function devapiColocation(t: Test, gate: GateMode, mode: ColocationMode): Promise<ColocationResult> {
  const api = await startDevApi({ gate });
  t.teardown(() => api.close());
  api.registerResource({ group: GIZMOS.group, version: GIZMOS.version, resource: GIZMOS.plural, kind: GIZMOS.kind, namespaced: true, encoding: "unstructured" });
  api.store.create("namespaces", { metadata: { name: NS } });
  const kc = kubeConfig(api.url);
  let leaderTasks: ColocationLane["leaderTasks"] = [];
  if (mode.filter === "labels") {
    const pieces = await startLabelSlotPieces(kc, { ca: await createLocalCa("co-location test CA", new Date(), 3600_000), policy: { maxRatePerSecond: 2000, minRatePerSecond: 2000, burst: 200, maxInFlight: 32 } });
    t.teardown(() => pieces.stop());
    const ops = ["CREATE", "UPDATE"] as const;
    api.setMutatingWebhooks([pieces.hook([{ group: GIZMOS.group, resource: GIZMOS.plural, operations: ops }, { group: "", resource: "configmaps", operations: ops }])]);
    leaderTasks = [pieces.labeller];
  }
  return runColocation(
    {
      kubeConfig: kc,
      namespace: NS,
      parent: GIZMOS,
      child: CONFIGMAPS,
      leaderTasks,
      store: (ref, obj) => api.store.create({ group: ref.group, version: ref.version, resource: ref.plural }, obj as KubeObject) as KubernetesObject,
      async startProxy(name, o) {
        const { proxy, kubeConfig: viaProxy } = await startReplicaProxy({ name, upstreamUrl: api.url, resources: o.resources, ownership: o.ownership, filtering: o.filtering, logger: silentLogger(), token: `controller-${name}` });
        return { kubeConfig: viaProxy, close: () => proxy.close() };
      },
    },
    "web",
    mode,
    SIZES,
    (line) => t.comment(line),
  );
}
