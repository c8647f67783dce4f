/**
 * Objects with every metadata shape the key readers must place (src/proxy/
 * scan/object-key.ts): ownerReferences in both key orders apiservers write
 * (Go struct order for typed objects, sorted keys for custom resources),
 * several references, `controller` false, missing or not a boolean,
 * references that are not objects and ownerReferences that is not an array,
 * decoys in a pod template and outside `metadata`, slot labels good and bad.
 * The same plain object encodes as JSON (typed or sorted) and, where its
 * values fit the schema, as a protobuf Pod, so each scanner can be checked
 * against `keyValue()` of `JSON.parse` of the very same object.
 */
import { fnv1a64 } from "../../src/shard/hash.ts";
import { keyValue, parseSlot } from "../../src/shard/slots.ts";
import { slotRange } from "../../src/shard/table.ts";
import type { ObjectKey } from "../../src/proxy/scan/object-key.ts";
import { encodeEnvelope, encodeEventFrame, type K8sProto, type PlainObject } from "./proto/k8s.ts";
import { uuid } from "./proto/pods.ts";

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type Obj = { [k: string]: Json };

export function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `metadata.name` of an object, "" when it has none. */
export function nameOf(o: Json | undefined): string {
  const m = isObj(o) ? o["metadata"] : undefined;
  const n = isObj(m) ? m["name"] : undefined;
  return typeof n === "string" ? n : "";
}

/** The same value with every object's keys sorted, as custom resources are served. */
export function sortedKeys(v: Json): Json {
  if (Array.isArray(v)) return v.map(sortedKeys);
  if (!isObj(v)) return v;
  return Object.fromEntries(
    Object.keys(v)
      .sort()
      .map((k) => [k, sortedKeys(v[k] as Json)]),
  );
}

/** An OwnerReference in Go struct order: apiVersion, kind, name, uid, controller, blockOwnerDeletion. */
export function ref(uid: Json | undefined, controller: Json | undefined, name = "parent"): Obj {
  const r: Obj = { apiVersion: "example.com/v1", kind: "Widget", name };
  if (uid !== undefined) r["uid"] = uid;
  if (controller !== undefined) r["controller"] = controller;
  r["blockOwnerDeletion"] = true;
  return r;
}

/** ObjectMeta in Go struct order: name, namespace, uid, resourceVersion, labels, annotations, ownerReferences, managedFields. */
export function meta(m: { name: string; namespace?: string; uid?: Json; labels?: Json; ownerReferences?: Json; rv?: string }): Obj {
  const o: Obj = { name: m.name };
  if (m.namespace !== undefined) o["namespace"] = m.namespace;
  if (m.uid !== undefined) o["uid"] = m.uid;
  o["resourceVersion"] = m.rv ?? "100";
  if (m.labels !== undefined) o["labels"] = m.labels;
  o["annotations"] = { "example.com/note": "x" };
  if (m.ownerReferences !== undefined) o["ownerReferences"] = m.ownerReferences;
  o["managedFields"] = [{ manager: "m", operation: "Update", fieldsV1: { "f:metadata": {} } }];
  return o;
}

/** A typed object: TypeMeta, metadata, then a spec whose pod template carries decoy ownerReferences and labels. */
export function object(metadata: Obj, decoy?: { ownerUid: string; labels: Obj }): Obj {
  const spec: Obj = { replicas: 1 };
  if (decoy !== undefined) {
    spec["template"] = { metadata: { labels: decoy.labels, ownerReferences: [ref(decoy.ownerUid, true, "decoy")], uid: "decoy-uid" }, spec: { containers: [] } };
  }
  const o: Obj = { kind: "Widget", apiVersion: "example.com/v1", metadata, spec };
  // A top-level member named like a metadata one: not the object's metadata.
  if (decoy !== undefined) o["ownerReferences"] = [ref(decoy.ownerUid, true, "top-level-decoy")];
  return o;
}

