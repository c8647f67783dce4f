/** Shared helpers for the devapi tests: a server per test, and JSON requests. */
import type { Test } from "tap";
import { startDevApi, type DevApi, type DevApiOptions } from "../../src/devapi/index.ts";
import { send } from "./transcript.ts";

/** Starts a devapi closed at the end of `t`. */
export async function withApi(t: Test, opts: DevApiOptions = {}): Promise<DevApi> {
  const api = await startDevApi(opts);
  t.teardown(() => api.close());
  return api;
}

export type Json = Record<string, unknown>;

export interface JsonReply {
  status: number;
  body: Json;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

/** A request with a JSON body (or patch body) whose JSON response is parsed. */
export async function call(
  api: DevApi,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<JsonReply> {
  const h: Record<string, string> = { ...headers };
  if (body !== undefined && h["content-type"] === undefined) h["content-type"] = "application/json";
  const r = await send(api.url, path, { method, headers: h, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  let parsed: Json = {};
  try {
    const v: unknown = JSON.parse(r.body);
    if (typeof v === "object" && v !== null && !Array.isArray(v)) parsed = v as Json;
  } catch {
    // not JSON (e.g. health text); callers look at `text`
  }
  return { status: r.status, body: parsed, text: r.body, headers: r.headers };
}

export function meta(o: unknown): Json {
  const m = (o as Json | undefined)?.metadata;
  return typeof m === "object" && m !== null ? (m as Json) : {};
}

export function items(body: Json): Json[] {
  return Array.isArray(body.items) ? (body.items as Json[]) : [];
}

export function names(body: Json): string[] {
  return items(body).map((i) => String(meta(i).name));
}

/** `shardRange(object.metadata.uid, start, end)` URL-encoded for a query. */
export function uidRange(start: string, end: string): string {
  return encodeURIComponent(`shardRange(object.metadata.uid, '${start}', '${end}')`);
}

export const LOW = uidRange("0x0000000000000000", "0x8000000000000000");
export const HIGH = uidRange("0x8000000000000000", "0x10000000000000000");

export function pod(namespace: string, name: string, labels: Record<string, string> = {}): Json {
  return { apiVersion: "v1", kind: "Pod", metadata: { name, namespace, labels }, spec: { containers: [{ name: "c", image: "x" }] } };
}
