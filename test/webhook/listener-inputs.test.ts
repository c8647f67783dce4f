/**
 * Every kind of input issue 12 §1 lists, sent raw over TLS to the manager's
 * webhook listener (both endpoints, as the manager runs it with label
 * slots), gets an answer or a clean close; each review answered is a
 * well-formed AdmissionReview echoing its request's uid; and after each the
 * server still answers /healthz and holds no connection for a client that has
 * gone. The fuzzers (fuzz.test.ts, label-fuzz.test.ts) try these at random;
 * this table pins each one down, the same on every run.
 */
import t from "tap";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { eventually } from "../support/wait.ts";
import { healthz } from "../support/fuzz/admission.ts";
import { exchangeRow, parseResponses, rawBytes, type RawMessage, type RawRow } from "../support/fuzz/raw-http.ts";
import { openFds } from "../support/fuzz/vitals.ts";
import { reviewFor, startTestWebhook, testConfig, testLabelSlotConfig } from "./support.ts";

const DIR = fileURLToPath(new URL("./testdata/", import.meta.url));
const POD = JSON.parse(readFileSync(`${DIR}inject/controller-runtime-manager.pod.json`, "utf8")) as unknown;
const CONFIGMAP = JSON.parse(readFileSync(`${DIR}label-slots/create-namespace-keyed-configmap.review.json`, "utf8")) as { request: Record<string, unknown> };

const podReview = (uid: string): string => JSON.stringify(reviewFor(POD, { uid }));
const labelReview = (uid: string): string => JSON.stringify({ ...CONFIGMAP, request: { ...CONFIGMAP.request, uid } });

