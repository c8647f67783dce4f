/**
 * A leader elector that follows client-go's leaderelection algorithm on a
 * Lease lock (get; create if absent; take over when expired; renew while
 * held), written on @kubernetes/client-node's CoordinationV1Api because
 * client-node 2.x ships no LeaderElection of its own. It is the controller
 * side of the per-shard leader-election test and knows nothing of shardcar.
 */
import { CoordinationV1Api, type KubeConfig, type V1Lease } from "@kubernetes/client-node";

export interface Elector {
  readonly identity: string;
  isLeader(): boolean;
  /** Acquire-or-renew attempts completed (won, lost or failed). */
  attempts(): number;
  stop(): void;
}

export function startElector(kc: KubeConfig, opts: { namespace: string; lock: string; identity: string; leaseSeconds: number; retryMs: number }): Elector {
  const api = kc.makeApiClient(CoordinationV1Api);
  let leader = false;
  let stopped = false;
  let attempts = 0;
  const micro = (d: Date): Date => d;
  const tryAcquireOrRenew = async (): Promise<void> => {
    const now = new Date();
    let current: V1Lease | undefined;
    try {
      current = await api.readNamespacedLease({ name: opts.lock, namespace: opts.namespace });
    } catch (e) {
      if ((e as { code?: number }).code !== 404) throw e;
    }
    const spec = { holderIdentity: opts.identity, leaseDurationSeconds: opts.leaseSeconds, acquireTime: micro(now), renewTime: micro(now) };
    if (current === undefined) {
      await api.createNamespacedLease({ namespace: opts.namespace, body: { metadata: { name: opts.lock, namespace: opts.namespace }, spec } });
      leader = true;
      return;
    }
    const held = current.spec?.holderIdentity;
    const renewed = current.spec?.renewTime === undefined ? 0 : new Date(current.spec.renewTime).getTime();
    const expired = renewed + (current.spec?.leaseDurationSeconds ?? opts.leaseSeconds) * 1000 < now.getTime();
    if (held !== opts.identity && !expired) {
      leader = false;
      return;
    }
    await api.replaceNamespacedLease({ name: opts.lock, namespace: opts.namespace, body: { ...current, spec: { ...spec, acquireTime: held === opts.identity ? current.spec?.acquireTime : micro(now) } } });
    leader = true;
  };
  const loop = async (): Promise<void> => {
    while (!stopped) {
      try {
        await tryAcquireOrRenew();
      } catch {
        // A 409 means someone else wrote first; like client-go, just retry.
        leader = false;
      }
      attempts++;
      await new Promise((r) => setTimeout(r, opts.retryMs));
    }
  };
  void loop();
  return {
    identity: opts.identity,
    isLeader: () => leader,
    attempts: () => attempts,
    stop: () => {
      stopped = true;
    },
  };
}
