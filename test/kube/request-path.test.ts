import t from "tap";
import { decodeRequestPath, joinSegments, malformedEscape, pathSegments } from "../../src/kube/request-path.ts";

t.test("a path is decoded as Go's url.PathUnescape decodes it, whole, before it is split", async (t) => {
  t.equal(decodeRequestPath("/api/v1/%70ods"), "/api/v1/pods");
  t.equal(decodeRequestPath("/api/v1/namespaces%2Fns-0%2Fpods"), "/api/v1/namespaces/ns-0/pods", "%2F separates segments");
  t.same(pathSegments("/api/v1/namespaces%2Fns-0%2Fpods"), ["api", "v1", "namespaces", "ns-0", "pods"]);
  t.same(pathSegments("//api///v1/pods/"), ["api", "v1", "pods"], "empty segments are dropped");
  t.equal(decodeRequestPath("/a+b"), "/a+b", "+ is not a space in a path");
  t.equal(decodeRequestPath("/%c3%a9"), "/é");
  t.equal(decodeRequestPath("/x%ffy"), "/x\ufffdy", "bytes that are not UTF-8 decode, to U+FFFD");
  t.equal(decodeRequestPath("/%2e%2E"), "/..");
});

t.test("a malformed escape is named, and nothing decodes", async (t) => {
  for (const [path, bad] of [
    ["/api/v1/namespaces/%zz/pods", "%zz"],
    ["/x%", "%"],
    ["/x%4", "%4"],
    ["/%g1", "%g1"],
    ["/ok%41/%%", "%%"],
  ] as const) {
    t.equal(malformedEscape(path), bad, path);
    t.equal(decodeRequestPath(path), undefined, path);
    t.equal(pathSegments(path), undefined, path);
  }
  t.equal(malformedEscape("/fine%20path%2F"), undefined);
});

t.test("segments (as a split decoded path yields them) joined read back as the same segments", async (t) => {
  const segs = ["api", "v1", "namespaces", "ns 1", "100%", "é", "?#", "pods"];
  t.same(pathSegments(joinSegments(segs)), segs);
});
