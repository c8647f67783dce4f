/**
 * `shardcar audit --canary`'s shell: creates short-lived objects until every
 * owner's ranges hold one (a uid cannot be chosen, so it keeps creating, up
 * to a bound, and deletes the ones it does not need at once), asks each
 * proxy's `/debug/shardcar?key=` whether its controller's watch delivered
 * them, and deletes them all at the end, whatever happened.
 */
import type { ApiClient } from "../kube/client.ts";
import { ShardcarError } from "../errors.ts";
import { fnv1a64 } from "../shard/hash.ts";
import { contains } from "../shard/range.ts";
import { CANARY_LABEL, canaryBody, canaryOk, namespaceIn, ownerNeeding, type CanaryReport, type CanaryResult } from "./canary.ts";
import { resourceName, resourcePath, statusMessage, type ResolvedResource } from "./kube.ts";
import { isRecord } from "../is-record.ts";
import { objectRef } from "./lists.ts";
import type { Owner, OwnerSet } from "./owners.ts";

/** Asks one owner's proxy whether a watch delivered `key`; rejects when it cannot be asked. */
export type DeliveredProbe = (owner: Owner, key: string) => Promise<boolean>;

export interface CanaryOptions {
  readonly resource: ResolvedResource;
  readonly owners: OwnerSet;
  /** Where namespaced canaries are created (uid keying). */
  readonly namespace: string;
  /** Objects created at most (uid keying). */
  readonly maxObjects: number;
  /** How long each proxy has to deliver its canary. */
  readonly timeoutMs: number;
  readonly delivered: DeliveredProbe;
  /** Labels every canary, so a crashed run's leftovers can be found. */
  readonly runId: string;
  readonly now?: () => number;
}

/** Reads `/debug/shardcar?key=` JSON: `delivered[<resource>]`. */
export function deliveredFrom(body: unknown, resource: string): boolean {
  return isRecord(body) && isRecord(body["delivered"]) && body["delivered"][resource] === true;
}

/** A probe that fetches `<adminUrl>/debug/shardcar` directly (the demo, tests, a port-forward). */
export function httpProbe(adminUrls: ReadonlyMap<string, string>, resource: string): DeliveredProbe {
  return async (owner, key) => {
    const base = adminUrls.get(owner.name);
    if (base === undefined) throw new Error(`no --admin-url for ${owner.name}`);
    const res = await fetch(`${base.replace(/\/+$/, "")}/debug/shardcar?key=${encodeURIComponent(key)}`, { signal: AbortSignal.timeout(5000) });
    if (!res.ok) throw new Error(`${base}: HTTP ${res.status}`);
    return deliveredFrom(await res.json(), resource);
  };
}

/** A probe through the API server's pod proxy (`pods/<member>:<port>/proxy`): ring members are pods. */
export function podProxyProbe(client: ApiClient, namespace: string, port: number, resource: string): DeliveredProbe {
  return async (owner, key) => {
    const res = await client.get(`/api/v1/namespaces/${namespace}/pods/${owner.name}:${port}/proxy/debug/shardcar`, { query: { key }, timeoutMs: 5000 });
    if (res.status === 403 && statusMessage(res.body) === undefined) {
      // The sidecar's own refusal (a Status would be the apiserver's): its debug endpoint is loopback-only.
      throw new Error(`pod ${namespace}/${owner.name}:${port}: the sidecar answers /debug/shardcar on loopback only; start the manager with --sidecar-debug-remote, or kubectl port-forward and pass --admin-url ${owner.name}=http://127.0.0.1:${port}`);
    }
    if (res.status !== 200) throw new Error(`pod ${namespace}/${owner.name}:${port}: HTTP ${res.status}${statusMessage(res.body) === undefined ? "" : ` ${statusMessage(res.body)}`}`);
    return deliveredFrom(res.body, resource);
  };
}

