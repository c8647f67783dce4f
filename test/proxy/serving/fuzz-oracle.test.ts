/**
 * The proxy fuzzer's oracle matches each answer to the request devapi
 * served by the answer's Audit-Id, not by its place among the answers: a
 * message may get no answer at all (node skips empty lines before a request
 * line), and then every later answer would be judged against the wrong
 * request. The long run of 2026-12-01 (seed 1304334149, case 5424) judged a
 * discovery answer against a watch of pods that way and reported "passed
 * through unfiltered".
 */
import t from "tap";
import type { RequestRecord } from "../../../src/devapi/index.ts";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, shardRange } from "../../../src/shard/range.ts";
import { loadK8sProto } from "../../support/proto/k8s.ts";
import { judgeExchange } from "../support/fuzz-oracle.ts";

const pb = loadK8sProto();
const OWNED = [shardRange(0, 2)];
const target = { name: "proxy", keys: new Map([["pods", "uid"]] as const), history: new Map([[0, OWNED]]) };
const outside = Array.from({ length: 64 }, (_, i) => `u-${i}-x`).find((u) => !contains(OWNED, fnv1a64(u))) as string;
const inside = Array.from({ length: 64 }, (_, i) => `u-${i}-x`).find((u) => contains(OWNED, fnv1a64(u))) as string;

function response(headers: Record<string, string>, body: string): string {
  return `HTTP/1.1 200 OK\r\n${Object.entries({ ...headers, "content-length": String(Buffer.byteLength(body)) })
    .map(([k, v]) => `${k}: ${v}`)
    .join("\r\n")}\r\n\r\n${body}`;
}

const records: RequestRecord[] = [
  { method: "GET", url: "/api/v1/pods?watch=1", auditId: "watch-id", authorization: "Bearer t1", served: { verb: "watch", resource: "pods" } },
  { method: "GET", url: "/api/v1/", auditId: "discovery-id", authorization: "Bearer t2" },
];
const event = (uid: string): string => `${JSON.stringify({ type: "ADDED", object: { metadata: { uid } } })}\n`;

t.test("an answer is judged against the request it answers, found by its Audit-Id", async (t) => {
  // Three messages, the first only empty lines (no request): two answers, to the watch (filtered) and to discovery (not sharded).
  const watch = response({ "audit-id": "watch-id", "content-type": "application/json", "x-shardcar-generation": "0" }, event(inside));
  const discovery = response({ "audit-id": "discovery-id", "content-type": "application/json" }, '{"kind":"APIResourceList"}');
  const three = { methods: ["GET", "GET"] };
  t.same(judgeExchange(three, { received: Buffer.from(watch + discovery), serverClosed: false, error: undefined }, records, target, pb), [], "the discovery answer is not taken for the watch's");
  // The watch's own answer, unfiltered and out of range, is still caught wherever it stands.
  const leak = response({ "audit-id": "watch-id", "content-type": "application/json" }, event(outside));
  const problems = judgeExchange(three, { received: Buffer.from(discovery + leak), serverClosed: false, error: undefined }, records, target, pb);
  t.match(problems, [/devapi served the request of answer 1 \(\/api\/v1\/pods\?watch=1\) as a watch of pods, but the proxy passed it through unfiltered/]);
  const filtered = response({ "audit-id": "watch-id", "content-type": "application/json", "x-shardcar-generation": "0" }, event(outside));
  t.match(judgeExchange({ methods: ["GET"] }, { received: Buffer.from(filtered), serverClosed: false, error: undefined }, records, target, pb), [/delivered an object whose uid .* is outside the proxy's ranges/], "and an out-of-range object in a filtered one");
});

t.test("a 502 is a finding unless it is the apiserver closing a kept-alive connection as the request went out on it", async (t) => {
  const bad = (message: string): string[] =>
    judgeExchange({ methods: ["GET"] }, { received: Buffer.from(response({ "content-type": "text/plain; charset=utf-8" }, `${message}\n`).replace("200 OK", "502 Bad Gateway")), serverClosed: false, error: undefined }, records, target, pb);
  // Each way node reports that race, by where the reset met the request (the long run of 2026-12-01 met "write ECONNRESET").
  for (const race of ["socket hang up", "read ECONNRESET", "write ECONNRESET", "write EPIPE"]) t.same(bad(`shardcar: apiserver http://127.0.0.1:6443 unreachable: ${race}`), [], race);
  t.match(bad("shardcar: apiserver http://127.0.0.1:1 unreachable: connect ECONNREFUSED 127.0.0.1:1"), [/502 from the proxy/], "any other 502 is one");
});

t.test("a watch may name in a DELETED what an older generation owned, but never add it, and never delete what no generation owned", async (t) => {
  // Generation 1 owns the other half: `inside` left at 1, `outside` came in at 1.
  const moved = { ...target, history: new Map([[0, OWNED], [1, [shardRange(1, 2)]]]) };
  const typed = (type: string, uid: string): string => `${JSON.stringify({ type, object: { metadata: { uid } } })}\n`;
  const watchOf = (body: string): { received: Buffer; serverClosed: boolean; error: undefined } => ({ received: Buffer.from(response({ "audit-id": "watch-id", "content-type": "application/json", "x-shardcar-generation": "1" }, body)), serverClosed: false, error: undefined });
  // A watch under 1 resuming a cache filled under 0: the proxy's synthetic DELETED empties it of what left.
  t.same(judgeExchange({ methods: ["GET"] }, watchOf(typed("DELETED", inside) + typed("ADDED", outside)), records, moved, pb), [], "a DELETED of an object generation 0 owned, in a watch of generation 1");
  t.match(judgeExchange({ methods: ["GET"] }, watchOf(typed("MODIFIED", inside)), records, moved, pb), [/under generation 1, newest 1\) delivered an object whose uid .* is outside the proxy's ranges \(event 1 of 1, MODIFIED; owned last at generation 0/], "a MODIFIED of it is a finding");
  const never = { ...target, history: new Map([[0, OWNED]]) };
  t.match(judgeExchange({ methods: ["GET"] }, { ...watchOf(typed("DELETED", outside)), received: Buffer.from(response({ "audit-id": "watch-id", "content-type": "application/json", "x-shardcar-generation": "0" }, typed("DELETED", outside))) }, records, never, pb), [/outside the proxy's ranges \(event 1 of 1, DELETED; owned last at generation none before/], "a DELETED of an object no generation owned is a finding");
});
