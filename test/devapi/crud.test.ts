import t from "tap";
import { readFileSync } from "node:fs";
import { DevApiStatusError } from "../../src/devapi/index.ts";
import { call, meta, names, pod, withApi, type Json } from "./helpers.ts";
import { send } from "./transcript.ts";

const POD = "/api/v1/namespaces/a/pods";

t.test("POST assigns uid, resourceVersion, creationTimestamp and generation; the client's uid is not kept", async (t) => {
  const api = await withApi(t);
  const r = await call(api, "POST", POD, { ...pod("a", "p1"), metadata: { name: "p1", uid: "client-chosen", resourceVersion: "99" } });
  t.equal(r.status, 201);
  const m = meta(r.body);
  t.match(m.uid, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  t.not(m.uid, "client-chosen");
  t.equal(m.namespace, "a", "namespace from the URL");
  t.equal(m.resourceVersion, api.store.resourceVersion);
  t.match(m.creationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  t.equal(m.generation, 1);
  t.same(Object.keys(r.body).slice(0, 3), ["kind", "apiVersion", "metadata"]);
  const again = await call(api, "POST", POD, pod("a", "p2"));
  t.ok(Number(meta(again.body).resourceVersion) > Number(m.resourceVersion), "one global, increasing resourceVersion");
});

t.test("generateName makes distinct names", async (t) => {
  const api = await withApi(t);
  const made = new Set<string>();
  for (let i = 0; i < 20; i++) {
    const r = await call(api, "POST", POD, { metadata: { generateName: "gen-" }, spec: {} });
    t.equal(r.status, 201);
    made.add(String(meta(r.body).name));
  }
  t.equal(made.size, 20);
  for (const n of made) t.match(n, /^gen-[a-z0-9]{5}$/);
});

t.test("errors are Status bodies shaped like the real server's", async (t) => {
  const api = await withApi(t);
  await call(api, "POST", POD, pod("a", "p1"));
  const dup = await call(api, "POST", POD, pod("a", "p1"));
  t.equal(dup.status, 409);
  t.same(dup.body, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: 'pods "p1" already exists', reason: "AlreadyExists", details: { name: "p1", kind: "pods" }, code: 409 });
  const missing = await call(api, "GET", `${POD}/nope`);
  t.equal(missing.status, 404);
  t.same(missing.body, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: 'pods "nope" not found', reason: "NotFound", details: { name: "nope", kind: "pods" }, code: 404 });
  const lease = await call(api, "GET", "/apis/coordination.k8s.io/v1/namespaces/a/leases/nope");
  t.match(lease.body, { message: 'leases.coordination.k8s.io "nope" not found', details: { group: "coordination.k8s.io", kind: "leases" } });
  const badName = await call(api, "POST", POD, pod("a", "Bad_Name"));
  t.equal(badName.status, 422);
  t.match(badName.body, { reason: "Invalid", message: /^Pod "Bad_Name" is invalid: metadata\.name: Invalid value/, details: { causes: [{ field: "metadata.name" }] } });
  const nsMismatch = await call(api, "POST", POD, pod("b", "p3"));
  t.equal(nsMismatch.status, 400);
  const notJson = await send(api.url, POD, { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
  t.equal(notJson.status, 400);
  const unknownPath = await call(api, "GET", "/api/v1/widgets");
  t.equal(unknownPath.status, 404);
  const tooBig = await send(api.url, POD, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ metadata: { name: "big" }, data: "x".repeat(4 * 1024 * 1024) }) });
  t.equal(tooBig.status, 413);
});

