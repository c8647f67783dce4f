/**
 * The vocabulary devapi shares between its store and its HTTP layer: objects,
 * resource definitions and gate modes. Types only, plus the gate-mode list.
 */

/**
 * How the emulated server treats `shardSelector` (KEP-5866, gate `ShardedListAndWatch`).
 *
 * - `on`: lists and watches are filtered; typed lists echo `metadata.shardInfo`.
 * - `off`: the parameter is silently ignored, even when it is garbage.
 * - `mixed`: collection LIST/WATCH requests alternate on, off, on, ... (the
 *   first one after the mode is set is `on`), like a skewed HA control plane.
 * - `bug-1.36.0`: on, except that watches with neither a label nor a field
 *   selector are not filtered (1.36.0–1.36.3 with the watch cache disabled).
 */
export type GateMode = "on" | "off" | "mixed" | "bug-1.36.0";

export const GATE_MODES: readonly GateMode[] = ["on", "off", "mixed", "bug-1.36.0"];

export function isGateMode(value: string): value is GateMode {
  return (GATE_MODES as readonly string[]).includes(value);
}

/** `metadata` as devapi reads it; everything else in it is kept verbatim. */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  [field: string]: unknown;
}

/** A Kubernetes object as plain JSON. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  [field: string]: unknown;
}

export interface GroupVersionResource {
  /** `""` for the core group. */
  readonly group: string;
  readonly version: string;
  /** Plural, lower case: `pods`, `shardrings`. */
  readonly resource: string;
}

/**
 * How callers name a resource: a {@link GroupVersionResource}, or a string
 * `resource` (core) or `resource.group` (`leases.coordination.k8s.io`).
 */
export type ResourceRef = string | GroupVersionResource;

/** One Table column after `Name` (which every table has first). */
export interface TableColumn {
  readonly name: string;
  readonly type: string;
  readonly format: string;
  readonly description: string;
  readonly priority: number;
  /** The cell for an object; `now` is the server clock in ms, for ages. */
  cell(obj: KubeObject, now: number): string | number | boolean | null;
}

/** Everything devapi needs to serve one group/version/resource. */
export interface ResourceDef {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
  readonly kind: string;
  readonly namespaced: boolean;
  /** Defaults to `${kind}List`. */
  readonly listKind?: string;
  /** Defaults to `kind` lower-cased. */
  readonly singular?: string;
  readonly shortNames?: readonly string[];
  readonly categories?: readonly string[];
  /**
   * `typed` (built-in or aggregated types): lists put `metadata` before
   * `items`, items carry no kind, and `shardInfo` is echoed.
   * `unstructured` (custom resources): every key sorted, list `metadata`
   * after `items`, never `shardInfo`. Default `typed`.
   */
  readonly encoding?: "typed" | "unstructured";
  /** Serve `/status`; the main resource then ignores status changes and `/status` only changes status. */
  readonly statusSubresource?: boolean;
  /** Maintain `metadata.generation` (1 on create, +1 on spec change). Default: true for unstructured, false for typed. */
  readonly generation?: boolean;
  /**
   * DELETE first writes `deletionTimestamp` and `deletionGracePeriodSeconds: 0`
   * (a MODIFIED event) and then removes the object (DELETED), as kube-apiserver
   * does for a pod that is not bound to a node.
   */
  readonly twoPhaseDelete?: boolean;
  /** Table columns after `Name`. Default: `Created At` (typed), `Age` (unstructured, as apiextensions prints). */
  readonly columns?: readonly TableColumn[];
  /** Field selectors beyond `metadata.name` and `metadata.namespace`. */
  readonly fieldSelectors?: Readonly<Record<string, (obj: KubeObject) => string>>;
  /** Empty fields a typed BOOKMARK object carries, e.g. pods: `spec.containers: null, status: {}`. */
  readonly bookmarkFields?: Readonly<Record<string, unknown>>;
}

export function groupVersion(def: { group: string; version: string }): string {
  return def.group === "" ? def.version : `${def.group}/${def.version}`;
}
