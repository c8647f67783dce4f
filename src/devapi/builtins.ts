/**
 * The resources every devapi serves unless told otherwise: core v1 pods,
 * configmaps, secrets, serviceaccounts and namespaces, coordination.k8s.io/v1
 * leases, apiextensions.k8s.io/v1 customresourcedefinitions, and the
 * shardrings.shardcar.io/v1alpha1 custom resource.
 */
import { isRecord } from "./json.ts";
import { AGE_COLUMN } from "./table.ts";
import type { KubeObject, ResourceDef, TableColumn } from "./types.ts";

function rec(v: unknown): Record<string, unknown> {
  return isRecord(v) ? v : {};
}
function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}
function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}
const NONE = "<none>";

function column(name: string, priority: number, description: string, cell: TableColumn["cell"]): TableColumn {
  return { name, type: "string", format: "", description, priority, cell };
}

/** The pod columns kube-apiserver prints (pkg/printers/internalversion), simplified to what devapi's pods carry. */
export const POD_COLUMNS: readonly TableColumn[] = [
  column("Ready", 0, "The aggregate readiness state of this pod for accepting traffic.", (o) => {
    const total = arr(rec(o.spec).containers).length;
    const ready = arr(rec(o.status).containerStatuses).filter((c) => rec(c).ready === true).length;
    return `${ready}/${total}`;
  }),
  column("Status", 0, "The aggregate status of the containers in this pod.", (o) => {
    if (o.metadata?.deletionTimestamp !== undefined) return "Terminating";
    const status = rec(o.status);
    for (const c of arr(status.containerStatuses)) {
      const waiting = str(rec(rec(rec(c).state).waiting).reason);
      if (waiting !== "") return waiting;
    }
    return str(status.reason) || str(status.phase);
  }),
  column(
    "Restarts",
    0,
    "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    (o) => String(arr(rec(o.status).containerStatuses).reduce<number>((n, c) => n + (Number(rec(c).restartCount) || 0), 0)),
  ),
  AGE_COLUMN,
  column("IP", 1, "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.", (o) => str(rec(o.status).podIP) || NONE),
  column("Node", 1, "NodeName indicates in which node this pod is scheduled.", (o) => str(rec(o.spec).nodeName) || NONE),
  column("Nominated Node", 1, "nominatedNodeName is set only when this pod preempts other pods on the node.", (o) => str(rec(o.status).nominatedNodeName) || NONE),
  column("Readiness Gates", 1, "If specified, all readiness gates will be evaluated for pod readiness.", (o) => {
    const gates = arr(rec(o.spec).readinessGates);
    if (gates.length === 0) return NONE;
    const conds = arr(rec(o.status).conditions).map(rec);
    const ok = gates.filter((g) => conds.some((c) => c.type === rec(g).conditionType && c.status === "True")).length;
    return `${ok}/${gates.length}`;
  }),
];

const LEASE_COLUMNS: readonly TableColumn[] = [column("Holder", 0, "The holder of the lease.", (o) => str(rec(o.spec).holderIdentity)), AGE_COLUMN];

const podField = (path: (o: KubeObject) => unknown) => (o: KubeObject) => str(path(o));

export const PODS: ResourceDef = {
  group: "",
  version: "v1",
  resource: "pods",
  kind: "Pod",
  namespaced: true,
  shortNames: ["po"],
  categories: ["all"],
  statusSubresource: true,
  generation: true,
  twoPhaseDelete: true,
  columns: POD_COLUMNS,
  fieldSelectors: {
    "spec.nodeName": podField((o) => rec(o.spec).nodeName),
    "spec.serviceAccountName": podField((o) => rec(o.spec).serviceAccountName),
    "status.phase": podField((o) => rec(o.status).phase),
    "status.podIP": podField((o) => rec(o.status).podIP),
  },
  bookmarkFields: { spec: { containers: null }, status: {} },
};

export const CONFIGMAPS: ResourceDef = { group: "", version: "v1", resource: "configmaps", kind: "ConfigMap", namespaced: true, shortNames: ["cm"] };

export const SECRETS: ResourceDef = {
  group: "",
  version: "v1",
  resource: "secrets",
  kind: "Secret",
  namespaced: true,
  fieldSelectors: { type: (o) => str(o.type) },
};

export const SERVICEACCOUNTS: ResourceDef = { group: "", version: "v1", resource: "serviceaccounts", kind: "ServiceAccount", namespaced: true, shortNames: ["sa"] };

export const NAMESPACES: ResourceDef = {
  group: "",
  version: "v1",
  resource: "namespaces",
  kind: "Namespace",
  namespaced: false,
  shortNames: ["ns"],
  statusSubresource: true,
  fieldSelectors: { "status.phase": (o) => str(rec(o.status).phase) },
  bookmarkFields: { spec: {}, status: {} },
};

export const LEASES: ResourceDef = {
  group: "coordination.k8s.io",
  version: "v1",
  resource: "leases",
  kind: "Lease",
  namespaced: true,
  columns: LEASE_COLUMNS,
  bookmarkFields: { spec: {} },
};

export const CUSTOMRESOURCEDEFINITIONS: ResourceDef = {
  group: "apiextensions.k8s.io",
  version: "v1",
  resource: "customresourcedefinitions",
  kind: "CustomResourceDefinition",
  namespaced: false,
  shortNames: ["crd", "crds"],
  statusSubresource: true,
  generation: true,
  bookmarkFields: { spec: { group: "", names: { plural: "", kind: "" }, scope: "", versions: null }, status: { conditions: null, acceptedNames: { plural: "", kind: "" }, storedVersions: null } },
};

export const SHARDRINGS: ResourceDef = {
  group: "shardcar.io",
  version: "v1alpha1",
  resource: "shardrings",
  kind: "ShardRing",
  namespaced: true,
  encoding: "unstructured",
  statusSubresource: true,
};

export const BUILTIN_RESOURCES: readonly ResourceDef[] = [PODS, CONFIGMAPS, SECRETS, SERVICEACCOUNTS, NAMESPACES, LEASES, CUSTOMRESOURCEDEFINITIONS, SHARDRINGS];