const post = (target: string, body: string, headers: readonly string[] = []): RawMessage => ({
  method: "POST",
  head: [`POST ${target} HTTP/1.1`, "Host: localhost", "Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`, ...headers].join("\r\n"),
  body,
});
const request = (method: string, target: string, headers: readonly string[] = [], body = ""): RawMessage => ({ method, head: [`${method} ${target} HTTP/1.1`, "Host: localhost", ...headers].join("\r\n"), body });

interface Row extends RawRow {
  /** The uids the AdmissionReviews answered must echo, in order. */
  readonly uids?: readonly string[];
}

const ROWS: readonly Row[] = [
  // Malformed percent-escapes in the path: no endpoint has that name.
  { name: "a malformed escape after the endpoint", messages: [post("/mutate-pods%zz", podReview("a"))], want: [404] },
  { name: "a malformed escape for the whole path", messages: [post("/%zz", labelReview("a"))], want: [404] },
  { name: "a truncated escape on /healthz", messages: [request("GET", "/healthz%")], want: [404] },
  // Overlong paths: over node's 16 KiB header limit node's own 431; under it, not found.
  { name: "a path over the header limit", messages: [post(`/mutate-pods/${"a".repeat(20_000)}`, podReview("a"))], want: [431] },
  { name: "a long path under the limit", messages: [post(`/label-slots/${"a".repeat(12_000)}`, labelReview("a"))], want: [404] },
  // Non-UTF-8 paths.
  { name: "an escaped byte that is no UTF-8", messages: [post("/mutate-pods%ff", podReview("a"))], want: [404] },
  { name: "raw non-UTF-8 bytes in the path", messages: [post("/label-slots\xff\xfe", labelReview("a"))], want: [400] },
  // Duplicate and malformed query parameters: the apiserver sends `?timeout=10s`; the query is not the endpoint's business.
  { name: "duplicate timeout parameters", messages: [post("/mutate-pods?timeout=10s&timeout=%zz", podReview("dup-q"))], want: [200], uids: ["dup-q"] },
  { name: "malformed query parts", messages: [post("/label-slots?;;&&=&%zz", labelReview("bad-q"))], want: [200], uids: ["bad-q"] },
  // Unknown methods.
  { name: "a method that is no HTTP method", messages: [request("FOO", "/mutate-pods")], want: [400] },
  { name: "a lower-case post", messages: [{ ...post("/mutate-pods", podReview("a")), head: post("/mutate-pods", podReview("a")).head.replace(/^POST/, "post") }], want: [400] },
  { name: "a WebDAV method on an endpoint", messages: [request("PROPFIND", "/label-slots")], want: [405] },
  // Huge headers.
  { name: "one header over the limit", messages: [post("/mutate-pods", podReview("a"), [`X-Big: ${"b".repeat(20_000)}`])], want: [431] },
  { name: "a thousand headers over the limit", messages: [post("/label-slots", labelReview("a"), Array.from({ length: 1000 }, (_, i) => `X-H${i}: ${"v".repeat(16)}`))], want: [431] },
  { name: "a large header under the limit", messages: [post("/label-slots", labelReview("big-h"), [`X-Big: ${"b".repeat(12_000)}`])], want: [200], uids: ["big-h"] },
  // Bodies on GET.
  { name: "a GET of /healthz with a body", messages: [request("GET", "/healthz", ["Content-Length: 13"], '{"kind":"x"}\n')], want: [200] },
  { name: "a GET of an endpoint with a review as its body", messages: [{ ...post("/mutate-pods", podReview("a")), method: "GET", head: post("/mutate-pods", podReview("a")).head.replace(/^POST/, "GET") }], want: [405] },
  // Pipelined requests: each answered, in order, with its own uid.
  {
    name: "both endpoints and /healthz, pipelined",
    messages: [post("/mutate-pods", podReview("p-1")), request("GET", "/healthz"), post("/label-slots", labelReview("p-2")), post("/mutate-pods", podReview("p-3"))],
    want: [200, 200, 200, 200],
    uids: ["p-1", "p-2", "p-3"],
  },
  { name: "Expect: 100-continue on a review pipelined behind another", messages: [post("/mutate-pods", podReview("e-1")), post("/label-slots", labelReview("e-2"), ["Expect: 100-continue"])], want: [200, 200], uids: ["e-1", "e-2"] },
  { name: "a body that is not JSON pipelined between two reviews", messages: [post("/label-slots", labelReview("q-1")), post("/label-slots", "{not json"), post("/mutate-pods", podReview("q-3"))], want: [200, 200, 200], uids: ["q-1", "", "q-3"] },
  // Clients that vanish.
  { name: "a client gone mid-headers", messages: [post("/mutate-pods", podReview("a"))], bytes: (b) => [b.subarray(0, 40)], end: { kind: "vanish" } },
  { name: "a client gone mid-body", messages: [post("/label-slots", labelReview("a"))], bytes: (b) => [b.subarray(0, b.length - 100)], end: { kind: "vanish" } },
  { name: "a client gone before the answer", messages: [post("/mutate-pods", podReview("a"))], end: { kind: "vanish" } },
  { name: "a client that resets mid-body", messages: [post("/label-slots", labelReview("a"))], bytes: (b) => [b.subarray(0, b.length - 100)], end: { kind: "reset", ms: 5 } },
  { name: "a client gone with pipelined reviews unanswered", messages: [post("/mutate-pods", podReview("a")), post("/label-slots", labelReview("b"))], end: { kind: "vanish" } },
];

t.test("every listed input gets an answer or a clean close from the webhook listener, which serves on", async (t) => {
  const config = testLabelSlotConfig();
  const webhook = await startTestWebhook(t, testConfig(), { labelSlots: { config: () => config } });
  const endpoint = { host: "127.0.0.1", port: webhook.server.port, tls: { ca: webhook.ca, servername: "localhost" } };
  t.equal(await healthz(webhook.server.port, webhook.ca), "", "/healthz answers before");
  // Server and client share the process: once every client is gone, the fds are back to this.
  const fds = openFds();
  for (const row of ROWS) {
    const methods = row.messages.map((m) => m.method.toUpperCase());
    const res = await exchangeRow(endpoint, row, rawBytes(row.messages));
    const parsed = parseResponses(res.received, methods, res.serverClosed);
    t.equal(parsed.malformed, undefined, `${row.name}: the answer is HTTP, or nothing`);
    if (row.want !== undefined) t.same(parsed.responses.map((r) => r.status), row.want, `${row.name}: answered ${row.want.join(", ")}`);
    if (row.uids !== undefined) {
      const reviews = parsed.responses.filter((r) => r.headers.get("content-type")?.[0] === "application/json").map((r) => JSON.parse(r.body.toString("utf8")) as { apiVersion?: string; kind?: string; response?: { uid?: string; allowed?: boolean } });
      t.same(reviews.map((r) => `${r.apiVersion}/${r.kind}`), row.uids.map(() => "admission.k8s.io/v1/AdmissionReview"), `${row.name}: AdmissionReviews`);
      t.same(reviews.map((r) => r.response?.uid), row.uids, `${row.name}: each echoes its request's uid, in order`);
    }
    t.equal(await healthz(webhook.server.port, webhook.ca), "", `${row.name}: /healthz still answers`);
    t.ok(await eventually(() => openFds() <= fds, 10_000), `${row.name}: no connection left open once the client is gone (${openFds()} fds, ${fds} before)`);
  }
});
