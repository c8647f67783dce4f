/**
 * Per-shard leader election for unmodified controllers. A controller with
 * leader election would leave only one replica active; the proxy renames its
 * lock (`leases/<name>`, `configmaps/<name>` or `endpoints/<name>`) to
 * `<name>-<shard identity>` on the way up and back on the way down, so each
 * replica leads its own shard. Pure functions; the proxy does the I/O.
 */
import { joinSegments, pathSegments } from "../../kube/request-path.ts";
import type { LockSpec } from "../../settings/lock.ts";
import { lenHeader, WireReader, WIRE_LEN, hasMagic } from "../scan/proto-wire.ts";

// The lock's spelling and parser belong to the pod settings (src/settings/lock.ts).
export type { LockSpec };

/** The lock name a shard uses. Kept a valid object name: at most 253 characters. */
export function renamedLock(lock: LockSpec, identity: string): string {
  return `${lock.name}-${identity}`.slice(0, 253).replace(/[-.]+$/, "");
}

export type LockMatch =
  /** A request naming the lock in its path: rewrite the path (and the body's name, for updates). */
  | { readonly kind: "object"; readonly path: string; readonly query: string }
  /** A create in the lock's collection: rename it in the body, if it is the lock. */
  | { readonly kind: "create"; readonly path: string; readonly query: string };

/** The lock's collection path, as segments (`<namespace>` matches any one). */
function collection(lock: LockSpec): readonly string[] {
  return lock.resource === "leases" ? ["apis", "coordination.k8s.io", "v1", "namespaces", "<namespace>", "leases"] : ["api", "v1", "namespaces", "<namespace>", lock.resource];
}

function inCollection(segments: readonly string[], lock: LockSpec): boolean {
  const want = collection(lock);
  return segments.length === want.length && want.every((w, i) => w === "<namespace>" || w === segments[i]);
}

/**
 * Whether a request touches the lock. Object paths are rewritten to the
 * renamed lock; creates are flagged so the caller renames the body. The path
 * is read as the apiserver reads it (decoded, then split), so no spelling of
 * the lock's path escapes the renaming; a path it cannot decode is not the
 * lock's (the server refuses it).
 */
export function matchLockRequest(method: string, url: string, lock: LockSpec, renamed: string): LockMatch | undefined {
  const q = url.indexOf("?");
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? "" : url.slice(q);
  const segments = pathSegments(path);
  if (segments === undefined) return undefined;
  const head = segments.slice(0, -1);
  if (inCollection(head, lock) && segments.at(-1) === lock.name) return { kind: "object", path: joinSegments([...head, renamed]), query };
  if (method === "POST" && inCollection(segments, lock)) return { kind: "create", path, query };
  return undefined;
}

interface Named {
  metadata?: { name?: unknown };
  details?: { name?: unknown };
}

/**
 * Renames `metadata.name` (and a Status's `details.name`) from `from` to `to`
 * in a JSON object body. Returns undefined when the body is not JSON or does
 * not carry `from` (the caller then forwards it unchanged).
 */
export function renameJson(body: Buffer, from: string, to: string): Buffer | undefined {
  let doc: Named;
  try {
    doc = JSON.parse(body.toString("utf8")) as Named;
  } catch {
    return undefined;
  }
  if (typeof doc !== "object" || doc === null) return undefined;
  let changed = false;
  if (doc.metadata?.name === from) {
    doc.metadata.name = to;
    changed = true;
  }
  if (doc.details?.name === from) {
    doc.details.name = to;
    changed = true;
  }
  if (!changed) return undefined;
  try {
    return Buffer.from(JSON.stringify(doc));
  } catch {
    // Nesting deeper than the stack (JSON.parse has no such limit): no
    // server accepts such a lock either; it gets the body as sent.
    return undefined;
  }
}

/**
 * Rewrites the length-delimited field at `path` (field numbers, outermost
 * first) inside `msg` with `edit`, re-encoding every enclosing length.
 */
function rewriteAt(msg: Uint8Array, path: readonly number[], edit: (value: Uint8Array) => Uint8Array | undefined): Buffer | undefined {
  const [field, ...rest] = path;
  const r = new WireReader().reset(msg, 0, msg.length);
  const parts: Uint8Array[] = [];
  let last = 0;
  let changed = false;
  while (r.next()) {
    if (r.field !== field || r.wire !== WIRE_LEN) continue;
    const value = msg.subarray(r.valueStart, r.valueEnd);
    const next = rest.length === 0 ? edit(value) : rewriteAt(value, rest, edit);
    if (next === undefined) continue;
    parts.push(msg.subarray(last, r.fieldStart), lenHeader(field, next.length), next);
    last = r.valueEnd;
    changed = true;
  }
  if (!changed) return undefined;
  parts.push(msg.subarray(last));
  return Buffer.concat(parts);
}

// k8s\0 envelope: runtime.Unknown.raw = 2 → object.metadata = 1 → name = 1.
const NAME_PATH = [2, 1, 1];
// Status.details = 5 → StatusDetails.name = 1 (inside Unknown.raw = 2).
const STATUS_NAME_PATH = [2, 5, 1];

/** The same as {@link renameJson} for a Kubernetes protobuf body. */
export function renameProto(body: Buffer, from: string, to: string): Buffer | undefined {
  if (!hasMagic(body, 0, body.length)) return undefined;
  const fromBytes = Buffer.from(from);
  const edit = (v: Uint8Array): Uint8Array | undefined => (Buffer.from(v).equals(fromBytes) ? Buffer.from(to) : undefined);
  try {
    const inner = body.subarray(4);
    const renamed = rewriteAt(inner, NAME_PATH, edit) ?? rewriteAt(inner, STATUS_NAME_PATH, edit);
    return renamed === undefined ? undefined : Buffer.concat([body.subarray(0, 4), renamed]);
  } catch {
    return undefined;
  }
}

/** Renames in whichever encoding `contentType` says the body is in. */
export function renameBody(body: Buffer, contentType: string | undefined, from: string, to: string): Buffer | undefined {
  return (contentType ?? "").startsWith("application/vnd.kubernetes.protobuf") ? renameProto(body, from, to) : renameJson(body, from, to);
}
