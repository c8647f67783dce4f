/**
 * Bytes in and out of devapi's HTTP layer: request bodies read under the
 * apiserver's cap and decoded as JSON, answers written with the apiserver's
 * headers or pretty-printed as Go does, and long lists written in chunks
 * that wait for the client. Apart from server.ts, which decides what a
 * request means and what to answer, so that the edge's limits sit together.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { isRecord } from "../is-record.ts";
import { badRequest, tooLarge, unsupportedMediaType } from "./status.ts";

/**
 * The apiserver's own cap on request bodies (3 MiB, `maxRequestBodyBytes`
 * in k8s.io/apiserver): anything a real server accepts fits, and a runaway
 * client cannot make the test server buffer without bound.
 */
const MAX_BODY_BYTES = 3 * 1024 * 1024;

/** Lists are written in chunks of about this size, awaiting `drain` in between. */
const LIST_CHUNK_BYTES = 256 * 1024;

const TYPE_JSON = "application/json";

/** The headers every JSON answer carries, as the apiserver's. */
export function baseHeaders(): Record<string, string> {
  return { "Cache-Control": "no-cache, private", "Content-Type": TYPE_JSON };
}

/** Writes parts in ~256 KiB chunks, waiting for `drain`; stops quietly if the client goes away. */
export async function writeChunked(res: ServerResponse, parts: readonly Buffer[]): Promise<void> {
  let batch: Buffer[] = [];
  let size = 0;
  const flush = async (): Promise<boolean> => {
    if (batch.length === 0) return !res.destroyed;
    const chunk = Buffer.concat(batch, size);
    batch = [];
    size = 0;
    if (res.destroyed) return false;
    if (res.write(chunk)) return true;
    return new Promise<boolean>((resolve) => {
      const done = (ok: boolean) => () => {
        res.off("drain", onDrain);
        res.off("close", onClose);
        resolve(ok);
      };
      const onDrain = done(true);
      const onClose = done(false);
      res.on("drain", onDrain);
      res.on("close", onClose);
    });
  };
  for (const p of parts) {
    batch.push(p);
    size += p.length;
    if (size >= LIST_CHUNK_BYTES && !(await flush())) return;
  }
  if (!(await flush())) return;
  res.end();
}

/** Go-style indentation (two spaces) with Go's HTML escaping preserved. */
export function prettyJson(text: string): string {
  const s = JSON.stringify(JSON.parse(text) as unknown, null, 2);
  return s.replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`) + "\n";
}

/** The whole request body; throws the apiserver's 413 past {@link MAX_BODY_BYTES}, and drains the rest. */
export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > MAX_BODY_BYTES) {
      req.resume();
      throw tooLarge(MAX_BODY_BYTES);
    }
    chunks.push(c);
  }
  return Buffer.concat(chunks, size);
}

/** `raw` as JSON; throws the apiserver's 400 when it is not. */
export function parseJson(raw: Buffer): unknown {
  try {
    return JSON.parse(raw.toString("utf8")) as unknown;
  } catch (e) {
    throw badRequest(`couldn't get version/kind; json parse error: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** The body as JSON; throws 415 for a content type that is neither JSON nor the wildcard (none counts as JSON). */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const ct = (req.headers["content-type"] ?? TYPE_JSON).split(";")[0]?.trim().toLowerCase() ?? "";
  if (ct !== TYPE_JSON && ct !== "*/*" && ct !== "") throw unsupportedMediaType(ct);
  return parseJson(await readBody(req));
}

/** A DELETE body's `preconditions` (uid, resourceVersion); anything else in it is ignored. */
export function preconditions(body: unknown): { uid?: string; resourceVersion?: string } {
  if (!isRecord(body) || !isRecord(body.preconditions)) return {};
  const out: { uid?: string; resourceVersion?: string } = {};
  if (typeof body.preconditions.uid === "string") out.uid = body.preconditions.uid;
  if (typeof body.preconditions.resourceVersion === "string") out.resourceVersion = body.preconditions.resourceVersion;
  return out;
}
