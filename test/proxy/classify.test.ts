import t from "tap";
import { classify, indexResources } from "../../src/proxy/classify.ts";
import { parseResources } from "../../src/shard/spec.ts";

const index = indexResources(parseResources("pods, configmaps=namespace, leases.coordination.k8s.io, widgets.example.com, namespaces"));

t.test("collection LIST and WATCH of sharded resources are sharded; everything else passes", async (t) => {
  const rows: Array<[string, string, string]> = [
    ["GET", "/api/v1/pods?limit=500", "list"],
    ["GET", "/api/v1/namespaces/alpha/pods", "list"],
    ["GET", "/api/v1/pods?watch=true&resourceVersion=5", "watch"],
    ["GET", "/api/v1/pods?watch=1", "watch"],
    ["GET", "/api/v1/watch/pods", "watch"],
    ["GET", "/api/v1/watch/namespaces/alpha/pods", "watch"],
    ["GET", "/api/v1/pods?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=587&watch=true", "watch"],
    ["GET", "/apis/coordination.k8s.io/v1/namespaces/x/leases", "list"],
    ["GET", "/apis/example.com/v1/widgets?watch=false", "list"],
    ["GET", "/api/v1/namespaces", "list"],
    ["GET", "/api/v1/namespaces/alpha", "passthrough:single-object"],
    ["GET", "/api/v1/namespaces/alpha/pods/p1", "passthrough:single-object"],
    ["GET", "/api/v1/namespaces/alpha/pods/p1/log", "passthrough:subresource"],
    ["GET", "/api/v1/watch/namespaces/alpha/pods/p1", "passthrough:single-object"],
    ["POST", "/api/v1/namespaces/alpha/pods", "passthrough:method"],
    ["DELETE", "/api/v1/namespaces/alpha/pods", "passthrough:method"],
    ["GET", "/api/v1/services", "passthrough:not-sharded"],
    ["GET", "/apis/apps/v1/deployments", "passthrough:not-sharded"],
    ["GET", "/api", "passthrough:not-resource-path"],
    ["GET", "/apis/example.com/v1", "passthrough:not-resource-path"],
    ["GET", "/version", "passthrough:not-resource-path"],
    ["GET", "/openapi/v3", "passthrough:not-resource-path"],
  ];
  for (const [method, url, want] of rows) {
    const c = classify(method, url, index);
    t.equal(c.kind === "passthrough" ? `passthrough:${c.reason}` : c.kind, want, `${method} ${url}`);
  }
});

t.test("a namespaced legacy watch keeps its namespace and loses the /watch/ segment", async (t) => {
  const c = classify("GET", "/api/v1/watch/namespaces/alpha/pods?resourceVersion=3", index);
  t.equal(c.kind, "watch");
  if (c.kind !== "watch") return;
  t.equal(c.namespace, "alpha");
  t.equal(c.path, "/api/v1/namespaces/alpha/pods");
  t.equal(c.legacyPath, true);
  t.equal(c.resource.key, "uid");
});

t.test("the resource's configured key travels with the classification", async (t) => {
  const c = classify("GET", "/api/v1/configmaps", index);
  t.equal(c.kind === "list" ? c.resource.key : undefined, "namespace");
});
