/**
 * Fuzzing any admission webhook endpoint: mutations of the AdmissionReview
 * envelope and of the HTTP request carrying it, and the judgement every
 * answer must pass whatever the endpoint does (a well-formed
 * admission.k8s.io/v1 AdmissionReview whose uid is the request's, allowed or
 * a denial with a message, and a JSON Patch that applies to the object), or
 * an HTTP 400 from the HTTP layer, or a clean close. What a particular
 * endpoint may patch is its test's to say (see test/webhook/fuzz.test.ts).
 */
import jsonpatch from "fast-json-patch";
import type { Random } from "./random.ts";
import { mutateJson, mutateText, render, retype, type Json, type Mutated } from "./json-mutate.ts";
import { parseResponses } from "./raw-http.ts";

type JsonMap = { [key: string]: Json };

function isMap(v: Json | undefined): v is JsonMap {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** One mutation of the envelope (apiVersion, kind, request.uid, kind, operation, namespace, object). */
export function mutateEnvelope(rnd: Random, review: Json): Mutated<Json> {
  const copy = structuredClone(review);
  if (!isMap(copy)) return { value: copy, did: "unchanged (not an object)" };
  const request = isMap(copy["request"]) ? copy["request"] : undefined;
  const set = (where: JsonMap | undefined, key: string, v: Json | undefined, did: string): Mutated<Json> => {
    if (where !== undefined) {
      if (v === undefined) delete where[key];
      else where[key] = v;
    }
    return { value: copy, did };
  };
  switch (rnd.int(10)) {
    case 0: {
      const v = rnd.pick<Json>(["admission.k8s.io/v1beta1", "", "v1", 1, null, "admission.k8s.io/V1"]);
      return set(copy, "apiVersion", v, `apiVersion ${JSON.stringify(v)}`);
    }
    case 1: {
      const v = rnd.pick<Json>(["AdmissionRequest", "admissionreview", "", null, ["AdmissionReview"]]);
      return set(copy, "kind", v, `kind ${JSON.stringify(v)}`);
    }
    case 2: {
      const v = rnd.pick<Json | undefined>([undefined, "", 42, null, { id: "x" }, "x".repeat(10_000), "uid with spaces", "\u0000"]);
      return set(request, "uid", v, v === undefined ? "no uid" : `uid ${JSON.stringify(typeof v === "string" ? v.slice(0, 20) : v)}`);
    }
    case 3: {
      const v = rnd.pick<Json>([
        { group: "", version: "v1", kind: "Service" },
        { group: "apps", version: "v1", kind: "Deployment" },
        { group: "", version: "v2", kind: "Pod" },
        { group: "", version: "v1", kind: "pod" },
        "Pod",
        null,
      ]);
      return set(request, "kind", v, `request.kind ${JSON.stringify(v)}`);
    }
    case 4: {
      const v = rnd.pick<Json | undefined>(["UPDATE", "DELETE", "CONNECT", "create", "", undefined, 1]);
      return set(request, "operation", v, `operation ${JSON.stringify(v ?? "absent")}`);
    }
    case 5: {
      const v = rnd.pick<Json | undefined>(["status", "ephemeralcontainers", "", undefined, 7]);
      return set(request, "subResource", v, `subResource ${JSON.stringify(v ?? "absent")}`);
    }
    case 6: {
      const v = rnd.pick<Json | undefined>(["shardcar-system", "", undefined, "kube-system", 5, "x".repeat(300)]);
      return set(request, "namespace", v, `namespace ${JSON.stringify(typeof v === "string" ? v.slice(0, 20) : (v ?? "absent"))}`);
    }
    case 7: {
      const v = rnd.pick<Json | undefined>([undefined, null, [], "pod", 0]);
      return set(request, "object", v, `object ${JSON.stringify(v ?? "absent")}`);
    }
    case 8: {
      const v = rnd.pick<Json | undefined>([undefined, null, [], 0, "request"]);
      return set(copy, "request", v, `request ${JSON.stringify(v ?? "absent")}`);
    }
    default: {
      const v = retype(rnd, request?.["dryRun"] ?? false);
      return set(request, "dryRun", v, `dryRun ${JSON.stringify(v)}`);
    }
  }
}

export interface AdmissionPlan {
  /** The bytes sent, headers and body, exactly as the webhook receives them. */
  readonly bytes: Buffer;
  /** The body as meant (before framing): what the answer is judged against. */
  readonly body: Buffer;
  /** What was done to the review, in order. */
  readonly notes: readonly string[];
  /** The client leaves once it has written (mid-body, or before the answer). */
  readonly vanish: boolean;
  /** Over the endpoint's limit: it cannot read the body, so no uid can be echoed. */
  readonly overLimit: boolean;
}

const CONTENT_TYPES = ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "text/plain", "", "application/json-patch+json", "application/yaml", "application/jsonx", "application/json;;;"];

