/**
 * Fuzzing any admission webhook endpoint: mutations of the AdmissionReview
 * envelope and of the HTTP request carrying it, and the judgement every
 * answer must pass whatever the endpoint does (a well-formed
 * admission.k8s.io/v1 AdmissionReview whose uid is the request's, allowed or
 * a denial with a message, and a JSON Patch that applies to the object), or
 * an HTTP 400 from the HTTP layer, or a clean close; and the run itself
 * ({@link fuzzAdmission}): /healthz throughout, memory and fds flat. What a
 * particular endpoint may patch is its test's to say (test/webhook/fuzz.test.ts
 * for /mutate-pods, test/webhook/label-fuzz.test.ts for /label-slots).
 */
import jsonpatch from "fast-json-patch";
import { readdirSync, readFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { MAX_REVIEW_BYTES } from "../../../src/webhook/server.ts";
import type { Random } from "./random.ts";
import { mutateJson, mutateText, render, retype, type Json, type Mutated } from "./json-mutate.ts";
import { exchange, parseResponses } from "./raw-http.ts";
import { formatFinding, runFuzz, summaryLine, type FuzzSettings } from "./runner.ts";
import { VitalsLog } from "./vitals.ts";

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
  /** `response.warnings`, shown to the client that made the request. */
  readonly warnings: readonly string[];
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

/** The request's object, parsed afresh from the body each call, if the body parses to a review that has one. */
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
  let review: { apiVersion?: unknown; kind?: unknown; response?: { uid?: unknown; allowed?: unknown; status?: { code?: unknown; message?: unknown }; patch?: unknown; patchType?: unknown; warnings?: unknown } };
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
      // The object is parsed afresh from the body: no copy, whose recursion a
      // deeply nested object (the mutations nest 2,000 deep) would overflow.
      else jsonpatch.applyPatch(object, patch as jsonpatch.Operation[], true);
    } catch (e) {
      problems.push(`a patch that does not apply to the request's object: ${(e as Error).message}`);
    }
  }
  const warnings = res.warnings ?? [];
  if (!Array.isArray(warnings) || !warnings.every((w) => typeof w === "string")) problems.push(`response.warnings is not a list of strings: ${JSON.stringify(res.warnings)}`);
  if (typeof res.status?.code === "number" && res.status.code >= 500) problems.push(`an internal error instead of a clear answer: ${String(res.status.message)}`);
  const status = res.status;
  return {
    problems,
    answer: {
      uid: String(res.uid),
      allowed: res.allowed === true,
      warnings: Array.isArray(warnings) ? warnings.map(String) : [],
      ...(status === undefined ? {} : { status: { ...(typeof status.code === "number" ? { code: status.code } : {}), ...(typeof status.message === "string" ? { message: status.message } : {}) } }),
      ...(patch === undefined ? {} : { patch }),
    },
  };
}

/** The parsed `*<suffix>` files of `dir`, by name: a fuzzer's corpus. */
export function goldenCorpus(dir: string, suffix: string): Array<{ readonly file: string; readonly doc: JsonMap }> {
  return readdirSync(dir)
    .filter((f) => f.endsWith(suffix))
    .sort()
    .map((file) => ({ file, doc: JSON.parse(readFileSync(join(dir, file), "utf8")) as JsonMap }));
}

/** `/healthz` of a webhook server: "" when it answers 200, else what went wrong. */
export function healthz(port: number, ca: string): Promise<string> {
  return new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port, servername: "localhost", path: "/healthz", ca, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode === 200 ? "" : `/healthz answered ${res.statusCode}`));
    });
    req.on("error", (e) => resolve(`/healthz failed: ${e.message}`));
    req.end();
  });
}

/** The assertions {@link fuzzAdmission} makes, as tap's `t` has them. */
export interface FuzzAsserts {
  comment(message: string): void;
  equal(found: unknown, wanted: unknown, ...message: [] | [string]): unknown;
  same(found: unknown, wanted: unknown, ...message: [] | [string]): unknown;
}