t.test("PUT with a stale resourceVersion is 409 Conflict and changes nothing", async (t) => {
  const api = await withApi(t);
  const created = (await call(api, "POST", POD, pod("a", "p1"))).body;
  const stale = String(meta(created).resourceVersion);
  const first = await call(api, "PUT", `${POD}/p1`, { ...created, metadata: { ...meta(created), labels: { v: "1" } } });
  t.equal(first.status, 200);
  const current = String(meta(first.body).resourceVersion);
  t.ok(Number(current) > Number(stale));
  const second = await call(api, "PUT", `${POD}/p1`, { ...created, metadata: { ...meta(created), labels: { v: "2" } } });
  t.equal(second.status, 409);
  t.match(second.body, {
    reason: "Conflict",
    message: 'Operation cannot be fulfilled on pods "p1": the object has been modified; please apply your changes to the latest version and try again',
  });
  const now = await call(api, "GET", `${POD}/p1`);
  t.same(meta(now.body).labels, { v: "1" });
  t.equal(meta(now.body).resourceVersion, current);
  // Without a resourceVersion the update is unconditional, as for most built-in types.
  const noRv = { ...meta(now.body) };
  delete noRv.resourceVersion;
  const unconditional = await call(api, "PUT", `${POD}/p1`, { ...now.body, metadata: { ...noRv, labels: { v: "3" } } });
  t.equal(unconditional.status, 200);
});

t.test("a PUT that changes nothing keeps the resourceVersion and sends no event", async (t) => {
  const api = await withApi(t);
  const created = (await call(api, "POST", POD, pod("a", "p1"))).body;
  const events: string[] = [];
  const stop = api.store.watch("pods", (e) => events.push(e.type));
  t.teardown(stop);
  const r = await call(api, "PUT", `${POD}/p1`, created);
  t.equal(r.status, 200);
  t.equal(meta(r.body).resourceVersion, meta(created).resourceVersion);
  t.same(events, []);
});

t.test("PATCH: merge, strategic-merge (as merge) and JSON patch; apply is 415; a stale resourceVersion in a patch is 409", async (t) => {
  const api = await withApi(t);
  await call(api, "POST", POD, pod("a", "p1", { keep: "yes", drop: "yes" }));
  const merge = await call(api, "PATCH", `${POD}/p1`, { metadata: { labels: { drop: null, added: "m" } } }, { "content-type": "application/merge-patch+json" });
  t.equal(merge.status, 200);
  t.same(meta(merge.body).labels, { added: "m", keep: "yes" });
  const smp = await call(api, "PATCH", `${POD}/p1`, { metadata: { labels: { s: "1" } } }, { "content-type": "application/strategic-merge-patch+json" });
  t.same(meta(smp.body).labels, { added: "m", keep: "yes", s: "1" });
  const jp = await call(
    api,
    "PATCH",
    `${POD}/p1`,
    [
      { op: "test", path: "/metadata/labels/keep", value: "yes" },
      { op: "replace", path: "/metadata/labels/keep", value: "no" },
      { op: "add", path: "/spec/containers/-", value: { name: "d", image: "y" } },
    ],
    { "content-type": "application/json-patch+json" },
  );
  t.equal(jp.status, 200);
  t.equal((meta(jp.body).labels as Json).keep, "no");
  t.equal(((jp.body.spec as Json).containers as unknown[]).length, 2);
  t.equal(meta(jp.body).generation, 2, "a spec change bumps generation");
  const failedTest = await call(api, "PATCH", `${POD}/p1`, [{ op: "test", path: "/metadata/labels/keep", value: "yes" }], { "content-type": "application/json-patch+json" });
  t.equal(failedTest.status, 422);
  const apply = await call(api, "PATCH", `${POD}/p1`, {}, { "content-type": "application/apply-patch+yaml" });
  t.equal(apply.status, 415);
  const stale = await call(api, "PATCH", `${POD}/p1`, { metadata: { resourceVersion: "1", labels: { x: "y" } } }, { "content-type": "application/merge-patch+json" });
  t.equal(stale.status, 409);
  const missing = await call(api, "PATCH", `${POD}/nope`, {}, { "content-type": "application/merge-patch+json" });
  t.equal(missing.status, 404);
});

