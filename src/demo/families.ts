/**
 * The demo's parents and children: Deployments and the ReplicaSets an
 * unmodified controller creates for them (src/demo/parent-child-controller.ts,
 * which acts on its caches alone), sharded with `deployments.apps,
 * replicasets.apps=owner` so that a child hashes its parent's uid and sits
 * in its parent's shard. What the scene checks is read from devapi's store
 * and the controllers' own caches: every parent has exactly one child (a
 * replica that held a parent without its child would have created a second),
 * and each replica caches the children of exactly the parents it caches.
 */
import type { DevApi } from "../devapi/index.ts";
import type { ResourceDef } from "../devapi/types.ts";
import { controllerOwnerUid } from "../shard/slots.ts";
import type { ResourceRef } from "./kube-resources.ts";
import type { ParentChildController } from "./parent-child-controller.ts";

export const FAMILY_NS = "apps";
export const DEPLOYMENTS: ResourceRef = { group: "apps", version: "v1", plural: "deployments", kind: "Deployment" };
export const REPLICASETS: ResourceRef = { group: "apps", version: "v1", plural: "replicasets", kind: "ReplicaSet" };
/** As `shardcar.io/resources` names them. */
export const FAMILY_RESOURCES = "deployments.apps, replicasets.apps=owner";

const def = (r: ResourceRef, shortName: string): ResourceDef => ({ group: r.group, version: r.version, resource: r.plural, kind: r.kind, namespaced: true, shortNames: [shortName], statusSubresource: true, generation: true });

export function registerFamilyResources(api: DevApi): void {
  api.registerResource(def(DEPLOYMENTS, "deploy"));
  api.registerResource(def(REPLICASETS, "rs"));
  api.store.create("namespaces", { metadata: { name: FAMILY_NS } });
}

/** A parent, as a user's `kubectl apply` would create it (no child: the controller makes that). */
export function createParent(api: DevApi, name: string): void {
  api.store.create(
    { group: DEPLOYMENTS.group, version: DEPLOYMENTS.version, resource: DEPLOYMENTS.plural },
    { apiVersion: "apps/v1", kind: "Deployment", metadata: { name, namespace: FAMILY_NS, labels: { app: name } }, spec: { replicas: 1, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "app", image: "registry.invalid/app:1" }] } } } },
  );
}

export interface FamilyCensus {
  readonly parents: number;
  /** Parents with no child yet. */
  readonly childless: number;
  /** Parents with more than one child: a replica created a child its cache did not show. */
  readonly duplicated: readonly string[];
  /** Children each replica created. */
  readonly createdBy: ReadonlyMap<string, number>;
  /** Replicas whose cache holds a parent without its child, or a child without its parent. */
  readonly split: readonly string[];
}

/** `controllers`: the live replicas' controllers, by replica name. */
export function familyCensus(api: DevApi, controllers: ReadonlyMap<string, ParentChildController>): FamilyCensus {
  const parents = api.store.list({ group: "apps", version: "v1", resource: "deployments" });
  const children = api.store.list({ group: "apps", version: "v1", resource: "replicasets" });
  const childrenOf = new Map<string, string[]>();
  for (const c of children) {
    const owner = controllerOwnerUid(c.metadata ?? {});
    if (owner !== undefined) childrenOf.set(owner, [...(childrenOf.get(owner) ?? []), c.metadata?.uid ?? ""]);
  }
  const duplicated = parents.filter((p) => (childrenOf.get(p.metadata?.uid ?? "")?.length ?? 0) > 1).map((p) => p.metadata?.name ?? "");
  const childless = parents.filter((p) => !childrenOf.has(p.metadata?.uid ?? "")).length;
  const createdBy = new Map<string, number>();
  const split: string[] = [];
  for (const [name, ctl] of controllers) {
    createdBy.set(name, ctl.created.length);
    const uidOf = (ident: string): string => ident.slice(ident.lastIndexOf("@") + 1);
    const cachedParents = new Set([...ctl.parents()].map(uidOf));
    const cachedChildren = new Set([...ctl.children()].map(uidOf));
    const wanted = [...cachedParents].flatMap((uid) => childrenOf.get(uid) ?? []);
    if (wanted.length !== cachedChildren.size || wanted.some((uid) => !cachedChildren.has(uid))) split.push(name);
  }
  return { parents: parents.length, childless, duplicated, createdBy, split };
}