/**
 * The review as an HTTP request to `path`: structural damage (a few JSON
 * mutations, sometimes text damage), then framing (content type, length,
 * chunking, a body cut short, an oversized body).
 */
export function planAdmission(rnd: Random, review: Json, path: string, maxBodyBytes: number): AdmissionPlan {
  const notes: string[] = [];
  let doc = review;
  for (let i = rnd.weighted<number>([
    [4, 0],
    [4, 1],
    [2, 2],
  ]); i > 0; i--) {
    const m = mutateJson(rnd, doc);
    doc = m.value;
    notes.push(m.did);
  }
  let body = render(doc);
  if (rnd.chance(0.1)) {
    const m = mutateText(rnd, body);
    body = m.value;
    notes.push(m.did);
  }
  let overLimit = body.length > maxBodyBytes;
  // Rare: each costs 7 MiB on both sides, and the limit holds or not the first time.
  if (rnd.chance(0.003)) {
    overLimit = true;
    body = Buffer.concat([body, Buffer.alloc(maxBodyBytes + 1 - Math.min(body.length, maxBodyBytes), " ")]);
    notes.push(`padded to ${body.length} bytes, over the ${maxBodyBytes}-byte limit`);
  }
  let type = "application/json";
  if (rnd.chance(0.1)) {
    type = rnd.pick(CONTENT_TYPES);
    notes.push(`Content-Type ${JSON.stringify(type)}`);
  }
  const headers: string[] = [`POST ${path} HTTP/1.1`, "Host: localhost", ...(type === "" ? [] : [`Content-Type: ${type}`])];
  let sent = body;
  let vanish = false;
  const framing = rnd.weighted<string>([
    [20, "length"],
    [2, "chunked"],
    [1, "short"],
    [1, "none"],
    [1, "declared-huge"],
  ]);
  switch (framing) {
    case "length":
      headers.push(`Content-Length: ${body.length}`);
      break;
    case "chunked": {
      headers.push("Transfer-Encoding: chunked");
      const half = rnd.int(body.length + 1);
      sent = Buffer.concat([Buffer.from(`${half.toString(16)}\r\n`), body.subarray(0, half), Buffer.from(`\r\n${(body.length - half).toString(16)}\r\n`), body.subarray(half), Buffer.from("\r\n0\r\n\r\n")]);
      notes.push("chunked in two");
      break;
    }
    case "short": {
      headers.push(`Content-Length: ${body.length + rnd.between(1, 1000)}`);
      vanish = true;
      notes.push("a body shorter than its Content-Length, then the client leaves");
      break;
    }
    case "none":
      notes.push("no Content-Length, no chunking");
      break;
    default:
      headers.push(`Content-Length: ${maxBodyBytes * 2}`);
      vanish = true;
      overLimit = true;
      notes.push(`Content-Length ${maxBodyBytes * 2}, over the limit, then the client leaves`);
  }
  if (rnd.chance(0.05)) {
    vanish = true;
    notes.push("the client leaves without reading the answer");
  }
  return { bytes: Buffer.concat([Buffer.from(`${headers.join("\r\n")}\r\n\r\n`, "latin1"), sent]), body, notes, vanish, overLimit };
}

export interface ReviewAnswer {
  readonly uid: string;
  readonly allowed: boolean;
  readonly status?: { readonly code?: number; readonly message?: string };
  /** The decoded JSON Patch, when there is one. */
  readonly patch?: ReadonlyArray<{ op: string; path: string }>;
}