/** The point the filters must place `obj` at for `key`: the hash of keyValue(JSON.parse), or a slot's first hash; undefined when it is in no shard. */
export function expectedPoint(obj: Json, key: ObjectKey): bigint | undefined {
  const m = isObj(obj) ? obj["metadata"] : undefined;
  if (!isObj(m)) return undefined;
  if (typeof key === "object") {
    const labels = m["labels"];
    const v = isObj(labels) ? labels[key.label] : undefined;
    const slot = typeof v === "string" ? parseSlot(v, key.slotCount) : undefined;
    return slot === undefined ? undefined : slotRange(slot, key.slotCount).start;
  }
  // As decoded: keyValue() must skip what the scanners skip (non-objects, a non-array).
  return fnv1a64(keyValue(m, key) ?? "");
}

/** Random objects, each one of the shapes above; `protoSafe` keeps to values the protobuf schema can hold. */
export function randomObjects(r: () => number, n: number, slot: { label: string; slotCount: number }, protoSafe: boolean): Obj[] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
  const out: Obj[] = [];
  for (let i = 0; i < n; i++) {
    const refs: Json[] = [];
    const nRefs = pick([0, 0, 1, 1, 1, 2, 3]);
    for (let k = 0; k < nRefs; k++) {
      const uid = r() < 0.9 ? uuid(r) : protoSafe ? undefined : pick<Json>([7, null]);
      const controller = pick<Json | undefined>(protoSafe ? [true, true, false, undefined] : [true, true, false, undefined, "true", 1]);
      refs.push(ref(uid, controller, `p${k}`));
    }
    if (!protoSafe && r() < 0.05) refs.push(pick<Json>(["not-a-ref", null, 3]));
    const labels: Obj = { app: "a" };
    const l = r();
    if (l < 0.7) labels[slot.label] = String(Math.floor(r() * slot.slotCount));
    else if (l < 0.85) labels[slot.label] = pick(["007", "-1", "", String(slot.slotCount), "1e2", " 3"]);
    else if (l < 0.9 && !protoSafe) labels[slot.label] = 5;
    const m = meta({
      name: `o-${i}`,
      ...(r() < 0.8 ? { namespace: pick(["a", "team-b", "c"]) } : {}),
      ...(r() < 0.95 ? { uid: uuid(r) } : {}),
      labels,
      ...(!protoSafe && r() < 0.03 ? { ownerReferences: pick<Json>([{ uid: uuid(r), controller: true }, "refs", 4]) } : refs.length > 0 || r() < 0.5 ? { ownerReferences: refs } : {}),
    });
    const obj = object(m, r() < 0.5 ? { ownerUid: uuid(r), labels: { [slot.label]: "1" } } : undefined);
    out.push(r() < 0.5 ? obj : (sortedKeys(obj) as Obj));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Encodings

export function jsonList(items: readonly Json[], kind = "WidgetList"): Buffer {
  return Buffer.from(JSON.stringify({ kind, apiVersion: "example.com/v1", metadata: { resourceVersion: "500" }, items }));
}

export function jsonWatch(items: readonly Json[]): Buffer {
  return Buffer.from(items.map((o) => `${JSON.stringify({ type: "ADDED", object: o })}\n`).join(""));
}

/** `obj` as a protobuf Pod: its metadata, a minimal spec; protobuf decoys cannot live outside field 1 anyway. */
export function podOf(obj: Obj): PlainObject {
  const m = obj["metadata"] as Obj;
  const pm: Record<string, unknown> = { name: m["name"], resourceVersion: m["resourceVersion"] };
  for (const k of ["namespace", "uid", "labels", "annotations"]) if (m[k] !== undefined) pm[k] = m[k];
  if (Array.isArray(m["ownerReferences"])) pm["ownerReferences"] = m["ownerReferences"];
  return { metadata: pm, spec: { containers: [{ name: "c", image: "x" }] } };
}

export function protoList(pb: K8sProto, items: readonly Obj[]): Buffer {
  const T = pb.type("PodList");
  const raw = T.encode(T.fromObject({ metadata: { resourceVersion: "500" }, items: items.map(podOf) })).finish();
  return encodeEnvelope(pb, "v1", "PodList", raw);
}

export function protoWatch(pb: K8sProto, items: readonly Obj[]): Buffer {
  return Buffer.concat(items.map((o) => encodeEventFrame(pb, "ADDED", "v1", "Pod", podOf(o))));
}
