/**
 * The DELETED events a narrowing proxy makes up for objects leaving its
 * ranges (docs/rings.md, "Narrowing without a relist"). Informers key their
 * store by namespace/name, so the object carries only its identity, its type
 * and the stream's current resourceVersion (the reflector records it as its
 * resume point, so it must be the client's newest, never an object's own
 * older one). The annotation tells a curious controller author where it came
 * from: a relist would have produced the same delete notification.
 */
import type { Encoding } from "../request/accept.ts";
import { META_ANNOTATIONS, META_NAME, META_NAMESPACE, META_RESOURCE_VERSION, META_UID, OBJECT_META_FIELD } from "../scan/proto-object.ts";
import { envelope, typeMeta, watchEventFrame } from "../scan/proto-frames.ts";
import { lenField, stringField } from "../scan/proto-wire.ts";
import type { DeliveredObject } from "../scan/tap.ts";

export const SYNTHETIC_DELETE_ANNOTATION = "shardcar.io/synthetic-delete";
const ANNOTATION_VALUE = "left-this-shard";

export interface TypeMeta {
  readonly apiVersion: string;
  readonly kind: string;
}

export function syntheticDelete(encoding: Encoding, type: TypeMeta, obj: DeliveredObject, resourceVersion: string): Buffer {
  return encoding === "json" ? jsonDelete(type, obj, resourceVersion) : protoDelete(type, obj, resourceVersion);
}

function jsonDelete(type: TypeMeta, obj: DeliveredObject, rv: string): Buffer {
  const metadata: Record<string, unknown> = { name: obj.name };
  if (obj.namespace !== "") metadata["namespace"] = obj.namespace;
  if (obj.uid !== "") metadata["uid"] = obj.uid;
  metadata["resourceVersion"] = rv;
  metadata["annotations"] = { [SYNTHETIC_DELETE_ANNOTATION]: ANNOTATION_VALUE };
  return Buffer.from(`${JSON.stringify({ type: "DELETED", object: { kind: type.kind, apiVersion: type.apiVersion, metadata } })}\n`);
}

// Annotations are a map<string,string>: entries {key = 1, value = 2}.
function protoDelete(type: TypeMeta, obj: DeliveredObject, rv: string): Buffer {
  const meta = Buffer.concat([
    stringField(META_NAME, obj.name),
    obj.namespace === "" ? Buffer.alloc(0) : stringField(META_NAMESPACE, obj.namespace),
    obj.uid === "" ? Buffer.alloc(0) : stringField(META_UID, obj.uid),
    stringField(META_RESOURCE_VERSION, rv),
    lenField(META_ANNOTATIONS, stringField(1, SYNTHETIC_DELETE_ANNOTATION), stringField(2, ANNOTATION_VALUE)),
  ]);
  return watchEventFrame("DELETED", envelope(typeMeta(type.apiVersion, type.kind), lenField(OBJECT_META_FIELD, meta)));
}