interface Placed {
  readonly target: string;
  readonly namespace: string | undefined;
  readonly name: string;
  readonly keyValue: string;
  readonly createdAt: number;
  /** A namespace created for it (namespace keying), deleted with it. */
  readonly ownNamespace?: string | undefined;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function runCanary(client: ApiClient, opts: CanaryOptions): Promise<CanaryReport> {
  const r = opts.resource;
  const now = opts.now ?? Date.now;
  const rid = resourceName(r);
  const targets = opts.owners.owners.filter((o) => o.ranges.length > 0);
  const placed: Placed[] = [];
  const covered = new Set<string>();
  let created = 0;
  const create = async (namespace: string | undefined): Promise<{ name: string; uid: string }> => {
    const res = await client.raw("POST", resourcePath(r, namespace), { body: canaryBody(r, namespace, opts.runId) });
    const ref = objectRef(res.body);
    if ((res.status !== 201 && res.status !== 200) || ref === undefined) {
      throw new ShardcarError("SHARDCAR_ERR_UPSTREAM", `creating a canary ${rid}${namespace === undefined ? "" : ` in ${namespace}`}: HTTP ${res.status}${statusMessage(res.body) === undefined ? "" : `: ${statusMessage(res.body)}`}`);
    }
    created++;
    return { name: ref.name, uid: ref.uid };
  };
  const remove = async (namespace: string | undefined, name: string): Promise<void> => {
    await client.raw("DELETE", resourcePath(r, namespace, name), { query: { gracePeriodSeconds: "0" } }).catch(() => undefined);
  };
  if (r.key === "namespace" && !r.namespaced) {
    // Every cluster-scoped object hashes as "" under namespace keying: one range holds them all.
    throw new ShardcarError("SHARDCAR_ERR_CONFIG", `${rid} is cluster-scoped and keyed by namespace: every object hashes the same, so there is no canary per range`);
  }
  try {
    if (r.key === "uid") {
      const ns = r.namespaced ? opts.namespace : undefined;
      while (covered.size < targets.length && created < opts.maxObjects) {
        const o = await create(ns);
        const owner = ownerNeeding(targets, covered, fnv1a64(o.uid));
        if (owner === undefined) {
          await remove(ns, o.name);
          continue;
        }
        covered.add(owner.name);
        placed.push({ target: owner.name, namespace: ns, name: o.name, keyValue: o.uid, createdAt: now() });
      }
    } else if (r.namespaced) {
      // Namespace keying: choose a fresh namespace name per range, so the key
      // the proxy reports can only be this canary's.
      for (const t of targets) {
        const ns = namespaceIn(t.ranges, `shardcar-canary-${opts.runId}`);
        if (ns === undefined) continue;
        const res = await client.raw("POST", "/api/v1/namespaces", { body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels: { [CANARY_LABEL]: opts.runId } } } });
        if (res.status !== 201 && res.status !== 200 && res.status !== 409) throw new ShardcarError("SHARDCAR_ERR_UPSTREAM", `creating canary namespace ${ns}: HTTP ${res.status}`);
        const o = await create(ns);
        covered.add(t.name);
        placed.push({ target: t.name, namespace: ns, name: o.name, keyValue: ns, createdAt: now(), ownNamespace: ns });
      }
    }
    // Ask every owner about every canary until each expected owner has
    // delivered it (or time is up); then once more, for leaks.
    const seen = new Map<Placed, Map<string, number>>(placed.map((p) => [p, new Map()]));
    const unreachable = new Map<Placed, Map<string, string>>(placed.map((p) => [p, new Map()]));
    const expectedOf = (p: Placed): Owner[] => opts.owners.owners.filter((o) => o.serving && contains(o.ranges, fnv1a64(p.keyValue)));
    const deadline = now() + opts.timeoutMs;
    const poll = async (): Promise<void> => {
      for (const p of placed) {
        for (const o of opts.owners.owners) {
          if (!o.serving || seen.get(p)?.has(o.name) === true) continue;
          try {
            if (await opts.delivered(o, p.keyValue)) seen.get(p)?.set(o.name, now() - p.createdAt);
            unreachable.get(p)?.delete(o.name);
          } catch (e) {
            unreachable.get(p)?.set(o.name, `${o.name}: ${e instanceof Error ? e.message : String(e)}`);
          }
        }
      }
    };
    for (;;) {
      await poll();
      const done = placed.every((p) => expectedOf(p).every((o) => seen.get(p)?.has(o.name) === true));
      if (done || now() >= deadline) break;
      await sleep(200);
    }
    await poll();
    const results: CanaryResult[] = placed.map((p) => {
      const expected = expectedOf(p).map((o) => o.name);
      const s = seen.get(p) ?? new Map<string, number>();
      const seenBy = [...s.keys()];
      const all = expected.every((o) => s.has(o));
      return {
        target: p.target,
        id: p.namespace === undefined ? p.name : `${p.namespace}/${p.name}`,
        keyValue: p.keyValue,
        expectedBy: expected,
        seenBy: seenBy.filter((o) => expected.includes(o)),
        leakedTo: seenBy.filter((o) => !expected.includes(o)),
        unreachable: [...(unreachable.get(p)?.values() ?? [])],
        latencyMs: all && expected.length > 0 ? Math.max(...expected.map((o) => s.get(o) ?? 0)) : undefined,
      };
    });
    const uncovered = targets.filter((t) => !covered.has(t.name)).map((t) => t.name);
    return { results, uncovered, created, ok: canaryOk(results, uncovered) };
  } finally {
    for (const p of placed) {
      await remove(p.namespace, p.name);
      if (p.ownNamespace !== undefined) await client.raw("DELETE", `/api/v1/namespaces/${p.ownNamespace}`).catch(() => undefined);
    }
  }
}