t.test("the status subresource: the main resource ignores status, /status changes only status", async (t) => {
  const api = await withApi(t);
  const base = "/apis/shardcar.io/v1alpha1/namespaces/a/shardrings";
  const created = await call(api, "POST", base, { apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name: "r" }, spec: { slots: 256 }, status: { generation: 9 } });
  t.equal(created.status, 201);
  t.same(Object.keys(created.body), ["apiVersion", "kind", "metadata", "spec", "status"], "custom resources serialise with sorted keys");
  t.same(Object.keys(meta(created.body)), [...Object.keys(meta(created.body))].sort());
  const st = await call(api, "PUT", `${base}/r/status`, { ...created.body, spec: { slots: 1 }, status: { generation: 2, table: ["x"] } });
  t.equal(st.status, 200);
  t.same(st.body.status, { generation: 2, table: ["x"] });
  t.same(st.body.spec, { slots: 256 }, "spec unchanged by /status");
  t.equal(meta(st.body).generation, 1, "a status change does not bump generation");
  const main = await call(api, "PATCH", `${base}/r`, { spec: { slots: 128 }, status: { generation: 0 } }, { "content-type": "application/merge-patch+json" });
  t.same(main.body.spec, { slots: 128 });
  t.same(main.body.status, { generation: 2, table: ["x"] }, "status unchanged by the main resource");
  t.equal(meta(main.body).generation, 2);
  const sp = await call(api, "PATCH", `${base}/r/status`, { status: { generation: 3 } }, { "content-type": "application/merge-patch+json" });
  t.same(sp.body.status, { generation: 3, table: ["x"] });
  const podStatus = await call(api, "GET", "/api/v1/namespaces/a/configmaps/x/status");
  t.equal(podStatus.status, 404, "no /status where the resource has none");
});

t.test("DELETE: finalizers hold the object with a deletionTimestamp until the last one is removed", async (t) => {
  const api = await withApi(t);
  const path = "/api/v1/namespaces/a/configmaps";
  await call(api, "POST", path, { metadata: { name: "cm", finalizers: ["example.com/hold"] }, data: { a: "b" } });
  const events: string[] = [];
  const stop = api.store.watch("configmaps", (e) => events.push(e.type));
  t.teardown(stop);
  const del = await call(api, "DELETE", `${path}/cm`);
  t.equal(del.status, 200);
  t.ok(meta(del.body).deletionTimestamp, "marked for deletion");
  t.equal((await call(api, "GET", `${path}/cm`)).status, 200, "still there");
  const release = await call(api, "PATCH", `${path}/cm`, { metadata: { finalizers: null } }, { "content-type": "application/merge-patch+json" });
  t.equal(release.status, 200);
  t.equal((await call(api, "GET", `${path}/cm`)).status, 404, "gone once the finalizer is removed");
  t.same(events, ["MODIFIED", "DELETED"]);
});

t.test("DELETE of a pod is MODIFIED (deletionTimestamp, grace 0) then DELETED, like an unbound pod on kube-apiserver", async (t) => {
  const api = await withApi(t);
  await call(api, "POST", POD, pod("a", "p1"));
  const events: Json[] = [];
  const stop = api.store.watch("pods", (e) => events.push({ type: e.type, meta: e.object.metadata }));
  t.teardown(stop);
  const del = await call(api, "DELETE", `${POD}/p1`);
  t.equal(del.status, 200);
  t.same(
    events.map((e) => e.type),
    ["MODIFIED", "DELETED"],
  );
  t.match(events[0], { meta: { deletionGracePeriodSeconds: 0, generation: 2 } });
  t.match((events[0]?.meta as Json).deletionTimestamp, /Z$/, "deletionTimestamp set");
  t.ok(Number((events[1]?.meta as Json).resourceVersion) > Number((events[0]?.meta as Json).resourceVersion), "DELETED carries the deletion's resourceVersion");
  const cm = await call(api, "POST", "/api/v1/namespaces/a/configmaps", { metadata: { name: "c" } });
  t.equal(cm.status, 201);
  const stale = await call(api, "DELETE", "/api/v1/namespaces/a/configmaps/c", { preconditions: { resourceVersion: "1" } });
  t.equal(stale.status, 409, "a stale precondition");
  const uidMismatch = await call(api, "DELETE", "/api/v1/namespaces/a/configmaps/c", { preconditions: { uid: "other" } });
  t.equal(uidMismatch.status, 409);
  t.equal((await call(api, "DELETE", "/api/v1/namespaces/a/configmaps/c")).status, 200);
  t.equal((await call(api, "DELETE", "/api/v1/namespaces/a/configmaps/c")).status, 404);
});

