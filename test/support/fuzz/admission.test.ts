/**
 * The admission fuzzers' judgement holds whatever the request's object
 * holds: an answer's patch is applied to the object however deeply the
 * object is nested (the fuzzers nest values 2,000 deep, where a recursive
 * copy overflows the stack: the long run of 2026-12-01, seed 1693894511,
 * case 3319, reported a good answer as "a patch that does not apply").
 */
import t from "tap";
import { judgeAdmission, type AdmissionPlan } from "./admission.ts";
import { deeplyNestedText } from "./json-mutate.ts";

function answered(review: unknown): Buffer {
  const body = JSON.stringify(review);
  return Buffer.from(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

function plan(body: string): AdmissionPlan {
  return { bytes: Buffer.from(body), body: Buffer.from(body), notes: [], vanish: false, overLimit: false };
}

const patch = (ops: unknown): string => Buffer.from(JSON.stringify(ops)).toString("base64");

t.test("a patch is judged against the request's object however deeply the object is nested", async (t) => {
  for (const depth of [10, 2000, 20_000]) {
    const body = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"metadata":{"name":"x","deep":${deeplyNestedText(depth, "object")}}}}}`;
    const good = judgeAdmission(plan(body), answered({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid: "u", allowed: true, patchType: "JSONPatch", patch: patch([{ op: "add", path: "/metadata/labels", value: { a: "b" } }]) } }), false);
    t.same(good.problems, [], `${depth} deep: a patch that applies is judged so`);
    const bad = judgeAdmission(plan(body), answered({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid: "u", allowed: true, patchType: "JSONPatch", patch: patch([{ op: "replace", path: "/metadata/nothing/here", value: 1 }]) } }), false);
    // (fast-json-patch's own message for it stringifies the object: 20,000 deep, that message is a RangeError.)
    t.match(bad.problems, [/a patch that does not apply to the request's object/], `${depth} deep: one that does not is judged so`);
  }
});
