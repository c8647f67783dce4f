/**
 * The proxy's own error answers, shaped as Kubernetes `Status` objects so
 * clients surface them like any apiserver error.
 */
import type { ServerResponse } from "node:http";

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
  406: "NotAcceptable",
  410: "Expired",
  500: "InternalError",
  502: "InternalError",
  503: "ServiceUnavailable",
};

export function statusBody(code: number, message: string, reason = REASONS[code] ?? ""): StatusBody {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code };
}

/** Writes a JSON Status response, unless headers already went out. */
export function sendStatus(res: ServerResponse, code: number, message: string, reason?: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(statusBody(code, message, reason));
  res.writeHead(code, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** A JSON watch ERROR event line carrying a Status. */
export function jsonWatchErrorLine(code: number, message: string, reason?: string): string {
  return JSON.stringify({ type: "ERROR", object: statusBody(code, message, reason) }) + "\n";
}
