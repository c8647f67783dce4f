/**
 * The HTTPS edge: an AdmissionReview round trip with a CA only the test
 * trusts, and every malformed request answered with a clear error.
 */
import t from "tap";
import { connect } from "node:tls";
import { request } from "node:https";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createLocalCa } from "../../src/pki/ca.ts";
import { reviewPodAdmission } from "../../src/webhook/review.ts";
import { MAX_REVIEW_BYTES } from "../../src/webhook/server.ts";
import { deeplyNested, deeplyNestedText } from "../support/fuzz/json-mutate.ts";
import { reviewFor, startTestWebhook, testConfig, type HttpAnswer } from "./support.ts";

const POD = JSON.parse(readFileSync(fileURLToPath(new URL("./testdata/inject/controller-runtime-manager.pod.json", import.meta.url)), "utf8")) as unknown;

interface Answer {
  apiVersion: string;
  kind: string;
  response: { uid: string; allowed: boolean; status?: { code: number; message: string }; patch?: string; patchType?: string };
}
const parse = (a: HttpAnswer): Answer => JSON.parse(a.body) as Answer;

t.test("an AdmissionReview round trip over TLS verified against the test's CA returns the JSON Patch with the request's uid", async (t) => {
  const w = await startTestWebhook(t);
  const answer = await w.send({ body: JSON.stringify(reviewFor(POD, { uid: "round-trip-1" })) });
  t.equal(answer.status, 200);
  t.match(answer.headers["content-type"], /^application\/json/);
  const review = parse(answer);
  t.equal(review.apiVersion, "admission.k8s.io/v1");
  t.equal(review.kind, "AdmissionReview");
  t.equal(review.response.uid, "round-trip-1");
  t.equal(review.response.allowed, true);
  t.equal(review.response.patchType, "JSONPatch");
  const ops = JSON.parse(Buffer.from(review.response.patch ?? "", "base64").toString("utf8")) as Array<{ path: string }>;
  t.ok(ops.some((o) => o.path === "/spec/initContainers"), "the patch adds the sidecar");
});

t.test("a client that does not trust the test CA cannot talk to the webhook", async (t) => {
  const w = await startTestWebhook(t);
  const other = await createLocalCa("someone else", new Date(), 3600_000);
  await t.rejects(
    new Promise((resolve, reject) => {
      const req = request({ host: "127.0.0.1", servername: "localhost", port: w.server.port, method: "GET", path: "/healthz", ca: other.certPem, agent: false }, resolve);
      req.on("error", reject);
      req.end();
    }),
    /self.signed|unable to verify|certificate/i,
  );
});

t.test("/healthz answers 200 without an AdmissionReview", async (t) => {
  const w = await startTestWebhook(t);
  const a = await w.send({ method: "GET", path: "/healthz", headers: {} });
  t.equal(a.status, 200);
  t.equal(a.body, "ok\n");
});

t.test("other paths are 404 and other methods 405", async (t) => {
  const w = await startTestWebhook(t);
  t.equal((await w.send({ method: "POST", path: "/mutate", body: "{}" })).status, 404);
  const get = await w.send({ method: "GET", path: "/mutate-pods", headers: {} });
  t.equal(get.status, 405);
  t.equal(get.headers["allow"], "POST");
});

// Each malformed request gets HTTP 200 and an AdmissionReview whose status
// explains the problem (as controller-runtime answers), echoing the uid
// whenever the request carried one.
const malformed: Array<{ name: string; headers?: Record<string, string>; body: string; code: number; message: RegExp; uid: string }> = [
  { name: "wrong content type", headers: { "content-type": "text/plain" }, body: JSON.stringify(reviewFor(POD, { uid: "ct-1" })), code: 415, message: /content type "text\/plain" is not supported: send application\/json/, uid: "ct-1" },
  { name: "missing content type", headers: {}, body: JSON.stringify(reviewFor(POD, { uid: "ct-2" })), code: 415, message: /content type "" is not supported/, uid: "ct-2" },
  { name: "wrong content type and a body that is not JSON", headers: { "content-type": "text/plain" }, body: "{not json", code: 415, message: /content type "text\/plain"/, uid: "" },
  { name: "empty body", body: "", code: 400, message: /request body is empty/, uid: "" },
  { name: "body that is not JSON", body: "{not json", code: 400, message: /request body is not valid JSON/, uid: "" },
  { name: "JSON that is not an object", body: "[1,2]", code: 400, message: /not a JSON object/, uid: "" },
  {
    name: "wrong apiVersion",
    body: JSON.stringify({ ...reviewFor(POD, { uid: "u-1" }), apiVersion: "admission.k8s.io/v1beta1" }),
    code: 400,
    message: /unsupported apiVersion "admission.k8s.io\/v1beta1": this webhook accepts admission.k8s.io\/v1 AdmissionReview only/,
    uid: "u-1",
  },
  { name: "wrong kind", body: JSON.stringify({ ...reviewFor(POD, { uid: "u-2" }), kind: "ConversionReview" }), code: 400, message: /unsupported kind "ConversionReview"/, uid: "u-2" },
  { name: "missing request", body: JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" }), code: 400, message: /AdmissionReview has no request/, uid: "" },
  {
    name: "request without a uid",
    body: JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { kind: { group: "", version: "v1", kind: "Pod" } } }),
    code: 400,
    message: /request has no uid/,
    uid: "",
  },
  {
    name: "not a Pod",
    body: JSON.stringify({
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      request: { uid: "u-3", kind: { group: "apps", version: "v1", kind: "Deployment" }, operation: "CREATE", object: {} },
    }),
    code: 400,
    message: /expected a v1 Pod, got "apps\/v1\/Deployment"/,
    uid: "u-3",
  },
  {
    name: "a Pod nested deeper than any the apiserver decodes",
    body: JSON.stringify(reviewFor({ ...(POD as Record<string, unknown>), spec: { deep: "DEEP" } }, { uid: "u-5" })).replace('"DEEP"', deeplyNestedText(5000, "object")),
    code: 400,
    message: /request.object is nested more than 256 levels deep/,
    uid: "u-5",
  },
  {
    name: "a Pod request without the object",
    body: JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { uid: "u-4", kind: { group: "", version: "v1", kind: "Pod" }, operation: "CREATE" } }),
    code: 400,
    message: /has no object/,
    uid: "u-4",
  },
];

