/**
 * The protobuf envelope and the frames that carry events on a protobuf watch
 * stream, as the proxy writes them itself (synthetic BOOKMARKs and DELETEDs;
 * a Status and its ERROR event are status-encoding.ts). Shapes follow
 * k8s.io/apimachinery: WatchEvent {type = 1, object = 2 (RawExtension
 * {raw = 1})}; a watch frame is a 4-byte big-endian length followed by the
 * WatchEvent (no `k8s\0` prefix; the object inside `raw` has one).
 */
import { K8S_MAGIC, lenField, stringField } from "./proto-wire.ts";

const EMPTY = Buffer.alloc(0);

/** `k8s\0` + runtime.Unknown {typeMeta, raw, contentEncoding "", contentType ""}, as the apiserver writes it. */
export function envelope(typeMetaValue: Uint8Array, raw: Uint8Array): Buffer {
  return Buffer.concat([K8S_MAGIC, lenField(1, typeMetaValue), lenField(2, raw), lenField(3, EMPTY), lenField(4, EMPTY)]);
}

/** A TypeMeta message's value bytes. */
export function typeMeta(apiVersion: string, kind: string): Buffer {
  return Buffer.concat([stringField(1, apiVersion), stringField(2, kind)]);
}

/** Prefixes a WatchEvent with its 4-byte big-endian length. */
export function watchFrame(event: Uint8Array): Buffer {
  const header = Buffer.allocUnsafe(4);
  header.writeUInt32BE(event.length, 0);
  return Buffer.concat([header, event]);
}

/** A framed WatchEvent of `type` whose object is `objectEnvelope` (a `k8s\0` body). */
export function watchEventFrame(type: string, objectEnvelope: Uint8Array): Buffer {
  return watchFrame(Buffer.concat([stringField(1, type), lenField(2, lenField(1, objectEnvelope))]));
}

/**
 * A framed BOOKMARK event for an object of the type described by
 * `typeMetaValue` (copied from a real event's envelope, so apiVersion and
 * kind are the stream's own), whose object holds only
 * `metadata.resourceVersion` (ObjectMeta = 1, resourceVersion = 6), like the
 * apiserver's own bookmarks.
 */
export function protoBookmarkFrame(typeMetaValue: Uint8Array, resourceVersion: Uint8Array): Buffer {
  const object = lenField(1, lenField(6, resourceVersion));
  return watchEventFrame("BOOKMARK", envelope(typeMetaValue, object));
}
