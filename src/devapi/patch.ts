/**
 * PATCH bodies: JSON merge patch (RFC 7386; strategic merge patch is treated
 * the same, a documented simplification) and JSON patch (RFC 6902). Pure
 * functions over plain JSON; failures are 422 / 400 Status errors.
 */
import { isRecord } from "../is-record.ts";
import { badRequest, type DevApiStatusError } from "./status.ts";

export type PatchType = "merge" | "json";

/** Maps a PATCH Content-Type to a patch type; undefined when devapi does not speak it (415). */
export function patchTypeOf(contentType: string): PatchType | undefined {
  const base = (contentType.split(";")[0] ?? "").trim().toLowerCase();
  if (base === "application/merge-patch+json" || base === "application/strategic-merge-patch+json") return "merge";
  if (base === "application/json-patch+json") return "json";
  return undefined;
}

/** RFC 7386. Returns a new value; `target` is not modified. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isRecord(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = applyMergePatch(out[k], v);
  }
  return out;
}

function unprocessable(message: string): DevApiStatusError {
  const e = badRequest(message);
  e.status.code = 422;
  e.status.reason = "Invalid";
  return e;
}

function parsePointer(path: string): string[] {
  if (path === "") return [];
  if (!path.startsWith("/")) throw badRequest(`invalid JSON pointer ${JSON.stringify(path)}`);
  return path
    .slice(1)
    .split("/")
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

type Container = Record<string, unknown> | unknown[];

function resolveParent(doc: unknown, tokens: string[], path: string): { parent: Container; last: string } {
  let cur: unknown = doc;
  for (let i = 0; i < tokens.length - 1; i++) {
    const t = tokens[i] as string;
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isRecord(cur)) cur = cur[t];
    else cur = undefined;
    if (cur === undefined) throw unprocessable(`the server rejected our request due to an error in our request: doc is missing path: ${JSON.stringify(path)}`);
  }
  if (!Array.isArray(cur) && !isRecord(cur)) throw unprocessable(`doc is missing path: ${JSON.stringify(path)}`);
  return { parent: cur, last: tokens[tokens.length - 1] as string };
}

function arrayIndex(arr: unknown[], token: string, forInsert: boolean, path: string): number {
  if (forInsert && token === "-") return arr.length;
  if (!/^(0|[1-9]\d*)$/.test(token)) throw unprocessable(`invalid array index ${JSON.stringify(token)} in ${JSON.stringify(path)}`);
  const i = Number(token);
  if (i > arr.length || (!forInsert && i === arr.length)) throw unprocessable(`array index out of bounds in ${JSON.stringify(path)}`);
  return i;
}

function getAt(doc: unknown, path: string): unknown {
  let cur = doc;
  for (const t of parsePointer(path)) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isRecord(cur) && Object.hasOwn(cur, t)) cur = cur[t];
    else cur = undefined;
    if (cur === undefined) throw unprocessable(`doc is missing path: ${JSON.stringify(path)}`);
  }
  return cur;
}

function removeAt(doc: unknown, path: string): unknown {
  const tokens = parsePointer(path);
  if (tokens.length === 0) throw unprocessable("cannot remove the whole document");
  const { parent, last } = resolveParent(doc, tokens, path);
  if (Array.isArray(parent)) {
    const i = arrayIndex(parent, last, false, path);
    return parent.splice(i, 1)[0];
  }
  if (!Object.hasOwn(parent, last)) throw unprocessable(`doc is missing path: ${JSON.stringify(path)}`);
  const v = parent[last];
  delete parent[last];
  return v;
}

function addAt(doc: unknown, path: string, value: unknown, replace: boolean): unknown {
  const tokens = parsePointer(path);
  if (tokens.length === 0) return value;
  const { parent, last } = resolveParent(doc, tokens, path);
  if (Array.isArray(parent)) {
    const i = arrayIndex(parent, last, !replace, path);
    if (replace) parent[i] = value;
    else parent.splice(i, 0, value);
  } else {
    if (replace && !Object.hasOwn(parent, last)) throw unprocessable(`doc is missing key: ${JSON.stringify(path)}`);
    parent[last] = value;
  }
  return doc;
}

/** RFC 6902. Returns a new document; `target` is not modified. */
export function applyJsonPatch(target: unknown, patch: unknown): unknown {
  if (!Array.isArray(patch)) throw badRequest("json patch must be an array of operations");
  let doc: unknown = structuredClone(target);
  for (const op of patch) {
    if (!isRecord(op) || typeof op.op !== "string" || typeof op.path !== "string") throw badRequest("invalid json patch operation");
    const path = op.path;
    switch (op.op) {
      case "add":
        doc = addAt(doc, path, structuredClone(op.value), false);
        break;
      case "replace":
        doc = addAt(doc, path, structuredClone(op.value), true);
        break;
      case "remove":
        removeAt(doc, path);
        break;
      case "move": {
        if (typeof op.from !== "string") throw badRequest("move requires from");
        const v = removeAt(doc, op.from);
        doc = addAt(doc, path, v, false);
        break;
      }
      case "copy": {
        if (typeof op.from !== "string") throw badRequest("copy requires from");
        doc = addAt(doc, path, structuredClone(getAt(doc, op.from)), false);
        break;
      }
      case "test":
        if (JSON.stringify(getAt(doc, path)) !== JSON.stringify(op.value)) throw unprocessable(`testing value ${path} failed`);
        break;
      default:
        throw badRequest(`unexpected json patch operation ${JSON.stringify(op.op)}`);
    }
  }
  return doc;
}
