/**
 * An independent protobuf decoder for Kubernetes bodies, built with protobufjs
 * from the trimmed upstream `.proto` files next to this module. Tests use it
 * as the reference the schema-less scanner is checked against; benchmarks use
 * it to build realistic inputs and as their baseline.
 */
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import protobuf from "protobufjs";

const PROTO_DIR = fileURLToPath(new URL("./", import.meta.url));

const PROTO_FILES = [
  "k8s.io/api/core/v1/generated.proto",
  "k8s.io/api/coordination/v1/generated.proto",
  "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/generated.proto",
];

/** Message type for each kind a fixture body holds. */
const KINDS: Readonly<Record<string, string>> = {
  Pod: "k8s.io.api.core.v1.Pod",
  PodList: "k8s.io.api.core.v1.PodList",
  ConfigMap: "k8s.io.api.core.v1.ConfigMap",
  ConfigMapList: "k8s.io.api.core.v1.ConfigMapList",
  Lease: "k8s.io.api.coordination.v1.Lease",
  LeaseList: "k8s.io.api.coordination.v1.LeaseList",
  CustomResourceDefinition: "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
  CustomResourceDefinitionList: "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionList",
  PartialObjectMetadata: "k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata",
  PartialObjectMetadataList: "k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList",
  Status: "k8s.io.apimachinery.pkg.apis.meta.v1.Status",
};

export interface K8sProto {
  readonly root: protobuf.Root;
  readonly Unknown: protobuf.Type;
  readonly WatchEvent: protobuf.Type;
  readonly type: (kind: string) => protobuf.Type;
}

/** Loads the trimmed definitions. Cheap enough to call per test file. */
export function loadK8sProto(): K8sProto {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(PROTO_DIR, target);
  root.loadSync(PROTO_FILES, { keepCase: true });
  root.resolveAll();
  return {
    root,
    Unknown: root.lookupType("k8s.io.apimachinery.pkg.runtime.Unknown"),
    WatchEvent: root.lookupType("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent"),
    type: (kind) => {
      const name = KINDS[kind];
      if (name === undefined) throw new Error(`no protobuf type known for kind ${kind}`);
      return root.lookupType(name);
    },
  };
}

const TO_OBJECT: protobuf.IConversionOptions = { longs: String, bytes: String, defaults: false };

export interface DecodedEnvelope {
  readonly apiVersion: string;
  readonly kind: string;
  readonly raw: Uint8Array;
  readonly contentEncoding: string;
  readonly contentType: string;
}

export interface PlainObject {
  readonly [k: string]: unknown;
}

export interface DecodedObject {
  readonly apiVersion: string;
  readonly kind: string;
  /** The object as protobufjs reads it (keepCase, longs and bytes as strings). */
  readonly object: PlainObject;
}

interface MetaLike {
  name?: string;
  uid?: string;
  namespace?: string;
  resourceVersion?: string;
  annotations?: Record<string, string>;
}

/** `metadata` of a decoded object (or list), as far as the tests read it. */
export function metaOf(o: PlainObject): MetaLike {
  const m = o["metadata"];
  return typeof m === "object" && m !== null ? (m) : {};
}

export function decodeEnvelope(pb: K8sProto, body: Uint8Array): DecodedEnvelope {
  if (body.length < 4 || body[0] !== 0x6b || body[1] !== 0x38 || body[2] !== 0x73 || body[3] !== 0x00) {
    throw new Error("no k8s\\0 prefix");
  }
  const u = pb.Unknown.toObject(pb.Unknown.decode(body.subarray(4)), { defaults: true }) as {
    typeMeta?: { apiVersion?: string; kind?: string };
    raw: Uint8Array;
    contentEncoding: string;
    contentType: string;
  };
  return {
    apiVersion: u.typeMeta?.apiVersion ?? "",
    kind: u.typeMeta?.kind ?? "",
    raw: u.raw,
    contentEncoding: u.contentEncoding,
    contentType: u.contentType,
  };
}

/** Decodes a whole `k8s\0` body (an object, a list or a Status) strictly. */
export function decodeObject(pb: K8sProto, body: Uint8Array): DecodedObject {
  const env = decodeEnvelope(pb, body);
  const T = pb.type(env.kind);
  return { apiVersion: env.apiVersion, kind: env.kind, object: T.toObject(T.decode(env.raw), TO_OBJECT) };
}

export interface DecodedList extends DecodedObject {
  readonly items: readonly PlainObject[];
}

export function decodeList(pb: K8sProto, body: Uint8Array): DecodedList {
  const d = decodeObject(pb, body);
  const items = d.object["items"];
  return { ...d, items: Array.isArray(items) ? (items as PlainObject[]) : [] };
}

/** Splits a protobuf watch stream into frame bodies (without the 4-byte length); throws on a cut frame. */
export function splitFrames(stream: Uint8Array): Buffer[] {
  const b = Buffer.from(stream.buffer, stream.byteOffset, stream.length);
  const out: Buffer[] = [];
  let o = 0;
  while (o < b.length) {
    if (b.length - o < 4) throw new Error(`cut frame header at ${o}`);
    const len = b.readUInt32BE(o);
    if (b.length - o - 4 < len) throw new Error(`cut frame at ${o}: ${len} bytes announced`);
    out.push(b.subarray(o + 4, o + 4 + len));
    o += 4 + len;
  }
  return out;
}

export interface DecodedEvent extends DecodedObject {
  readonly type: string;
}

export function decodeEvent(pb: K8sProto, frame: Uint8Array): DecodedEvent {
  const ev = pb.WatchEvent.toObject(pb.WatchEvent.decode(frame), { defaults: true }) as { type: string; object?: { raw?: Uint8Array } };
  const raw = ev.object?.raw;
  if (raw === undefined) throw new Error(`${ev.type} event without object.raw`);
  return { type: ev.type, ...decodeObject(pb, raw) };
}

/** Frames one WatchEvent body for the wire. */
export function frame(body: Uint8Array): Buffer {
  const h = Buffer.allocUnsafe(4);
  h.writeUInt32BE(body.length, 0);
  return Buffer.concat([h, body]);
}

/** Encodes `k8s\0` + Unknown{typeMeta, raw} the way the apiserver does (with empty contentEncoding/contentType). */
export function encodeEnvelope(pb: K8sProto, apiVersion: string, kind: string, raw: Uint8Array): Buffer {
  const u = pb.Unknown.encode(pb.Unknown.create({ typeMeta: { apiVersion, kind }, raw, contentEncoding: "", contentType: "" })).finish();
  return Buffer.concat([Buffer.from([0x6b, 0x38, 0x73, 0x00]), u]);
}

/** Encodes a plain object of `kind` and wraps it in the envelope. */
export function encodeObject(pb: K8sProto, apiVersion: string, kind: string, object: PlainObject): Buffer {
  const T = pb.type(kind);
  return encodeEnvelope(pb, apiVersion, kind, T.encode(T.fromObject(object)).finish());
}

/** One framed WatchEvent whose object is `kind`. */
export function encodeEventFrame(pb: K8sProto, type: string, apiVersion: string, kind: string, object: PlainObject): Buffer {
  const raw = encodeObject(pb, apiVersion, kind, object);
  return frame(pb.WatchEvent.encode(pb.WatchEvent.create({ type, object: { raw } })).finish());
}
