/**
 * An upstream body cut at every byte, through a live proxy's list and watch
 * paths (JSON and protobuf): the upstream ends cleanly where it should not,
 * or its connection is reset there. Whatever the cut, the client gets a
 * clean error or close, never a shorter list that looks whole, never an
 * event cut in half, and never an object outside the shard; the proxy
 * answers the whole body correctly afterwards.
 *
 * The scanners' own tests (test/proxy/scan/) cut their input at every byte
 * too; this one holds the whole path to it: node's HTTP client upstream, the
 * proxy's response handling, node's server towards the client.
 */
import t from "tap";
import { request, type IncomingHttpHeaders } from "node:http";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, shardRange } from "../../../src/shard/range.ts";
import { decodeEnvelope, decodeEvent, encodeEventFrame, encodeObject, loadK8sProto, splitFrames } from "../../support/proto/k8s.ts";
import { makeRandom, syntheticUid } from "../../support/synthetic-pods.ts";
import { proxyInFrontOf, readyz } from "../support/live-proxy.ts";

const pb = loadK8sProto();
const OWNED = [shardRange(0, 2)];
const PB = "application/vnd.kubernetes.protobuf";

// Small pods, half of them in the shard, so that every cut is cheap to try.
const rnd = makeRandom(7);
const UIDS = Array.from({ length: 16 }, () => syntheticUid(rnd));
const inShard = (uid: string): boolean => contains(OWNED, fnv1a64(uid));
const PICKED = [...UIDS.filter(inShard).slice(0, 2), ...UIDS.filter((u) => !inShard(u)).slice(0, 2)];
const OUTSIDE = PICKED.filter((u) => !inShard(u));
const pod = (uid: string, i: number): { metadata: Record<string, string> } => ({ metadata: { name: `p${i}`, namespace: "ns", uid, resourceVersion: String(10 + i) } });

interface Shape {
  readonly name: string;
  readonly path: string;
  readonly contentType: string;
  readonly body: Buffer;
  /** Byte offsets where a complete body or event ends: a clean end there is no cut. */
  readonly boundaries: ReadonlySet<number>;
}

const jsonList = Buffer.from(JSON.stringify({ kind: "PodList", apiVersion: "v1", metadata: { resourceVersion: "20" }, items: PICKED.map(pod) }));
const jsonEvents = PICKED.map((u, i) => Buffer.from(`${JSON.stringify({ type: "ADDED", object: { kind: "Pod", apiVersion: "v1", ...pod(u, i) } })}\n`));
const pbList = encodeObject(pb, "v1", "PodList", { metadata: { resourceVersion: "20" }, items: PICKED.map(pod) });
const pbEvents = PICKED.map((u, i) => encodeEventFrame(pb, "ADDED", "v1", "Pod", pod(u, i)));
const ends = (parts: readonly Buffer[]): Set<number> => new Set(parts.map((_, i) => parts.slice(0, i + 1).reduce((n, p) => n + p.length, 0)));
const SHAPES: readonly Shape[] = [
  { name: "JSON list", path: "/api/v1/pods", contentType: "application/json", body: jsonList, boundaries: new Set([jsonList.length]) },
  // An event whose JSON is whole is whole without its newline (client-go's decoder reads JSON values, not lines).
  { name: "JSON watch", path: "/api/v1/pods?watch=1&resourceVersion=1", contentType: "application/json", body: Buffer.concat(jsonEvents), boundaries: new Set([0, ...[...ends(jsonEvents)].flatMap((e) => [e - 1, e])]) },
  // The envelope has no overall length: a cut after Unknown.raw loses only its empty trailing fields.
  { name: "protobuf list", path: "/api/v1/pods", contentType: PB, body: pbList, boundaries: new Set([pbList.length, pbList.length - 2, pbList.length - 4]) },
  { name: "protobuf watch", path: "/api/v1/pods?watch=1&resourceVersion=1", contentType: `${PB};stream=watch`, body: Buffer.concat(pbEvents), boundaries: new Set([0, ...ends(pbEvents)]) },
];

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The response ended without its proper end (an aborted connection), or never started. */
  readonly broken: boolean;
}

function get(url: string, accept: string): Promise<Answer> {
  return new Promise((resolve) => {
    const req = request(url, { agent: false, headers: { authorization: "Bearer x", accept } }, (res) => {
      const chunks: Buffer[] = [];
      const done = (broken: boolean): void => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), broken });
      res.on("data", (b: Buffer) => chunks.push(b));
      res.on("end", () => done(false));
      res.on("error", () => done(true));
      res.on("aborted", () => done(true));
    });
    req.on("error", () => resolve({ status: 0, headers: {}, body: Buffer.alloc(0), broken: true }));
    req.end();
  });
}

