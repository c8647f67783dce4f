/**
 * An ERROR watch event in the stream's own encoding. The proxy writes one to
 * end a watch deliberately (410 Expired after a range change, so the
 * reflector relists), and the filters write one when upstream is unreadable.
 */
import type { Encoding } from "./accept.ts";
import { protoWatchErrorFrame } from "./scan/proto-status.ts";
import { jsonWatchErrorLine } from "./status.ts";

export function watchErrorEvent(encoding: Encoding, code: number, message: string, reason: string): Buffer {
  return encoding === "json" ? Buffer.from(jsonWatchErrorLine(code, message, reason)) : protoWatchErrorFrame(code, message, reason);
}