t.test("deletecollection honours the shard selector when the gate is on", async (t) => {
  const api = await withApi(t);
  for (let i = 0; i < 30; i++) api.store.create("configmaps", { metadata: { name: `c${i}`, namespace: "a" } });
  const low = encodeURIComponent("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')");
  const lowNames = names((await call(api, "GET", `/api/v1/configmaps?shardSelector=${low}`)).body).sort();
  const r = await call(api, "DELETE", `/api/v1/namespaces/a/configmaps?shardSelector=${low}`);
  t.equal(r.status, 200);
  t.same(names(r.body).sort(), lowNames);
  t.equal(api.store.count("configmaps"), 30 - lowNames.length);
});

t.test("cluster-scoped resources: no namespace in keys or objects", async (t) => {
  const api = await withApi(t);
  const r = await call(api, "POST", "/api/v1/namespaces", { metadata: { name: "team-x", namespace: "ignored" } });
  t.equal(r.status, 201);
  t.equal(meta(r.body).namespace, undefined);
  t.same(names((await call(api, "GET", "/api/v1/namespaces")).body), ["team-x"]);
  t.equal((await call(api, "GET", "/api/v1/namespaces/team-x")).status, 200);
  const bad = await call(api, "POST", "/api/v1/namespaces", { metadata: { name: "a.b" } });
  t.equal(bad.status, 422, "namespace names are DNS labels");
});

t.test("requireToken: 401 without a bearer token; every request's Authorization is recorded", async (t) => {
  const api = await withApi(t, { requireToken: "s3cret" });
  const none = await call(api, "GET", "/api/v1/pods");
  t.equal(none.status, 401);
  t.match(none.body, { kind: "Status", reason: "Unauthorized", code: 401 });
  t.equal((await call(api, "GET", "/api/v1/pods", undefined, { authorization: "Bearer wrong" })).status, 401);
  t.equal((await call(api, "GET", "/api/v1/pods", undefined, { authorization: "Bearer s3cret" })).status, 200);
  t.equal((await call(api, "GET", "/healthz")).status, 200, "health is exempt");
  const auths = api.stats.requests.map((r) => r.authorization);
  t.same(auths, [undefined, "Bearer wrong", "Bearer s3cret", undefined]);
  t.match(api.stats.requests[2], { method: "GET", url: "/api/v1/pods", authorization: "Bearer s3cret", served: { verb: "list", resource: "pods" }, auditId: /^[0-9a-f-]{36}$/ });
  t.equal(api.stats.lists.get("pods"), 1, "only the authorised LIST is counted");
});

t.test("stats.requests keeps only the most recent requests", async (t) => {
  const api = await withApi(t, { maxRecordedRequests: 3 });
  for (let i = 0; i < 5; i++) await call(api, "GET", `/version?i=${i}`);
  t.same(
    api.stats.requests.map((r) => r.url),
    ["/version?i=2", "/version?i=3", "/version?i=4"],
  );
});

