/**
 * A watch stream read as it arrives, JSON lines or protobuf frames, each event
 * decoded independently of the proxy's scanners (JSON.parse; protobufjs from
 * the upstream .proto files) and kept with its exact bytes.
 */
import type { IncomingHttpHeaders } from "node:http";
import { decodeEvent, loadK8sProto, type K8sProto } from "../../support/proto/k8s.ts";
import { eventually, open, type KubeMeta, type Target } from "./realapi.ts";

let proto: K8sProto | undefined;
export function k8sProto(): K8sProto {
  proto ??= loadK8sProto();
  return proto;
}

export interface WatchEvent {
  readonly type: string;
  readonly kind: string;
  readonly meta: KubeMeta;
  /** For Table events: the one row's object metadata. */
  readonly rowMeta?: KubeMeta;
  /** Table events: whether columnDefinitions were filled. */
  readonly columns?: number;
  /** Status of an ERROR event. */
  readonly status?: { code?: number; reason?: string; message?: string };
  /** The event exactly as on the wire (a JSON line without its newline, or a frame without its length). */
  readonly bytes: Buffer;
}

export interface OpenWatch {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly events: WatchEvent[];
  /** Set once the stream ended (by the server or the proxy). */
  ended: boolean;
  /** A decode error, if the stream was unreadable. */
  error: string | undefined;
  /** Non-200 answers: the whole body. */
  body: Buffer;
  waitFor(pred: (events: readonly WatchEvent[]) => boolean, timeoutMs: number): Promise<boolean>;
  close(): void;
}

interface JsonEvent {
  type?: string;
  object?: { kind?: string; metadata?: KubeMeta; rows?: Array<{ object?: { metadata?: KubeMeta } }>; columnDefinitions?: unknown[]; code?: number; reason?: string; message?: string };
}

function decodeJsonLine(line: Buffer): WatchEvent {
  const e = JSON.parse(line.toString("utf8")) as JsonEvent;
  const o = e.object ?? {};
  const rowMeta = o.rows?.[0]?.object?.metadata;
  return {
    type: e.type ?? "",
    kind: o.kind ?? "",
    meta: o.metadata ?? {},
    ...(rowMeta === undefined ? {} : { rowMeta }),
    ...(o.kind === "Table" ? { columns: o.columnDefinitions?.length ?? 0 } : {}),
    ...(o.kind === "Status" ? { status: { ...(o.code === undefined ? {} : { code: o.code }), ...(o.reason === undefined ? {} : { reason: o.reason }), ...(o.message === undefined ? {} : { message: o.message }) } } : {}),
    bytes: line,
  };
}

function decodeFrame(frame: Buffer): WatchEvent {
  const d = decodeEvent(k8sProto(), frame);
  const m = d.object["metadata"];
  const meta = (typeof m === "object" && m !== null ? m : {}) as KubeMeta;
  const st = d.kind === "Status" ? (d.object as { code?: number; reason?: string; message?: string }) : undefined;
  return { type: d.type, kind: d.kind, meta, ...(st === undefined ? {} : { status: st }), bytes: frame };
}

/** Opens a watch at `pathAndQuery` (exactly as given) and decodes events as they arrive. */
export async function openWatch(target: Target, pathAndQuery: string, headers: Readonly<Record<string, string>>): Promise<OpenWatch> {
  const { req, response } = open(target, pathAndQuery, { headers });
  const res = await response;
  const w: OpenWatch = {
    status: res.statusCode ?? 0,
    headers: res.headers,
    events: [],
    ended: false,
    error: undefined,
    body: Buffer.alloc(0),
    waitFor: (pred, timeoutMs) => eventually(() => pred(w.events) || w.ended, timeoutMs, 25).then(() => pred(w.events)),
    close: () => {
      req.destroy();
    },
  };
  const proto = (res.headers["content-type"] ?? "").startsWith("application/vnd.kubernetes.protobuf");
  let buf: Buffer = Buffer.alloc(0);
  res.on("data", (chunk: Buffer) => {
    if (w.status !== 200) {
      w.body = Buffer.concat([w.body, chunk]);
      return;
    }
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    try {
      if (proto) {
        while (buf.length >= 4) {
          const len = buf.readUInt32BE(0);
          if (buf.length < 4 + len) break;
          w.events.push(decodeFrame(buf.subarray(4, 4 + len)));
          buf = buf.subarray(4 + len);
        }
      } else {
        for (let nl = buf.indexOf(0x0a); nl >= 0; nl = buf.indexOf(0x0a)) {
          const line = buf.subarray(0, nl);
          buf = buf.subarray(nl + 1);
          if (line.length > 0) w.events.push(decodeJsonLine(line));
        }
      }
    } catch (e) {
      w.error = e instanceof Error ? e.message : String(e);
      req.destroy();
    }
  });
  res.on("end", () => {
    if (buf.length > 0 && w.error === undefined) w.error = `stream ended inside an event (${buf.length} bytes left)`;
    w.ended = true;
  });
  res.on("error", () => {
    w.ended = true;
  });
  res.on("close", () => {
    w.ended = true;
  });
  req.on("error", () => {
    w.ended = true;
  });
  return w;
}

export const isMutation = (e: WatchEvent): boolean => e.type === "ADDED" || e.type === "MODIFIED" || e.type === "DELETED";

export const isInitialEventsEnd = (e: WatchEvent): boolean => e.type === "BOOKMARK" && e.meta.annotations?.["k8s.io/initial-events-end"] === "true";