/** The events a watch answer delivered, as type and uid; undefined when one of them is cut or unreadable. */
function events(shape: Shape, body: Buffer): Array<{ type: string; uid?: string }> | undefined {
  try {
    if (shape.contentType.startsWith(PB)) return splitFrames(body).map((f) => decodeEvent(pb, f)).map((e) => ({ type: e.type, uid: (e.object["metadata"] as { uid?: string } | undefined)?.uid }));
    const lines = body.toString("utf8").split("\n");
    if (lines.at(-1) === "") lines.pop();
    return lines
      .map((l) => JSON.parse(l) as { type: string; object?: { metadata?: { uid?: string } } })
      .map((e) => ({ type: e.type, uid: e.object?.metadata?.uid }));
  } catch {
    return undefined;
  }
}

/** What is wrong with the answer to `shape` cut at `at` (`whole`: the answer to the uncut body). */
function judge(shape: Shape, at: number, a: Answer, whole: Answer): string[] {
  const problems: string[] = [];
  for (const uid of OUTSIDE) if (a.body.includes(uid)) problems.push(`the out-of-shard ${uid} reached the client`);
  const cut = !shape.boundaries.has(at);
  if (shape.name.endsWith("list")) {
    const complete = a.status === 200 && !a.broken;
    if (complete && cut) problems.push(`a cut list arrived as a complete ${a.body.length}-byte answer`);
    if (complete && !a.body.equals(whole.body) && !(shape.contentType === PB && Buffer.from(decodeEnvelope(pb, a.body).raw).equals(Buffer.from(decodeEnvelope(pb, whole.body).raw)))) problems.push("a list that differs from the whole one");
    return problems;
  }
  if (a.status !== 200) return problems;
  const got = events(shape, a.body);
  const all = events(shape, whole.body) ?? [];
  if (got === undefined) return [...problems, "an event cut in half reached the client"];
  const passed = got.filter((e) => e.type !== "ERROR");
  if (!passed.every((e, i) => e.type === all[i]?.type && e.uid === all[i]?.uid)) problems.push(`the events are not the start of the whole watch's: ${JSON.stringify(passed)}`);
  if (cut && !a.broken && got.at(-1)?.type !== "ERROR") problems.push("a watch cut mid-event ended cleanly, without an ERROR event");
  return problems;
}

t.test("an upstream list or watch cut at any byte reaches the client as a clean error or close, never out of the shard", async (t) => {
  let serve = { shape: SHAPES[0] as Shape, at: 0, reset: false };
  const proxy = await proxyInFrontOf(
    t,
    OWNED,
    (_req, res) => {
      const { shape, at, reset } = serve;
      res.writeHead(200, { "content-type": shape.contentType });
      if (!reset) {
        res.end(shape.body.subarray(0, at));
        return;
      }
      // Flushed first, then the connection torn down mid-body.
      res.write(shape.body.subarray(0, at), () => res.socket?.destroy());
    },
    { admin: { host: "127.0.0.1", port: 0 } },
  );
  t.ok(OUTSIDE.length === 2 && PICKED.length === 4, "two pods in the shard, two outside");

  for (const shape of SHAPES) {
    serve = { shape, at: shape.body.length, reset: false };
    const whole = await get(`${proxy.url}${shape.path}`, shape.contentType);
    t.equal(whole.status, 200, `${shape.name}, whole: served`);
    t.notOk(whole.broken, `${shape.name}, whole: ends cleanly`);
    t.ok(PICKED.filter(inShard).every((u) => whole.body.includes(u)), `${shape.name}, whole: both in-shard pods delivered`);
    t.same(judge(shape, shape.body.length, whole, whole), [], `${shape.name}, whole: nothing outside the shard`);
    for (const reset of [false, true]) {
      const problems: string[] = [];
      for (let at = 0; at < shape.body.length; at++) {
        serve = { shape, at, reset };
        const a = await get(`${proxy.url}${shape.path}`, shape.contentType);
        for (const p of judge(shape, at, a, whole)) problems.push(`cut at ${at}: ${p}`);
      }
      t.same(problems.slice(0, 20), [], `${shape.name} ${reset ? "reset" : "ended"} at each of its ${shape.body.length} bytes: a clean error or close, nothing outside the shard`);
    }
  }
  t.equal(await readyz(proxy.adminUrl), "", "the proxy still answers /readyz");
  serve = { shape: SHAPES[0] as Shape, at: jsonList.length, reset: false };
  t.ok((await get(`${proxy.url}/api/v1/pods`, "application/json")).body.includes(PICKED[0] as string), "and serves a whole list");
});