for (const m of malformed) {
  t.test(`malformed: ${m.name} gets a ${m.code} AdmissionReview that says why`, async (t) => {
    const w = await startTestWebhook(t);
    const a = await w.send({ headers: m.headers ?? { "content-type": "application/json" }, body: m.body });
    t.equal(a.status, 200);
    const review = parse(a);
    t.equal(review.response.allowed, false);
    t.equal(review.response.uid, m.uid);
    t.equal(review.response.status?.code, m.code);
    t.match(review.response.status?.message, m.message);
  });
}

t.test("a Pod nested deep, but no deeper than the limit, is answered as any other", async (t) => {
  const pod = POD as { metadata: Record<string, unknown>; spec: Record<string, unknown> };
  const deep = { ...pod, spec: { ...pod.spec, deep: deeplyNested(200, "object") } };
  const a = reviewPodAdmission(reviewFor(deep, { uid: "deep-ok" }), testConfig());
  const b = reviewPodAdmission(reviewFor(POD, { uid: "deep-ok" }), testConfig());
  t.equal(a.outcome.result, b.outcome.result, `as the same Pod without the nesting: ${a.outcome.result}`);
  t.equal(a.review.response.allowed, b.review.response.allowed);
});

t.test("application/json with a charset parameter is accepted", async (t) => {
  const w = await startTestWebhook(t);
  const a = await w.send({ headers: { "content-type": "application/json; charset=utf-8" }, body: JSON.stringify(reviewFor(POD, { uid: "cs" })) });
  t.equal(parse(a).response.allowed, true);
});

t.test("a body over the limit, declared by content-length, is refused with 413 without being read", async (t) => {
  const w = await startTestWebhook(t);
  const body = Buffer.alloc(MAX_REVIEW_BYTES + 1, 0x20);
  const a = await w.send({ headers: { "content-type": "application/json", "content-length": String(body.length) }, body });
  t.equal(parse(a).response.status?.code, 413);
  t.match(parse(a).response.status?.message, /over the 7340032-byte limit/);
});

t.test("an endless chunked body is cut off at the limit with 413", async (t) => {
  const w = await startTestWebhook(t);
  async function* endless(): AsyncGenerator<Buffer> {
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    for (;;) yield chunk;
  }
  const a = await w.send({ headers: { "content-type": "application/json" }, bodyStream: endless() });
  t.equal(parse(a).response.status?.code, 413);
  t.match(parse(a).response.status?.message, /request body is over the 7340032-byte limit/);
  // The server is still healthy afterwards.
  t.equal((await w.send({ method: "GET", path: "/healthz", headers: {} })).status, 200);
});

t.test("a body just under the limit is read and judged", async (t) => {
  const w = await startTestWebhook(t);
  const review = JSON.stringify(reviewFor(POD, { uid: "big" }));
  const body = review + " ".repeat(MAX_REVIEW_BYTES - Buffer.byteLength(review));
  t.equal(Buffer.byteLength(body), MAX_REVIEW_BYTES);
  const a = await w.send({ body });
  t.equal(parse(a).response.uid, "big");
  t.equal(parse(a).response.allowed, true);
});

t.test("operations other than CREATE are allowed unchanged", async (t) => {
  const w = await startTestWebhook(t);
  const a = await w.send({ body: JSON.stringify(reviewFor(POD, { uid: "upd", operation: "UPDATE" })) });
  t.same(parse(a).response, { uid: "upd", allowed: true });
});

t.test("an error thrown while judging still answers with the request's uid", async (t) => {
  const config = testConfig();
  // A configuration that throws stands in for any bug in decide or patch.
  Object.defineProperty(config, "meshSidecars", {
    get() {
      throw new Error("boom");
    },
  });
  const result = reviewPodAdmission(reviewFor(POD, { uid: "thrown-1" }), config);
  t.equal(result.review.response.uid, "thrown-1");
  t.equal(result.review.response.allowed, false);
  t.equal(result.review.response.status?.code, 500);
  t.match(result.review.response.status?.message, /internal error: boom/);
});

t.test("setTls serves a new certificate to new connections", async (t) => {
  const w = await startTestWebhook(t);
  const fingerprint = (ca?: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const s = connect({ host: "127.0.0.1", port: w.server.port, servername: "localhost", ...(ca === undefined ? { rejectUnauthorized: false } : { ca }) }, () => {
        const fp = s.getPeerCertificate().fingerprint256;
        s.end();
        resolve(fp);
      });
      s.on("error", reject);
    });
  const before = await fingerprint(w.ca);
  const ca2 = await createLocalCa("rotated", new Date(), 3600_000);
  const tls2 = await ca2.issue({ commonName: "localhost", names: ["localhost"], now: new Date(), validityMs: 3600_000 });
  w.server.setTls(tls2);
  const after = await fingerprint(ca2.certPem);
  t.not(after, before);
  await t.rejects(fingerprint(w.ca), /certificate/i, "the old CA no longer verifies the new certificate");
});

t.test("close may be called twice and resolves both times", async (t) => {
  const w = await startTestWebhook(t);
  await t.resolves(Promise.all([w.server.close(), w.server.close()]), "both calls resolve");
});
