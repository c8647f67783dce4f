/**
 * The operator tools behind `shardcar preflight`, `shardcar audit` and
 * `--for-object`: questions an operator asks of a live cluster, answered
 * from a kubeconfig.
 *
 * Decision files, pure (no I/O, no clock, no timers; pinned by
 * test/ops/purity.test.ts):
 * - `checks.ts`: preflight verdicts ({@link judgeShardSupport}, RBAC, lock,
 *   webhook, labels) and their text report;
 * - `audit.ts`: {@link buildAudit}, the sum, missing, duplicated and skew
 *   of one full list against one list per owner, and its text report;
 * - `label-audit.ts`: label slots: the slot label of every object of a
 *   labels-mode ring, the ring's readiness for the switch, the stamping
 *   webhook's rules;
 * - `owners.ts`: who owns which ranges, static or from a ring's Leases;
 * - `canary.ts`: canary objects, placement and verdicts;
 * - `resource.ts`: a resource's path, kind and scope.
 *
 * Shell files, the only ones that talk to the API server (through
 * `kube.ts`, raw JSON requests with a kubeconfig's credentials):
 * `preflight.ts`, `audit-run.ts`, `canary-run.ts`, `locate.ts`, `lists.ts`.
 *
 * Never writes anything but canary objects (labelled `shardcar.io/canary`,
 * deleted before `runCanary` returns, whatever happened).
 *
 * @packageDocumentation
 */
export { buildAudit, formatAudit, type AuditReport } from "./audit.ts";
export { loadRing, readLabelRing, readRing, runAudit, runLabelAudit, type AuditOptions } from "./audit-run.ts";
export { buildLabelAudit, formatLabelAudit, type LabelAuditReport } from "./label-audit.ts";
export { CANARY_LABEL, formatCanary, type CanaryReport } from "./canary.ts";
export { httpProbe, podProxyProbe, runCanary, type CanaryOptions, type DeliveredProbe } from "./canary-run.ts";
export { formatPreflight, judgeShardSupport, type Check, type PreflightReport } from "./checks.ts";
export { KubeClient, loadKubeConfig, resolveResource } from "./kube.ts";
export { formatLocation, locateObject, type ObjectLocation } from "./locate.ts";
export { ringOwners, staticOwners, type Owner, type OwnerSet } from "./owners.ts";
export { runPreflight, type PreflightOptions } from "./preflight.ts";
export type { ResolvedResource } from "./resource.ts";
