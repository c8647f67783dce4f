/**
 * CustomResourceDefinitions become served resources: a pure mapping from a
 * CRD object to the {@link ResourceDef}s of its served versions (unstructured,
 * `/status` when declared, additionalPrinterColumns as Table columns).
 * index.ts registers them when a CRD is written, so applying a CRD manifest
 * to devapi works as on a cluster (minus schema validation and conversion).
 */
import { isRecord } from "../is-record.ts";
import { CUSTOM_RESOURCE_COLUMNS } from "./table.ts";
import type { KubeObject, ResourceDef, TableColumn } from "./types.ts";

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

/** Follows a simple JSONPath (`.status.committed.generation`); anything fancier yields null. */
export function simpleJsonPath(obj: unknown, path: string): unknown {
  if (!/^(\.[A-Za-z0-9_-]+)+$/.test(path)) return null;
  let cur: unknown = obj;
  for (const k of path.slice(1).split(".")) {
    if (!isRecord(cur)) return null;
    cur = cur[k];
  }
  return cur === undefined ? null : cur;
}

function printerColumns(raw: unknown): TableColumn[] | undefined {
  if (!Array.isArray(raw) || raw.length === 0) return undefined;
  return raw.filter(isRecord).map((c) => {
    const jsonPath = str(c.jsonPath);
    return {
      name: str(c.name),
      type: str(c.type) || "string",
      format: str(c.format),
      description: str(c.description) || `Custom resource definition column (in JSONPath format): ${jsonPath}`,
      priority: typeof c.priority === "number" ? c.priority : 0,
      cell: (o: KubeObject) => {
        const v = simpleJsonPath(o, jsonPath);
        return typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? v : v === null ? null : JSON.stringify(v);
      },
    };
  });
}

/** The resources a CRD serves; empty when it is malformed or serves nothing. */
export function defsFromCrd(crd: KubeObject): ResourceDef[] {
  const spec = isRecord(crd.spec) ? crd.spec : {};
  const names = isRecord(spec.names) ? spec.names : {};
  const group = str(spec.group);
  const plural = str(names.plural);
  const kind = str(names.kind);
  if (group === "" || plural === "" || kind === "") return [];
  const versions = Array.isArray(spec.versions) ? spec.versions.filter(isRecord) : [];
  return versions
    .filter((v) => v.served === true && str(v.name) !== "")
    .map((v) => {
      const def: ResourceDef = {
        group,
        version: str(v.name),
        resource: plural,
        kind,
        namespaced: spec.scope !== "Cluster",
        encoding: "unstructured",
        listKind: str(names.listKind) || `${kind}List`,
        singular: str(names.singular) || kind.toLowerCase(),
        shortNames: Array.isArray(names.shortNames) ? names.shortNames.map(str) : [],
        categories: Array.isArray(names.categories) ? names.categories.map(str) : [],
        statusSubresource: isRecord(v.subresources) && isRecord(v.subresources.status),
        columns: printerColumns(v.additionalPrinterColumns) ?? CUSTOM_RESOURCE_COLUMNS,
      };
      return def;
    });
}
