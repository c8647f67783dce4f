/** Per-shard leader election's renaming of the lock (src/proxy/serving/lock-rename.ts): paths, JSON and protobuf bodies. */
import t from "tap";
import { matchLockRequest, renameJson, renameProto, renamedLock } from "../../../src/proxy/serving/lock-rename.ts";
import { parseLockSpec } from "../../../src/settings/lock.ts";
import { decodeObject, encodeObject, loadK8sProto } from "../../support/proto/k8s.ts";

const lease = parseLockSpec("leases/demo-lock");
const cm = parseLockSpec("configmaps/my-ctrl");

t.test("a shard's lock is the lock's name and its shard identity", async (t) => {
  t.equal(renamedLock(lease, "2"), "demo-lock-2");
  t.equal(renamedLock({ resource: "leases", name: `${"a".repeat(252)}.` }, "0").length <= 253, true, "at most 253 characters");
});

t.test("requests naming the lock are rewritten; others are not", async (t) => {
  const rows: Array<[string, string, unknown]> = [
    ["GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/demo-lock", { kind: "object", path: "/apis/coordination.k8s.io/v1/namespaces/ns/leases/demo-lock-1", query: "" }],
    ["PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/demo-lock?fieldManager=x", { kind: "object", path: "/apis/coordination.k8s.io/v1/namespaces/ns/leases/demo-lock-1", query: "?fieldManager=x" }],
    ["POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", { kind: "create", path: "/apis/coordination.k8s.io/v1/namespaces/ns/leases", query: "" }],
    ["GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", undefined],
    ["GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/other", undefined],
    ["GET", "/api/v1/namespaces/ns/configmaps/demo-lock", undefined],
  ];
  for (const [method, url, want] of rows) t.same(matchLockRequest(method, url, lease, "demo-lock-1"), want, `${method} ${url}`);
  t.same(matchLockRequest("GET", "/api/v1/namespaces/ns/configmaps/my-ctrl", cm, "my-ctrl-0")?.path, "/api/v1/namespaces/ns/configmaps/my-ctrl-0");
});

t.test("the lock is recognised however its path is spelled, and no path makes matching throw", async (t) => {
  t.same(matchLockRequest("GET", "/apis/coordination.k8s.io/v1/namespaces/ns/le%61ses/demo%2Dlock", lease, "demo-lock-1")?.path, "/apis/coordination.k8s.io/v1/namespaces/ns/leases/demo-lock-1");
  t.same(matchLockRequest("GET", "/apis/coordination.k8s.io/v1/namespaces%2Fns%2Fleases%2Fdemo-lock", lease, "demo-lock-1")?.kind, "object");
  for (const url of ["/apis/coordination.k8s.io/v1/namespaces/ns/leases/%zz", "/api/v1/namespaces/%zz/pods", "/x/%ff", "/%", "", "?%zz"]) {
    t.doesNotThrow(() => matchLockRequest("PUT", url, lease, "demo-lock-1"), url);
    t.equal(matchLockRequest("PUT", url, lease, "demo-lock-1"), undefined, `${url} is not the lock`);
  }
});

t.test("JSON bodies that are no object, or nested deeper than the stack, are left as they are", async (t) => {
  for (const body of ["null", "5", '"demo-lock"', "[]", "true"]) t.equal(renameJson(Buffer.from(body), "demo-lock", "demo-lock-0"), undefined, body);
  const deep = `{"metadata":{"name":"demo-lock"},"x":${"[".repeat(200_000)}${"]".repeat(200_000)}}`;
  t.equal(renameJson(Buffer.from(deep), "demo-lock", "demo-lock-0"), undefined, "200,000 levels deep");
});

t.test("JSON bodies: metadata.name and a Status's details.name are renamed, nothing else", async (t) => {
  const body = Buffer.from(JSON.stringify({ metadata: { name: "demo-lock", labels: { name: "demo-lock" } }, spec: { holderIdentity: "demo-lock" } }));
  const out = JSON.parse(renameJson(body, "demo-lock", "demo-lock-0")?.toString() ?? "{}") as { metadata: { name: string; labels: { name: string } }; spec: { holderIdentity: string } };
  t.equal(out.metadata.name, "demo-lock-0");
  t.equal(out.metadata.labels.name, "demo-lock", "labels untouched");
  t.equal(out.spec.holderIdentity, "demo-lock", "spec untouched");
  const status = Buffer.from(JSON.stringify({ kind: "Status", details: { name: "demo-lock-0", kind: "leases" }, code: 409 }));
  t.match(renameJson(status, "demo-lock-0", "demo-lock")?.toString(), /"name":"demo-lock"/);
  t.equal(renameJson(Buffer.from('{"metadata":{"name":"x"}}'), "demo-lock", "y"), undefined, "another object is left alone");
  t.equal(renameJson(Buffer.from("not json"), "a", "b"), undefined);
});

t.test("protobuf bodies: a Lease's metadata.name is renamed and the envelope stays decodable", async (t) => {
  const pb = loadK8sProto();
  const body = encodeObject(pb, "coordination.k8s.io/v1", "Lease", { metadata: { name: "demo-lock", namespace: "ns", resourceVersion: "7" }, spec: { holderIdentity: "me", leaseDurationSeconds: 15 } });
  const out = renameProto(body, "demo-lock", "demo-lock-12");
  t.ok(out !== undefined);
  const d = decodeObject(pb, out ?? Buffer.alloc(0));
  t.same(d.object["metadata"], { name: "demo-lock-12", namespace: "ns", resourceVersion: "7" });
  t.same(d.object["spec"], { holderIdentity: "me", leaseDurationSeconds: 15 });
  t.equal(d.kind, "Lease");
  t.equal(renameProto(body, "other", "x"), undefined);
  t.equal(renameProto(Buffer.from("{}"), "a", "b"), undefined, "no k8s magic, no rename");
});
