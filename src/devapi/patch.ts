/**
 * PATCH bodies: JSON merge patch (RFC 7386; strategic merge patch is treated
 * the same, a documented simplification) and JSON patch (RFC 6902, through
 * fast-json-patch rather than by hand). Pure functions over plain JSON;
 * failures are 422 / 400 Status errors.
 */
import jsonpatch from "fast-json-patch";
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

const OPS = new Set(["add", "remove", "replace", "move", "copy", "test"]);

/**
 * RFC 6902, applied by fast-json-patch (whose `test` compares JSON values,
 * not their serialisations, so member order does not matter). Returns a new
 * document; `target` is not modified. As the apiserver does, a patch that
 * does not decode is 400 and one that does not apply is 422.
 */
export function applyJsonPatch(target: unknown, patch: unknown): unknown {
  if (!Array.isArray(patch)) throw badRequest("json patch must be an array of operations");
  for (const op of patch) {
    if (!isRecord(op) || typeof op.op !== "string" || typeof op.path !== "string") throw badRequest("invalid json patch operation");
    if (!OPS.has(op.op)) throw badRequest(`unexpected json patch operation ${JSON.stringify(op.op)}`);
    if ((op.op === "move" || op.op === "copy") && typeof op.from !== "string") throw badRequest(`${op.op} requires from`);
  }
  // Cloned so that no value of the patch is shared with the stored object.
  const ops = structuredClone(patch) as jsonpatch.Operation[];
  try {
    return jsonpatch.applyPatch(structuredClone(target), ops, true, true).newDocument;
  } catch (e) {
    // Everything it throws is about the patch (its own errors, and a TypeError
    // for a path through __proto__). Its messages carry the whole document
    // after the first line: keep the line. Its index is 0 for some errors, so
    // the operation is found by identity.
    const i = e instanceof jsonpatch.JsonPatchError ? ops.indexOf(e.operation as jsonpatch.Operation) : -1;
    const op = ops[i];
    const at = op === undefined ? "" : ` (operation ${i}: ${op.op} ${JSON.stringify(op.path)})`;
    const why = e instanceof Error ? (e.message.split("\n")[0] ?? e.name) : String(e);
    throw unprocessable(`the json patch does not apply${at}: ${why}`);
  }
}
