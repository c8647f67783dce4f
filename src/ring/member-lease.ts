/**
 * What a ring member writes to its Lease: the holder and renew time any
 * Lease has, and the annotations the leader plans from (the member's name,
 * the generation it applied, the slots it enforces, whether it is leaving,
 * its handoff mode). Pure; member.ts renews with it.
 */
import { isFencedHolder, microTime, timeOf, type Lease } from "./kube.ts";
import { APPLIED_ANNOTATION, HANDOFF_ANNOTATION, LEAVING_ANNOTATION, MEMBER_ANNOTATION, RING_LABEL, SLOTS_ANNOTATION } from "./names.ts";
import { formatSlots, type HandoffMode } from "./table.ts";

export interface MemberLeaseFacts {
  /** The holder identity: `<member>/<incarnation>`. */
  readonly identity: string;
  readonly leaseName: string;
  readonly namespace: string;
  readonly ring: string;
  readonly member: string;
  readonly applied: number;
  readonly slots: readonly number[];
  readonly leaving: boolean;
  readonly mode: HandoffMode | undefined;
  readonly leaseDurationSeconds: number;
}

/** The Lease to write over `base` (the one read, or none yet) at `now` (epoch ms). */
export function memberLeaseBody(base: Lease | undefined, f: MemberLeaseFacts, now: number): Lease {
  const holderChanged = base?.spec?.holderIdentity !== f.identity;
  const annotations: Record<string, string> = {
    ...base?.metadata?.annotations,
    [MEMBER_ANNOTATION]: f.member,
    [APPLIED_ANNOTATION]: String(f.applied),
    [SLOTS_ANNOTATION]: formatSlots(f.slots),
  };
  if (f.leaving) annotations[LEAVING_ANNOTATION] = "true";
  else delete annotations[LEAVING_ANNOTATION];
  if (f.mode !== undefined) annotations[HANDOFF_ANNOTATION] = f.mode;
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: {
      ...base?.metadata,
      name: f.leaseName,
      namespace: f.namespace,
      labels: { ...base?.metadata?.labels, [RING_LABEL]: f.ring },
      annotations,
    },
    spec: {
      ...base?.spec,
      holderIdentity: f.identity,
      leaseDurationSeconds: f.leaseDurationSeconds,
      renewTime: microTime(now),
      acquireTime: holderChanged ? microTime(now) : (base?.spec?.acquireTime ?? microTime(now)),
      leaseTransitions: (base?.spec?.leaseTransitions ?? 0) + (holderChanged && base !== undefined ? 1 : 0),
    },
  };
}

/**
 * Whether a member may take its Lease as read at `now`: released, fenced by
 * the leader, expired, or held by an earlier incarnation of this very pod
 * (which cannot still be running: a pod name is unique, and a container
 * restart ends the old process).
 */
export function mayTake(cur: Lease, identity: string, member: string, now: number): boolean {
  const holder = cur.spec?.holderIdentity ?? "";
  const renewed = timeOf(cur.spec?.renewTime);
  const expired = renewed === undefined || renewed + (cur.spec?.leaseDurationSeconds ?? 0) * 1000 < now;
  return holder === "" || holder === identity || isFencedHolder(holder) || holder.startsWith(`${member}/`) || expired;
}