/** The uid an answer must echo: the request's, when it sent one as a string. */
export function expectedUid(body: Buffer): string {
  try {
    const doc = JSON.parse(body.toString("utf8")) as Json;
    const request = isMap(doc) ? doc["request"] : undefined;
    const uid = isMap(request) ? request["uid"] : undefined;
    return typeof uid === "string" ? uid : "";
  } catch {
    return "";
  }
}

/** The request's object, if the body parses to a review that has one. */
export function requestObject(body: Buffer): JsonMap | undefined {
  try {
    const doc = JSON.parse(body.toString("utf8")) as Json;
    const request = isMap(doc) ? doc["request"] : undefined;
    const object = isMap(request) ? request["object"] : undefined;
    return isMap(object) ? object : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Judges what came back. Returns the problems, and the answer when it is an
 * AdmissionReview (undefined for a clean close or an HTTP-level 400).
 */
export function judgeAdmission(plan: AdmissionPlan, received: Buffer, serverClosed: boolean): { problems: string[]; answer?: ReviewAnswer } {
  const parsed = parseResponses(received, ["POST"], serverClosed);
  if (parsed.malformed !== undefined) return { problems: [`the answer is not HTTP: ${parsed.malformed}`] };
  const r = parsed.responses[0];
  if (r === undefined || !r.complete) return { problems: plan.vanish || received.length === 0 ? [] : ["the answer was cut short"] };
  if (r.status === 400) return { problems: [] };
  if (r.status !== 200) return { problems: [`HTTP ${r.status} (expected an AdmissionReview with HTTP 200, or 400): ${r.body.subarray(0, 200).toString()}`] };
  let review: { apiVersion?: unknown; kind?: unknown; response?: { uid?: unknown; allowed?: unknown; status?: { code?: unknown; message?: unknown }; patch?: unknown; patchType?: unknown } };
  try {
    review = JSON.parse(r.body.toString("utf8")) as typeof review;
  } catch (e) {
    return { problems: [`the answer is not JSON: ${(e as Error).message}`] };
  }
  const problems: string[] = [];
  const res = review.response;
  if (review.apiVersion !== "admission.k8s.io/v1" || review.kind !== "AdmissionReview" || res === undefined) return { problems: [`not an admission.k8s.io/v1 AdmissionReview: ${r.body.subarray(0, 200).toString()}`] };
  const want = plan.overLimit ? "" : expectedUid(plan.body);
  if (res.uid !== want) problems.push(`response.uid ${JSON.stringify(res.uid)}, the request's was ${JSON.stringify(want)}`);
  if (typeof res.allowed !== "boolean") problems.push(`response.allowed is ${JSON.stringify(res.allowed)}`);
  if (res.allowed === false && (typeof res.status?.message !== "string" || res.status.message === "" || typeof res.status.code !== "number")) problems.push(`a denial without a code and message: ${JSON.stringify(res.status)}`);
  let patch: ReviewAnswer["patch"];
  if (res.patch !== undefined) {
    if (res.allowed !== true || res.patchType !== "JSONPatch" || typeof res.patch !== "string") problems.push(`a patch with allowed ${JSON.stringify(res.allowed)} and patchType ${JSON.stringify(res.patchType)}`);
    try {
      patch = JSON.parse(Buffer.from(typeof res.patch === "string" ? res.patch : "", "base64").toString("utf8")) as ReviewAnswer["patch"];
      const object = requestObject(plan.body);
      if (!Array.isArray(patch) || object === undefined) problems.push("a patch that is not an array, or with no object to apply it to");
      else jsonpatch.applyPatch(structuredClone(object), patch as jsonpatch.Operation[], true);
    } catch (e) {
      problems.push(`a patch that does not apply to the request's object: ${(e as Error).message}`);
    }
  }
  const status = res.status;
  return {
    problems,
    answer: {
      uid: String(res.uid),
      allowed: res.allowed === true,
      ...(status === undefined ? {} : { status: { ...(typeof status.code === "number" ? { code: status.code } : {}), ...(typeof status.message === "string" ? { message: status.message } : {}) } }),
      ...(patch === undefined ? {} : { patch }),
    },
  };
}
