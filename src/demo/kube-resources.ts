/**
 * One namespaced resource, of a named group (custom resources, apps/v1) or
 * ConfigMaps, as the demo's and the tests' controllers and observers reach it
 * through `@kubernetes/client-node`: the informer's watch path, its
 * cluster-wide LIST, and the writes a controller (or a test playing the
 * garbage collector) makes. Named groups go through CustomObjectsApi, whose
 * paths are `/apis/<group>/<version>/…` for any group; the core group through
 * CoreV1Api, which knows ConfigMaps only here (the children these need).
 */
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type KubernetesListObject, type KubernetesObject } from "@kubernetes/client-node";

export interface ResourceRef {
  /** "" for the core group. */
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly kind: string;
}

export const CONFIGMAPS: ResourceRef = { group: "", version: "v1", plural: "configmaps", kind: "ConfigMap" };

export function apiVersionOf(r: ResourceRef): string {
  return r.group === "" ? r.version : `${r.group}/${r.version}`;
}

/** The resource as `shardcar.io/resources` names it, with a key: `configmaps=owner`, `widgets.example.com`. */
export function resourceEntry(r: ResourceRef, key: "uid" | "owner" | "namespace" = "uid"): string {
  const name = r.group === "" ? r.plural : `${r.plural}.${r.group}`;
  return key === "uid" ? name : `${name}=${key}`;
}

export interface ResourceClient {
  /** The cluster-wide collection, as an informer watches it. */
  readonly path: string;
  list(): Promise<KubernetesListObject<KubernetesObject>>;
  create(namespace: string, body: KubernetesObject): Promise<KubernetesObject>;
  delete(namespace: string, name: string): Promise<void>;
}

export function resourceClient(kc: KubeConfig, r: ResourceRef): ResourceClient {
  if (r.group === "") {
    if (r.plural !== "configmaps") throw new Error(`resourceClient: core resource ${r.plural} is not supported (configmaps only)`);
    const core = kc.makeApiClient(CoreV1Api);
    return {
      path: `/api/${r.version}/configmaps`,
      list: () => core.listConfigMapForAllNamespaces(),
      create: (namespace, body) => core.createNamespacedConfigMap({ namespace, body }),
      delete: async (namespace, name) => {
        await core.deleteNamespacedConfigMap({ namespace, name });
      },
    };
  }
  const custom = kc.makeApiClient(CustomObjectsApi);
  const { group, version, plural } = r;
  return {
    path: `/apis/${group}/${version}/${plural}`,
    list: () => custom.listClusterCustomObject({ group, version, plural }) as Promise<KubernetesListObject<KubernetesObject>>,
    create: (namespace, body) => custom.createNamespacedCustomObject({ group, version, plural, namespace, body }) as Promise<KubernetesObject>,
    delete: async (namespace, name) => {
      await custom.deleteNamespacedCustomObject({ group, version, plural, namespace, name });
    },
  };
}

/** The uid of the object's controller ownerReference, if any. */
export function controllerRef(o: KubernetesObject): { readonly kind?: string; readonly name: string; readonly uid: string } | undefined {
  return o.metadata?.ownerReferences?.find((r) => r.controller === true);
}

/** `ns/name@uid`, as the co-location tests name objects. */
export function ident(o: KubernetesObject): string {
  return `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}@${o.metadata?.uid ?? ""}`;
}
