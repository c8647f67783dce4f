/**
 * The DELETED events a narrowing proxy makes up for objects leaving its
 * ranges (docs/rings.md, "Narrowing without a relist"). Informers key their
 * store by namespace/name, so the object carries only its identity, its type
 * and the stream's current resourceVersion (the reflector records it as its
 * resume point, so it must be the client's newest, never an object's own
 * older one). The annotation tells a curious controller author where it came
 * from: a relist would have produced the same delete notification.
 */
import type { Encoding } from "./accept.ts";
import { envelope, typeMeta, watchEventFrame } from "./scan/proto-status.ts";
import { lenField, stringField } from "./scan/proto-wire.ts";
import type { DeliveredObject } from "./scan/tap.ts";

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

// ObjectMeta: name = 1, namespace = 3, uid = 5, resourceVersion = 6,
// annotations = 12 (map<string,string> entries {key = 1, value = 2}).
function protoDelete(type: TypeMeta, obj: DeliveredObject, rv: string): Buffer {
  const meta = Buffer.concat([
    stringField(1, obj.name),
    obj.namespace === "" ? Buffer.alloc(0) : stringField(3, obj.namespace),
    obj.uid === "" ? Buffer.alloc(0) : stringField(5, obj.uid),
    stringField(6, rv),
    lenField(12, stringField(1, SYNTHETIC_DELETE_ANNOTATION), stringField(2, ANNOTATION_VALUE)),
  ]);
  return watchEventFrame("DELETED", envelope(typeMeta(type.apiVersion, type.kind), lenField(1, meta)));
}
