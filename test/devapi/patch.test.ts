import t from "tap";
import { applyJsonPatch } from "../../src/devapi/patch.ts";
import { DevApiStatusError } from "../../src/devapi/status.ts";

const pod = (): Record<string, unknown> => ({ metadata: { name: "p", labels: { a: "1", b: "2" } }, spec: { containers: [{ name: "c", image: "i" }] } });

/** The Status code a patch fails with, or 0 when it applies. */
function code(target: unknown, patch: unknown): number {
  try {
    applyJsonPatch(target, patch);
    return 0;
  } catch (e) {
    if (e instanceof DevApiStatusError) return e.status.code;
    throw e;
  }
}

t.test("a test operation compares JSON values: objects regardless of member order (RFC 6902 §4.6)", async (t) => {
  t.equal(code(pod(), [{ op: "test", path: "/metadata/labels", value: { b: "2", a: "1" } }]), 0, "the same members in another order are equal");
  t.equal(code(pod(), [{ op: "test", path: "/spec/containers/0", value: { image: "i", name: "c" } }]), 0, "also inside an array");
  t.equal(code(pod(), [{ op: "test", path: "/metadata/labels", value: { a: "1" } }]), 422, "a member fewer is not equal");
  t.equal(code(pod(), [{ op: "test", path: "/metadata/labels", value: { a: "1", b: "3" } }]), 422, "another value is not equal");
  t.equal(code({ l: [1, 2] }, [{ op: "test", path: "/l", value: [2, 1] }]), 422, "arrays are compared in order");
});

t.test("a json patch that does not decode is 400, one that does not apply is 422, naming the operation", async (t) => {
  t.equal(code(pod(), { op: "add" }), 400, "not an array");
  t.equal(code(pod(), [{ op: "frobnicate", path: "/a" }]), 400, "an unknown operation");
  t.equal(code(pod(), [{ op: "move", path: "/a" }]), 400, "a move without from");
  try {
    applyJsonPatch(pod(), [{ op: "add", path: "/metadata/labels/c", value: "3" }, { op: "remove", path: "/metadata/nope" }]);
    t.fail("removing a missing member applies");
  } catch (e) {
    t.ok(e instanceof DevApiStatusError && e.status.code === 422);
    t.match((e as DevApiStatusError).status.message, /operation 1: remove "\/metadata\/nope"/);
    t.notMatch((e as DevApiStatusError).status.message, /\n/, "one line, without the document");
  }
});

t.test("applying returns a new document; neither the target nor the patch is shared with it", async (t) => {
  const target = pod();
  const before = structuredClone(target);
  const value = { name: "d", image: "j" };
  const out = applyJsonPatch(target, [{ op: "add", path: "/spec/containers/-", value }, { op: "replace", path: "/metadata/labels/a", value: "9" }]) as ReturnType<typeof pod>;
  t.same(target, before, "the target is unchanged");
  t.same(out, { metadata: { name: "p", labels: { a: "9", b: "2" } }, spec: { containers: [{ name: "c", image: "i" }, { name: "d", image: "j" }] } });
  value.image = "changed";
  t.equal(((out.spec as { containers: Array<{ image: string }> }).containers[1] as { image: string }).image, "j", "the added value is a copy");
});
