/**
 * devapi's mutating admission: what it sends a webhook (the fields the real
 * MutatingAdmissionWebhook plugin fills in), that it stores the patched
 * object, and what a denial, a broken answer and an unreachable webhook do
 * under each failure policy. The webhook is a real HTTPS server whose
 * certificate only the test's CA vouches for.
 */
import t from "tap";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import type { MutatingWebhook } from "../../src/devapi/index.ts";
import { createLocalCa } from "../../src/pki/ca.ts";
import { call, withApi, type Json } from "./helpers.ts";

interface Hook {
  readonly url: string;
  readonly ca: string;
  readonly reviews: Json[];
  /** What to answer; default: allow with a label `seen: <operation>`. */
  answer: (review: Json) => unknown;
}

async function startHook(t: Tap): Promise<Hook> {
  const now = new Date();
  const ca = await createLocalCa("devapi admission test CA", now, 3600_000);
  const tls = await ca.issue({ commonName: "hook.test.svc", names: ["hook.test.svc", "127.0.0.1"], now, validityMs: 3600_000 });
  const hook: Hook = {
    url: "",
    ca: ca.certPem,
    reviews: [],
    answer: (review) => {
      const req = review["request"] as Json;
      const patch = [{ op: "add", path: "/metadata/labels", value: { seen: String(req["operation"]) } }];
      return { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid: req["uid"], allowed: true, patchType: "JSONPatch", patch: Buffer.from(JSON.stringify(patch)).toString("base64") } };
    },
  };
  const server: Server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const review = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Json;
      hook.reviews.push(review);
      void Promise.resolve(hook.answer(review)).then((a) => {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(a));
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return Object.assign(hook, { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/mutate` });
}

interface Tap {
  teardown(fn: () => unknown): void;
}

const rules = (operations: Array<"CREATE" | "UPDATE">): MutatingWebhook["rules"] => [{ group: "", resource: "configmaps", operations }];
const cm = (name: string | undefined, extra: Json = {}): Json => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { ...(name === undefined ? { generateName: "gen-" } : { name }) }, data: { a: "1" }, ...extra });

t.test("a CREATE is sent as the plugin sends it, and the patched object is what is stored", async (t) => {
  const hook = await startHook(t);
  const api = await withApi(t, { mutatingWebhooks: [{ name: "hook.test.io", url: hook.url, caBundle: hook.ca, rules: rules(["CREATE"]) }] });
  const created = await call(api, "POST", "/api/v1/namespaces/shop/configmaps", cm(undefined));
  t.equal(created.status, 201, created.text);
  t.same((created.body["metadata"] as Json)["labels"], { seen: "CREATE" }, "stored with the patch applied");
  const stored = api.store.get({ group: "", version: "v1", resource: "configmaps" }, "shop", String((created.body["metadata"] as Json)["name"]));
  t.same(stored?.metadata?.labels, { seen: "CREATE" });
  t.equal(hook.reviews.length, 1);
  const req = hook.reviews[0]?.["request"] as Json;
  t.match(hook.reviews[0], { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" });
  t.match(req, {
    uid: /^[0-9a-f-]{36}$/,
    kind: { group: "", version: "v1", kind: "ConfigMap" },
    resource: { group: "", version: "v1", resource: "configmaps" },
    name: "",
    namespace: "shop",
    operation: "CREATE",
    oldObject: null,
    dryRun: false,
  });
  t.same(req["object"], { apiVersion: "v1", kind: "ConfigMap", metadata: { generateName: "gen-", namespace: "shop" }, data: { a: "1" } }, "the object before the server names it or gives it a uid, with the request's namespace");
});

t.test("an UPDATE (PUT) carries the stored object as oldObject; a PATCH is admitted as the patched object", async (t) => {
  const hook = await startHook(t);
  const api = await withApi(t, { mutatingWebhooks: [{ name: "hook.test.io", url: hook.url, caBundle: hook.ca, rules: rules(["UPDATE"]) }] });
  const created = await call(api, "POST", "/api/v1/namespaces/shop/configmaps", cm("c"));
  t.equal(hook.reviews.length, 0, "CREATE is not in the rules");
  const uid = (created.body["metadata"] as Json)["uid"];
  const put = await call(api, "PUT", "/api/v1/namespaces/shop/configmaps/c", cm("c", { data: { a: "2" } }));
  t.equal(put.status, 200, put.text);
  t.same((put.body["metadata"] as Json)["labels"], { seen: "UPDATE" });
  const req = hook.reviews[0]?.["request"] as Json;
  t.match(req, { operation: "UPDATE", name: "c", namespace: "shop", oldObject: { metadata: { uid }, data: { a: "1" } }, object: { data: { a: "2" } } });
  const patched = await call(api, "PATCH", "/api/v1/namespaces/shop/configmaps/c", { metadata: { labels: null }, data: { a: "3" } }, { "content-type": "application/merge-patch+json" });
  t.equal(patched.status, 200, patched.text);
  t.same((patched.body["metadata"] as Json)["labels"], { seen: "UPDATE" }, "the webhook put back what the patch removed");
  t.match(hook.reviews[1]?.["request"], { operation: "UPDATE", object: { data: { a: "3" } }, oldObject: { metadata: { labels: { seen: "UPDATE" } } } });
  t.notOk(((hook.reviews[1]?.["request"] as Json)["object"] as { metadata: Json }).metadata["labels"], "it saw the object without the label");
});

t.test("subresource writes are not sent", async (t) => {
  const hook = await startHook(t);
  const api = await withApi(t, { mutatingWebhooks: [{ name: "hook.test.io", url: hook.url, caBundle: hook.ca, rules: [{ group: "example.com", resource: "widgets", operations: ["CREATE", "UPDATE"] }] }] });
  api.registerResource({ group: "example.com", version: "v1", resource: "widgets", kind: "Widget", namespaced: true, encoding: "unstructured", statusSubresource: true });
  const w = { apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "w" }, spec: {} };
  t.equal((await call(api, "POST", "/apis/example.com/v1/namespaces/shop/widgets", w)).status, 201);
  const status = await call(api, "PUT", "/apis/example.com/v1/namespaces/shop/widgets/w/status", { ...w, status: { ok: true } });
  t.equal(status.status, 200, status.text);
  const patched = await call(api, "PATCH", "/apis/example.com/v1/namespaces/shop/widgets/w/status", { status: { ok: false } }, { "content-type": "application/merge-patch+json" });
  t.equal(patched.status, 200, patched.text);
  t.equal(hook.reviews.length, 1, "only the CREATE");
});

t.test("a PATCH whose object changes while it is being admitted starts over from the newer object", async (t) => {
  const hook = await startHook(t);
  const api = await withApi(t, { mutatingWebhooks: [{ name: "hook.test.io", url: hook.url, caBundle: hook.ca, rules: rules(["UPDATE"]) }] });
  await call(api, "POST", "/api/v1/namespaces/shop/configmaps", cm("c"));
  const base = hook.answer;
  let raced = false;
  hook.answer = (review) => {
    if (!raced) {
      raced = true;
      // Another writer gets in between the patch and the store.
      api.store.patch({ group: "", version: "v1", resource: "configmaps" }, "shop", "c", { data: { b: "x" } });
    }
    return base(review);
  };
  const r = await call(api, "PATCH", "/api/v1/namespaces/shop/configmaps/c", { data: { a: "9" } }, { "content-type": "application/merge-patch+json" });
  t.equal(r.status, 200, r.text);
  t.same(r.body["data"], { a: "9", b: "x" }, "both writes kept");
  t.equal(hook.reviews.length, 2, "admitted twice: once per attempt");
  const pinned = await call(api, "PATCH", "/api/v1/namespaces/shop/configmaps/c", { metadata: { resourceVersion: "1" }, data: { a: "0" } }, { "content-type": "application/merge-patch+json" });
  t.equal(pinned.status, 409, "a patch that names a stale resourceVersion conflicts");
});

t.test("a denial fails the request with the webhook's code and message", async (t) => {
  const hook = await startHook(t);
  hook.answer = (review) => ({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid: (review["request"] as Json)["uid"], allowed: false, status: { code: 422, message: "no configmaps today" } } });
  const api = await withApi(t, { mutatingWebhooks: [{ name: "hook.test.io", url: hook.url, caBundle: hook.ca, rules: rules(["CREATE"]) }] });
  const r = await call(api, "POST", "/api/v1/namespaces/shop/configmaps", cm("c"));
  t.equal(r.status, 422);
  t.equal(r.body["message"], 'admission webhook "hook.test.io" denied the request: no configmaps today');
  t.equal(api.store.count({ group: "", version: "v1", resource: "configmaps" }), 0);
});

t.test("an unreachable, untrusted or broken webhook fails the write under Fail and is skipped under Ignore", async (t) => {
  const hook = await startHook(t);
  const other = await createLocalCa("someone else", new Date(), 3600_000);
  const cases: Array<[string, Partial<MutatingWebhook>, RegExp]> = [
    ["unreachable", { url: "https://127.0.0.1:1/mutate" }, /failed calling webhook "hook.test.io": failed to call webhook: .*ECONNREFUSED/],
    ["untrusted certificate", { caBundle: other.certPem }, /failed to call webhook: .*(self-signed|unable to verify|certificate)/],
    ["wrong TLS name", { serverName: "other.test.svc" }, /failed to call webhook: .*(does not match|altnames|Hostname)/],
  ];
  for (const [what, over, message] of cases) {
    for (const failurePolicy of ["Fail", "Ignore"] as const) {
      const api = await withApi(t, { mutatingWebhooks: [{ name: "hook.test.io", url: hook.url, caBundle: hook.ca, rules: rules(["CREATE"]), failurePolicy, ...over }] });
      const r = await call(api, "POST", "/api/v1/namespaces/shop/configmaps", cm("c"));
      if (failurePolicy === "Fail") {
        t.equal(r.status, 500, `${what}, Fail: refused`);
        t.match(r.body["message"], message, `${what}: the message says why`);
      } else {
        t.equal(r.status, 201, `${what}, Ignore: stored`);
        t.notOk((r.body["metadata"] as Json)["labels"], `${what}, Ignore: unmutated`);
      }
    }
  }
  hook.answer = () => ({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid: "not-the-request's", allowed: true } });
  const api = await withApi(t, { mutatingWebhooks: [{ name: "hook.test.io", url: hook.url, caBundle: hook.ca, rules: rules(["CREATE"]) }] });
  const r = await call(api, "POST", "/api/v1/namespaces/shop/configmaps", cm("c"));
  t.equal(r.status, 500);
  t.match(r.body["message"], /expected response.uid=".*", got "not-the-request's"/);
});

t.test("webhooks can be set after start, and only matching resources go to them", async (t) => {
  const hook = await startHook(t);
  const api = await withApi(t);
  await call(api, "POST", "/api/v1/namespaces/shop/configmaps", cm("before"));
  api.setMutatingWebhooks([{ name: "hook.test.io", url: hook.url, caBundle: hook.ca, rules: rules(["CREATE"]) }]);
  await call(api, "POST", "/api/v1/namespaces/shop/secrets", { apiVersion: "v1", kind: "Secret", metadata: { name: "s" } });
  const after = await call(api, "POST", "/api/v1/namespaces/shop/configmaps", cm("after"));
  t.same((after.body["metadata"] as Json)["labels"], { seen: "CREATE" });
  t.equal(hook.reviews.length, 1, "one review: the configmap created after the webhook was set");
});
