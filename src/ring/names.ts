/**
 * The names a ring writes into the cluster: the ShardRing resource, the
 * member Lease's name, label and annotations. One place, so the member, the
 * leader, the docs and the manifests cannot drift apart.
 */

export const RING_GROUP = "shardcar.io";
export const RING_VERSION = "v1alpha1";
export const RING_PLURAL = "shardrings";
export const RING_KIND = "ShardRing";

/** Label on every member Lease: the ring it belongs to. */
export const RING_LABEL = "shardcar.io/ring";
/** Annotation on a member Lease: the member's name (the pod name). */
export const MEMBER_ANNOTATION = "shardcar.io/member";
/**
 * Annotation on a member Lease: the highest table generation whose ranges
 * the member's proxy has applied (every sharded resource relisted under it).
 */
export const APPLIED_ANNOTATION = "shardcar.io/applied-generation";
/** Annotation on a member Lease: `"true"` while the member is leaving gracefully. */
export const LEAVING_ANNOTATION = "shardcar.io/leaving";
/** Annotation on a member Lease: the handoff mode its pod asked for; used when the leader creates the ShardRing. */
export const HANDOFF_ANNOTATION = "shardcar.io/handoff";
/** Annotation on a member Lease: the slots its proxy enforces right now, for people and audits. */
export const SLOTS_ANNOTATION = "shardcar.io/slots";

/**
 * Prefix of `holderIdentity` once the leader has taken a member's Lease over.
 * A member that reads any other holder than itself has been fenced.
 */
export const FENCED_PREFIX = "fenced-by:";

/** Default name of the Lease the manager replicas elect their leader with. */
export const MANAGER_LEASE = "shardcar-manager";

/** `shardcar-<ring>-<pod>`: the member Lease, one per sidecar. */
export function memberLeaseName(ring: string, member: string): string {
  return `shardcar-${ring}-${member}`;
}
