/** Which requests belong to one controller cache (src/proxy/handoff/lineage.ts). */
import t from "tap";
import { isResumingWatch, lineageKey } from "../../../src/proxy/handoff/lineage.ts";

const q = (s: string) => new URLSearchParams(s);

t.test("lineage keys: path, selectors and the as= transform; watch, resourceVersion and paging parameters do not matter", async (t) => {
  t.equal(lineageKey("/api/v1/pods", q("watch=1&resourceVersion=5"), "application/json"), lineageKey("/api/v1/pods", q("limit=500"), undefined));
  t.not(lineageKey("/api/v1/pods", q("labelSelector=a%3Db"), undefined), lineageKey("/api/v1/pods", q(""), undefined), "label selectors do");
  t.not(lineageKey("/api/v1/pods", q("fieldSelector=spec.nodeName%3Dn1"), undefined), lineageKey("/api/v1/pods", q(""), undefined), "field selectors do");
  t.not(lineageKey("/api/v1/namespaces/a/pods", q(""), undefined), lineageKey("/api/v1/pods", q(""), undefined), "the namespace does");
  t.not(lineageKey("/api/v1/pods", q(""), "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"), lineageKey("/api/v1/pods", q(""), "application/json"), "a metadata-only informer is another cache");
});

t.test("a metadata-only informer's LIST (as=...List) and WATCH (as=...) are one lineage (review F, F')", async (t) => {
  // client-go's metadata client (metadata.go).
  const list = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
  const watch = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
  t.equal(lineageKey("/api/v1/pods", q(""), list), lineageKey("/api/v1/pods", q("watch=true&resourceVersion=10"), watch));
});

t.test("a resuming watch continues a resourceVersion without initial events", async (t) => {
  t.ok(isResumingWatch(q("watch=true&resourceVersion=10")));
  t.notOk(isResumingWatch(q("watch=true")), "from now, with initial state");
  t.notOk(isResumingWatch(q("watch=true&resourceVersion=0")), "from any point, with initial state");
  t.notOk(isResumingWatch(q("watch=true&resourceVersion=10&sendInitialEvents=true")), "a watch-list");
});
