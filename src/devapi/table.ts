/**
 * Server-side printing (`as=Table`): column definitions, rows, and the
 * one-row tables a Table watch sends. Pure: the clock is a parameter.
 */
import { goJson } from "./json.ts";
import type { KubeObject, TableColumn } from "./types.ts";

/**
 * What printing reads of a stored version (the store's StoredObject is one).
 * Named here, not imported, because the store takes its default columns
 * from this file: the two would import each other.
 */
export interface PrintedObject {
  readonly name: string;
  readonly object: KubeObject;
  /** The whole object's bytes. */
  readonly full: Buffer;
  /** The object's `metadata` bytes. */
  readonly metaJson: Buffer;
}

export type IncludeObject = "None" | "Metadata" | "Object";

const NAME_COLUMN = {
  name: "Name",
  type: "string",
  format: "name",
  description:
    "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
  priority: 0,
};

const CREATION_TIMESTAMP_DESCRIPTION =
  "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/** The default columns after Name, as the generic registry prints them. */
export const DEFAULT_COLUMNS: readonly TableColumn[] = [
  {
    name: "Created At",
    type: "date",
    format: "",
    description: CREATION_TIMESTAMP_DESCRIPTION,
    priority: 0,
    cell: (o) => o.metadata?.creationTimestamp ?? null,
  },
];

/** k8s.io/apimachinery/pkg/util/duration.HumanDuration, the `Age` column's format. */
export function humanDuration(ms: number): string {
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.trunc(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.trunc(minutes / 60);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${Math.trunc(hours / 24)}d` : `${Math.trunc(hours / 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.trunc(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const dy = Math.trunc(hours / 24) % 365;
    return dy === 0 ? `${Math.trunc(hours / 24 / 365)}y` : `${Math.trunc(hours / 24 / 365)}y${dy}d`;
  }
  return `${Math.trunc(hours / 24 / 365)}y`;
}

/** The `Age` cell: time since creationTimestamp. */
export function ageOf(o: KubeObject, now: number): string {
  const ts = o.metadata?.creationTimestamp;
  if (ts === undefined) return "<unknown>";
  return humanDuration(now - Date.parse(ts));
}

/**
 * The columns after Name of a custom resource whose CRD declares no
 * additionalPrinterColumns: apiextensions prints `Age` (type `date`, cell a
 * human duration), not the generic registry's `Created At`.
 */
export const CUSTOM_RESOURCE_COLUMNS: readonly TableColumn[] = [{ name: "Age", type: "date", format: "", description: CREATION_TIMESTAMP_DESCRIPTION, priority: 0, cell: ageOf }];

export const AGE_COLUMN: TableColumn = {
  name: "Age",
  type: "string",
  format: "",
  description: CREATION_TIMESTAMP_DESCRIPTION,
  priority: 0,
  cell: ageOf,
};

/** `"columnDefinitions":[...]` content for a resource's columns. */
export function columnDefinitionsJson(columns: readonly TableColumn[]): string {
  return goJson([NAME_COLUMN, ...columns.map(({ name, type, format, description, priority }) => ({ name, type, format, description, priority }))]);
}

export function pomJson(o: PrintedObject, version: string): Buffer {
  return Buffer.concat([Buffer.from(`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/${version}","metadata":`), o.metaJson, Buffer.from("}")]);
}

/** One `rows[]` entry. */
export function rowJson(o: PrintedObject, columns: readonly TableColumn[], include: IncludeObject, version: string, now: number): Buffer {
  const cells = [o.name, ...columns.map((c) => c.cell(o.object, now))];
  const head = Buffer.from(`{"cells":${goJson(cells)}`);
  if (include === "None") return Buffer.concat([head, Buffer.from("}")]);
  const obj = include === "Object" ? o.full : pomJson(o, version);
  return Buffer.concat([head, Buffer.from(`,"object":`), obj, Buffer.from("}")]);
}
