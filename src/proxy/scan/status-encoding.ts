/**
 * A Kubernetes `Status` with status "Failure", and the watch ERROR event
 * that carries one, in both encodings the proxy speaks: its error answers,
 * the filters' ERROR event when upstream is unreadable, and the 410 Expired
 * that ends a watch after a range change. Pure bytes, shared by the proxy
 * (status.ts writes them) and the watch filters. Protobuf shapes follow
 * k8s.io/apimachinery: Status {metadata = 1 (ListMeta), status = 2,
 * message = 3, reason = 4, code = 6}.
 */
import { envelope, typeMeta, watchEventFrame } from "./proto-frames.ts";
import { lenField, stringField, varintField } from "./proto-wire.ts";

const EMPTY = Buffer.alloc(0);

export interface StatusBody {
  readonly kind: "Status";
  readonly apiVersion: "v1";
  readonly metadata: Record<string, never>;
  readonly status: "Failure";
  readonly message: string;
  readonly reason: string;
  readonly code: number;
}

const REASONS: Record<number, string> = {
  400: "BadRequest",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
  410: "Expired",
  500: "InternalError",
  502: "InternalError",
  503: "ServiceUnavailable",
};

/** A JSON Status; `reason` defaults to the apiserver's for the code. */
export function statusBody(code: number, message: string, reason = REASONS[code] ?? ""): StatusBody {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code };
}

/**
 * A whole protobuf `Status` body (`k8s\0` envelope, typeMeta v1/Status) with
 * status "Failure". For error answers on `application/vnd.kubernetes.protobuf`
 * requests. `reason` follows metav1.StatusReason (e.g. "InternalError",
 * "Expired").
 */
export function protoStatusBody(code: number, message: string, reason: string): Buffer {
  const status = Buffer.concat([lenField(1, EMPTY), stringField(2, "Failure"), stringField(3, message), stringField(4, reason), varintField(6, code)]);
  return envelope(typeMeta("v1", "Status"), status);
}

/** A JSON watch ERROR event line carrying a Status. */
export function jsonWatchErrorLine(code: number, message: string, reason?: string): string {
  return JSON.stringify({ type: "ERROR", object: statusBody(code, message, reason) }) + "\n";
}

/**
 * A framed ERROR event carrying a Status, for protobuf watch streams
 * (`application/vnd.kubernetes.protobuf;stream=watch`). client-go's
 * reflector turns it into an API error: 410 "Expired" makes it relist, 500
 * "InternalError" makes it back off and watch again.
 */
export function protoWatchErrorFrame(code: number, message: string, reason: string): Buffer {
  return watchEventFrame("ERROR", protoStatusBody(code, message, reason));
}

/** A watch ERROR event in the stream's own encoding. */
export function watchErrorEvent(encoding: "json" | "protobuf", code: number, message: string, reason: string): Buffer {
  return encoding === "json" ? Buffer.from(jsonWatchErrorLine(code, message, reason)) : protoWatchErrorFrame(code, message, reason);
}