export interface AdmissionFuzz {
  /** Names the run in its summary line (`fuzz <name>: N requests tried…`), which the fuzz lane counts. */
  readonly name: string;
  /** The test file, for the replay command. */
  readonly file: string;
  readonly settings: FuzzSettings;
  /** The webhook server (TLS for `localhost`, signed by `ca`) and the endpoint fuzzed. */
  readonly webhook: { readonly server: { readonly port: number }; readonly ca: string };
  readonly path: string;
  /** The golden documents each case starts from (one, picked at random, copied). */
  readonly corpus: ReadonlyArray<{ readonly file: string; readonly doc: JsonMap }>;
  /**
   * A case's review made from its copy of a golden document, with `uid` as
   * its request uid, before the envelope is damaged and the request framed;
   * and what was done to it.
   */
  review(rnd: Random, golden: JsonMap, uid: string): { readonly review: Json; readonly notes: readonly string[] };
  /** The endpoint's own rules on an answer {@link judgeAdmission} passed: the problems, none when all is well. */
  rules(body: Buffer, answer: ReviewAnswer): readonly string[];
  /** Growth allowed from the warm sample to the end, after a forced GC (see docs/testing.md). */
  readonly bounds: { readonly rssMiB: number; readonly heapMiB: number; readonly fds: number };
}

/**
 * Runs an admission fuzzer and asserts what every webhook endpoint owes:
 * no finding (each answer judged by {@link judgeAdmission} and the
 * endpoint's rules), `/healthz` answering throughout and after, memory and
 * file descriptors flat from the warm sample to the end.
 */
export async function fuzzAdmission(t: FuzzAsserts, f: AdmissionFuzz): Promise<void> {
  const { settings } = f;
  const server = { port: f.webhook.server.port, ca: f.webhook.ca };
  const endpoint = { host: "127.0.0.1", port: server.port, tls: { ca: server.ca, servername: "localhost" } };
  const make = (rnd: Random, i: number) => {
    const golden = rnd.pick(f.corpus);
    const made = f.review(rnd, structuredClone(golden.doc), `fuzz-${settings.seed}-${i}`);
    let review = made.review;
    const notes = [`golden ${golden.file}`, ...made.notes];
    for (let k = rnd.weighted<number>([
      [6, 0],
      [3, 1],
      [1, 2],
    ]); k > 0; k--) {
      const m = mutateEnvelope(rnd, review);
      review = m.value;
      notes.push(m.did);
    }
    const plan = planAdmission(rnd, review, f.path, MAX_REVIEW_BYTES);
    return {
      description: [`mutations: ${[...notes, ...plan.notes].join("; ")}`, `bytes: ${JSON.stringify(plan.bytes.subarray(0, 4000).toString("latin1"))}${plan.bytes.length > 4000 ? ` … (${plan.bytes.length} bytes)` : ""}`].join("\n"),
      requests: 1,
      run: async () => {
        const res = await exchange(endpoint, { writes: [plan.bytes], gapMs: 0, end: plan.vanish ? { kind: "vanish" } : { kind: "read", maxMs: 30_000, expect: 1 } }, ["POST"]);
        const { problems, answer } = judgeAdmission(plan, res.received, res.serverClosed);
        return answer === undefined ? problems : [...problems, ...f.rules(plan.body, answer)];
      },
    };
  };
  const log = new VitalsLog(settings);
  const check = async (p: { cases: number; seconds: number }): Promise<string[]> => {
    log.sample(p);
    const h = await healthz(server.port, server.ca);
    return h === "" ? [] : [h];
  };
  const outcome = await runFuzz(settings, make, { every: 100, check });
  t.comment(summaryLine(f.name, settings, outcome));
  for (const finding of outcome.findings) t.comment(formatFinding(settings, f.file, finding));
  t.equal(outcome.findings.length, 0, "the fuzzer found nothing");
  t.equal(await healthz(server.port, server.ca), "", "the webhook still answers /healthz");
  const after = log.final(outcome.cases);
  for (const line of log.lines()) t.comment(line);
  const memory = log.judge(after, f.bounds, outcome.findings.length > 0 || settings.only !== undefined);
  if ("skipped" in memory) t.comment(memory.skipped);
  else t.same(memory.problems, [], `from warm to the end: RSS (from half-way in a long run) within +${f.bounds.rssMiB} MiB, heap and external within +${f.bounds.heapMiB} MiB, file descriptors flat`);
}
