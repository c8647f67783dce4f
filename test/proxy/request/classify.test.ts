/** Which requests are sharded (src/proxy/request/classify.ts), with paths read as the apiserver reads them. */
import t from "tap";
import { classify, indexResources, readsNoBody } from "../../../src/proxy/request/classify.ts";
import { parseResources } from "../../../src/shard/spec.ts";

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
    ["GET", "/api/v1/namespaces/alpha/services/s1", "passthrough:not-sharded"],
    ["GET", "/api/v1/namespaces/alpha/services/s1/proxy/healthz", "passthrough:subresource"],
    ["GET", "/api/v1/namespaces/alpha/secrets/s1/status", "passthrough:subresource"],
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

t.test("the path is read as the apiserver reads it: decoded whole, then split", async (t) => {
  const rows: Array<[string, string, string | undefined]> = [
    ["/api/v1/%70ods", "list", undefined],
    ["/api/v1/namespaces%2Falpha%2Fpods", "list", "alpha"],
    ["/api/v1/namespaces/al%70ha/pods?watch=1", "watch", "alpha"],
    ["/api/v1/%77atch/pods", "watch", undefined],
    ["/api%2Fv1%2Fpods", "list", undefined],
    ["/api/v1/namespaces/%ff/pods", "list", "\ufffd"],
    ["/api/v1/namespaces/x/pods%2Fp1", "passthrough:single-object", undefined],
  ];
  for (const [url, want, ns] of rows) {
    const c = classify("GET", url, index);
    t.equal(c.kind === "passthrough" ? `passthrough:${c.reason}` : c.kind, want, url);
    if (c.kind !== "passthrough") t.equal(c.namespace, ns, `${url}: namespace`);
  }
});

t.test("classification never throws, whatever the path holds", async (t) => {
  for (const url of ["/api/v1/namespaces/%zz/pods", "/api/v1/namespaces/%/pods", "/api/v1/namespaces/%e2%82/pods", "/api/v1/%zz", "/%", "", "?", "*", "/api/v1/namespaces/x/pods?%zz=%zz&watch=%zz", "\u0000"]) {
    t.doesNotThrow(() => classify("GET", url, index), url);
  }
  const c = classify("GET", "/api/v1/namespaces/%zz/pods", index);
  t.equal(c.kind === "passthrough" ? c.reason : c.kind, "undecodable-path", "an undecodable path passes through (the apiserver refuses it with 400)");
});

t.test("a watch is what the apiserver reads as one: the first watch value, unless 0 or false in any case", async (t) => {
  const rows: Array<[string, "watch" | "list"]> = [
    ["watch=true", "watch"],
    ["watch=1", "watch"],
    ["watch=True", "watch"],
    ["watch=t", "watch"],
    ["watch=yes", "watch"],
    ["watch=", "watch"],
    ["watch", "watch"],
    ["watch=0", "list"],
    ["watch=false", "list"],
    ["watch=FALSE", "list"],
    ["watch=False", "list"],
    ["watch=0&watch=1", "list"],
    ["watch=1&watch=0", "watch"],
    ["w%61tch=1", "watch"],
    ["limit=5", "list"],
  ];
  for (const [q, want] of rows) t.equal(classify("GET", `/api/v1/pods?${q}`, index).kind, want, q);
});

t.test("a legacy watch loses exactly its watch segment, even in a namespace named watch", async (t) => {
  const c = classify("GET", "/api/v1/watch/namespaces/watch/pods", index);
  t.equal(c.kind === "watch" ? c.path : undefined, "/api/v1/namespaces/watch/pods");
  const list = classify("GET", "/api/v1/namespaces/watch/pods", index);
  t.equal(list.kind, "list");
  t.equal(list.kind === "list" ? list.path : undefined, "/api/v1/namespaces/watch/pods", "a list in namespace watch keeps its path");
});

t.test("a GET of any resource or subresource is served without its body; a proxy subresource, a write or another path may read one", async (t) => {
  const rows: Array<[string, string, boolean]> = [
    ["GET", "/api/v1/pods?watch=1", true],
    ["GET", "/api/v1/namespaces/alpha/pods/p1", true],
    ["GET", "/api/v1/watch/namespaces/alpha/pods/p1", true],
    ["GET", "/api/v1/services?watch=1", true],
    ["GET", "/apis/apps/v1/watch/deployments", true],
    ["GET", "/api/v1/namespaces/alpha/services/s1", true],
    ["GET", "/api/v1/namespaces/alpha/pods/p1/proxy/index.html", false],
    ["GET", "/api/v1/namespaces/alpha/services/s1/proxy/index.html", false],
    ["GET", "/api/v1/namespaces/alpha/pods/p1/log?follow=true", true],
    ["GET", "/api/v1/namespaces/alpha/pods/p1/status", true],
    ["GET", "/apis/apps/v1/namespaces/alpha/deployments/d1/scale", true],
    ["GET", "/api/v1/nodes/n1/proxy/metrics", false],
    ["GET", "/api/v1/namespaces/alpha/pods/p1/proxy", false],
    ["POST", "/api/v1/namespaces/alpha/pods", false],
    ["PUT", "/api/v1/namespaces/alpha/pods/p1", false],
    ["GET", "/version", false],
    ["GET", "/api/v1/namespaces/%zz/pods", false],
  ];
  for (const [method, url, want] of rows) t.equal(readsNoBody(classify(method, url, index)), want, `${method} ${url}`);
});
