/**
 * The bytes of a list response in each format devapi serves (a typed or
 * unstructured list, a Table, a PartialObjectMetadataList), assembled from
 * each object's stored encoding. Pure; apart from server.ts, which decides
 * what the page holds and writes the parts, so that the wire format of a
 * list is read in one place.
 */
import { encodeContinue } from "./continue.ts";
import { goJson } from "./json.ts";
import type { Page, ServingPath } from "./list.ts";
import type { OutputFormat } from "./negotiate.ts";
import type { ListQuery } from "./request.ts";
import type { Selection } from "./selection.ts";
import type { StoredObject } from "./store.ts";
import { columnDefinitionsJson, pomJson, rowJson } from "./table.ts";

/** The bytes of a list response, as an array of parts to write in order. */
export function listBody(sel: Selection, format: OutputFormat, page: Page, rv: number, path: ServingPath, q: ListQuery, now: number): Buffer[] {
  const def = sel.def;
  const cont = page.continueAfter === undefined ? undefined : encodeContinue(rv, page.continueAfter);
  const meta: Record<string, unknown> = { resourceVersion: String(rv) };
  if (cont !== undefined) meta.continue = cont;
  if (page.remainingItemCount !== undefined) meta.remainingItemCount = page.remainingItemCount;
  const parts: Buffer[] = [];
  const items = (each: (o: StoredObject) => Buffer | readonly Buffer[]): void => {
    page.items.forEach((o, i) => {
      if (i > 0) parts.push(COMMA);
      const b = each(o);
      if (Buffer.isBuffer(b)) parts.push(b);
      else parts.push(...b);
    });
  };
  if (format.kind === "table") {
    const cols = def.columns;
    parts.push(Buffer.from(`{"kind":"Table","apiVersion":"meta.k8s.io/${format.version}","metadata":${goJson(meta)},"columnDefinitions":${columnDefinitionsJson(cols)},"rows":[`));
    items((o) => rowJson(o, cols, q.includeObject, format.version, now));
    parts.push(Buffer.from("]}"));
    return parts;
  }
  if (format.kind === "pom") {
    parts.push(Buffer.from(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/${format.version}","metadata":${goJson(meta)},"items":[`));
    items((o) => pomJson(o, format.version));
    parts.push(Buffer.from("]}"));
    return parts;
  }
  if (def.encoding === "unstructured") {
    // Unstructured lists are maps: keys sorted, so metadata (and continue,
    // always present, possibly "") comes after the items, and no shardInfo.
    const umeta: Record<string, unknown> = { continue: cont ?? "" };
    if (page.remainingItemCount !== undefined) umeta.remainingItemCount = page.remainingItemCount;
    umeta.resourceVersion = String(rv);
    parts.push(Buffer.from(`{"apiVersion":${JSON.stringify(def.apiVersion)},"items":[`));
    items((o) => o.full);
    parts.push(Buffer.from(`],"kind":${JSON.stringify(def.listKind)},"metadata":${goJson(umeta)}}`));
    return parts;
  }
  // Typed lists echo the normalised selector on every page (recorded), before the items.
  if (sel.shard !== undefined) meta.shardInfo = { selector: sel.shard.canonical };
  parts.push(Buffer.from(`{"kind":${JSON.stringify(def.listKind)},"apiVersion":${JSON.stringify(def.apiVersion)},"metadata":${goJson(meta)},"items":[`));
  // The etcd path (resourceVersionMatch=Exact) decodes items with their type meta (recorded).
  items((o) => (path === "etcd" ? o.full : o.itemParts()));
  parts.push(Buffer.from("]}"));
  return parts;
}

const COMMA = Buffer.from(",");
