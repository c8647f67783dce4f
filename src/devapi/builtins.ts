/**
 * The resources every devapi serves unless told otherwise: core v1 pods,
 * configmaps, secrets, serviceaccounts and namespaces, coordination.k8s.io/v1
 * leases, apiextensions.k8s.io/v1 customresourcedefinitions, and the
 * shardrings.shardcar.io/v1alpha1 custom resource.
 */
import { isRecord } from "../is-record.ts";
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
  column(
    "Node",
    1,
    "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
    (o) => str(rec(o.spec).nodeName) || NONE,
  ),
  column(
    "Nominated Node",
    1,
    "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
    (o) => str(rec(o.status).nominatedNodeName) || NONE,
  ),
  column("Readiness Gates", 1, 'If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to "True" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates', (o) => {
    const gates = arr(rec(o.spec).readinessGates);
    if (gates.length === 0) return NONE;
    const conds = arr(rec(o.status).conditions).map(rec);
    const ok = gates.filter((g) => conds.some((c) => c.type === rec(g).conditionType && c.status === "True")).length;
    return `${ok}/${gates.length}`;
  }),
];

const LEASE_COLUMNS: readonly TableColumn[] = [
  column(
    "Holder",
    0,
    "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
    (o) => str(rec(o.spec).holderIdentity),
  ),
  AGE_COLUMN,
];

const CONFIGMAP_COLUMNS: readonly TableColumn[] = [
  column(
    "Data",
    0,
    "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
    (o) => Object.keys(rec(o.data)).length + Object.keys(rec(o.binaryData)).length,
  ),
  AGE_COLUMN,
];

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

export const CONFIGMAPS: ResourceDef = { group: "", version: "v1", resource: "configmaps", kind: "ConfigMap", namespaced: true, shortNames: ["cm"], columns: CONFIGMAP_COLUMNS };

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
