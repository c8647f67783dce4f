/** The request target routed on is the one forwarded (src/proxy/request/request-target.ts). */
import t from "tap";
import { readRequestTarget } from "../../../src/proxy/request/request-target.ts";

t.test("the target routed on is the one forwarded: the WHATWG reading http-proxy-3 sends upstream", async (t) => {
  const rows: Array<[string, string]> = [
    ["/api/v1/pods?limit=500", "/api/v1/pods?limit=500"],
    ["/api/v1/namespaces/x/../../pods", "/api/v1/pods"],
    ["/api/v1/namespaces/x/%2e%2E/%2e./pods", "/api/v1/pods"],
    ["/api\\v1\\pods", "/api/v1/pods"],
    ["http://127.0.0.1:1/api/v1/pods?watch=1", "/api/v1/pods?watch=1"],
    ["//evil.invalid/api/v1/pods", "/api/v1/pods"],
    ["/api/v1/pods?", "/api/v1/pods"],
    ["/api/v1/pods#frag", "/api/v1/pods"],
    ["*", "/*"],
    ["/api/v1/namespaces/%ff/pods", "/api/v1/namespaces/%ff/pods"],
  ];
  for (const [raw, want] of rows) {
    const r = readRequestTarget(raw);
    t.same(r, { ok: true, url: want }, raw);
  }
});

t.test("what the apiserver would refuse, or could read otherwise, is refused naming the bad value", async (t) => {
  const rows: Array<[string, string, RegExp]> = [
    ["/api/v1/namespaces/%zz/pods", "bad-escape", /invalid URL escape "%zz" in request path "\/api\/v1\/namespaces\/%zz\/pods"/],
    ["/api/v1/pods%", "bad-escape", /invalid URL escape "%"/],
    ["/api/v1/namespaces/x%2F..%2F..%2Fpods", "dot-segment", /has a "\." or "\.\." segment once decoded/],
    ["//[", "unparsable", /request target "\/\/\[" is not a URL path/],
    ["http://[::1/x", "unparsable", /is not a URL path/],
  ];
  for (const [raw, reason, message] of rows) {
    const r = readRequestTarget(raw);
    t.equal(r.ok ? "ok" : r.reason, reason, raw);
    t.match(r.ok ? "" : r.message, message, raw);
  }
  const long = readRequestTarget(`/api/v1/namespaces/%zz/${"a".repeat(10_000)}`);
  t.ok(!long.ok && long.message.length < 400, "a long target is cut short in the message");
});