t.test("discovery lists every registered resource, including one registered at runtime", async (t) => {
  const api = await withApi(t);
  const core = await call(api, "GET", "/api/v1");
  const coreNames = (core.body.resources as Json[]).map((r) => r.name);
  for (const n of ["pods", "pods/status", "configmaps", "secrets", "serviceaccounts", "namespaces"]) t.ok(coreNames.includes(n), n);
  t.match((core.body.resources as Json[]).find((r) => r.name === "pods"), { namespaced: true, kind: "Pod", shortNames: ["po"], verbs: ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"] });
  t.match((await call(api, "GET", "/api")).body, { kind: "APIVersions", versions: ["v1"] });
  const groups = ((await call(api, "GET", "/apis")).body.groups as Json[]).map((g) => g.name);
  t.same(groups, ["coordination.k8s.io", "apiextensions.k8s.io", "shardcar.io"]);
  api.registerResource({ group: "example.com", version: "v1", resource: "widgets", kind: "Widget", namespaced: true, encoding: "unstructured" });
  const g = await call(api, "GET", "/apis/example.com");
  t.match(g.body, { kind: "APIGroup", name: "example.com", preferredVersion: { groupVersion: "example.com/v1" } });
  const rl = await call(api, "GET", "/apis/example.com/v1");
  t.match(rl.body, { kind: "APIResourceList", groupVersion: "example.com/v1", resources: [{ name: "widgets", kind: "Widget", namespaced: true }] });
  t.equal((await call(api, "POST", "/apis/example.com/v1/namespaces/a/widgets", { metadata: { name: "w" }, spec: {} })).status, 201);
  const v = await call(api, "GET", "/version");
  t.match(v.body, { major: "1", minor: "36" });
  t.equal((await call(api, "GET", "/apis/nope.io/v1")).status, 404);
});

t.test("negotiation: protobuf-only is 406, kubectl's Table Accept gets a Table, curl gets indented JSON", async (t) => {
  const api = await withApi(t);
  await call(api, "POST", POD, pod("a", "p1"));
  const pb = await call(api, "GET", "/api/v1/pods", undefined, { accept: "application/vnd.kubernetes.protobuf" });
  t.equal(pb.status, 406);
  t.match(pb.body, { reason: "NotAcceptable" });
  const pbTable = await call(api, "GET", "/api/v1/pods", undefined, { accept: "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io" });
  t.equal(pbTable.status, 406);
  const fallback = await call(api, "GET", "/api/v1/pods", undefined, { accept: "application/vnd.kubernetes.protobuf, application/json" });
  t.equal(fallback.status, 200);
  const kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
  const table = await call(api, "GET", `${POD}/p1`, undefined, { accept: kubectl });
  t.equal(table.body.kind, "Table");
  t.same((table.body.columnDefinitions as Json[]).map((c) => c.name), ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]);
  t.equal(((table.body.rows as Json[])[0]?.object as Json).kind, "PartialObjectMetadata");
  const full = await call(api, "GET", `/api/v1/pods?includeObject=Object`, undefined, { accept: kubectl });
  t.equal(((full.body.rows as Json[])[0]?.object as Json).kind, "Pod");
  const none = await call(api, "GET", `/api/v1/pods?includeObject=None`, undefined, { accept: kubectl });
  t.equal((none.body.rows as Json[])[0]?.object, undefined);
  const curl = await send(api.url, `${POD}/p1`, { headers: { "user-agent": "curl/8.5.0" } });
  t.ok(curl.body.startsWith('{\n  "kind": "Pod",'), "indented for curl");
  const compact = await send(api.url, `${POD}/p1`, { headers: { "user-agent": "kubectl/v1.36.4" } });
  t.ok(compact.body.startsWith('{"kind":"Pod",'), "compact for clients");
});

t.test("the programmatic store: get/list/count/update/delete and its errors", async (t) => {
  const api = await withApi(t);
  const s = api.store;
  const created = s.create("leases.coordination.k8s.io", { metadata: { name: "l", namespace: "a", uid: "00000000-0000-0000-0000-000000000001" }, spec: { holderIdentity: "x" } });
  t.equal(created.metadata?.uid, "00000000-0000-0000-0000-000000000001", "create keeps a given uid (seeding)");
  t.equal((s.get("leases", "a", "l")?.spec as Json | undefined)?.holderIdentity, "x");
  const updated = s.update("leases", { ...created, spec: { holderIdentity: "y" } });
  t.equal((updated.spec as Json).holderIdentity, "y");
  let code = 0;
  try {
    s.update("leases", { ...created, spec: { holderIdentity: "z" } });
  } catch (e) {
    code = e instanceof DevApiStatusError ? e.status.code : -1;
  }
  t.equal(code, 409, "a stale resourceVersion throws the 409 Status");
  t.equal(s.count("leases"), 1);
  t.same(s.list("leases", { namespace: "b" }), []);
  t.equal(s.list("pods", { labelSelector: "x=y" }).length, 0);
  t.ok(s.delete("leases", "a", "l"));
  t.equal(s.delete("leases", "a", "l"), undefined);
  t.equal(s.get("leases", "a", "l"), undefined);
  t.throws(() => s.create("nothings", {}), DevApiStatusError);
});

t.test("HTTPS when given a key and certificate", async (t) => {
  const key = readFileSync(new URL("./testdata/devapi-key.pem", import.meta.url), "utf8");
  const cert = readFileSync(new URL("./testdata/devapi-cert.pem", import.meta.url), "utf8");
  const api = await withApi(t, { tls: { key, cert } });
  t.match(api.url, /^https:\/\/127\.0\.0\.1:\d+$/);
  const { request } = await import("node:https");
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(`${api.url}/version`, { rejectUnauthorized: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end();
  });
  t.equal(status, 200);
});

t.test("writing a CustomResourceDefinition serves its custom resources, with its printer columns", async (t) => {
  const api = await withApi(t);
  const crd = {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "widgets.example.com" },
    spec: {
      group: "example.com",
      names: { kind: "Widget", plural: "widgets", singular: "widget", listKind: "WidgetList", shortNames: ["wd"] },
      scope: "Namespaced",
      versions: [
        {
          name: "v1",
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [{ name: "Color", type: "string", jsonPath: ".spec.color" }],
        },
        { name: "v0", served: false, storage: false },
      ],
    },
  };
  t.equal((await call(api, "GET", "/apis/example.com/v1/widgets")).status, 404, "not served before the CRD");
  t.equal((await call(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)).status, 201);
  const made = await call(api, "POST", "/apis/example.com/v1/namespaces/a/widgets", { apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "w1" }, spec: { color: "red" } });
  t.equal(made.status, 201);
  t.equal(meta(made.body).generation, 1);
  const list = await call(api, "GET", "/apis/example.com/v1/widgets");
  t.same(Object.keys(list.body), ["apiVersion", "items", "kind", "metadata"]);
  t.equal(list.body.kind, "WidgetList");
  const table = await call(api, "GET", "/apis/example.com/v1/widgets", undefined, { accept: "application/json;as=Table;v=v1;g=meta.k8s.io" });
  t.same((table.body.columnDefinitions as Json[]).map((c) => c.name), ["Name", "Color"]);
  t.same((table.body.rows as Json[])[0]?.cells, ["w1", "red"]);
  t.equal((await call(api, "PUT", "/apis/example.com/v1/namespaces/a/widgets/w1/status", { ...made.body, status: { ok: true } })).status, 200, "/status served");
  t.equal((await call(api, "GET", "/apis/example.com/v0/widgets")).status, 404, "unserved versions are not served");
  const rl = await call(api, "GET", "/apis/example.com/v1");
  t.match(rl.body, { resources: [{ name: "widgets", shortNames: ["wd"] }, { name: "widgets/status" }] });
});

t.test("requireToken answers 401 before routing: an unauthenticated client cannot probe paths", async (t) => {
  const api = await withApi(t, { requireToken: true });
  t.equal((await call(api, "GET", "/apis/nope.io/v1/things")).status, 401);
  t.equal((await call(api, "GET", "/apis/nope.io/v1/things", undefined, { authorization: "Bearer any" })).status, 404);
  t.equal((await call(api, "GET", "/readyz")).status, 200);
});
