/**
 * A client that reads a large LIST slowly, or stops reading, must hold the
 * proxy's upstream read back: what the proxy pulls from the apiserver ahead
 * of what its client took stays bounded by the sockets' kernel buffers and a
 * few stream buffers, whatever the list's size. Without that, a sidecar's
 * memory under a 100 MB list would grow with the list and with how slowly
 * its controller reads (issue 34, P6b's bound of 32 MiB).
 *
 * The stand-in apiserver writes its list only as fast as its socket drains
 * (as the real one does), so what it wrote is what the proxy has pulled;
 * it counts the bytes of the items in the proxy's shard among them, to
 * compare with what the client received (the proxy drops the others).
 */
import t from "tap";
import { request, type IncomingMessage, type ServerResponse } from "node:http";
import { fnv1a64 } from "../../../src/shard/hash.ts";
import { contains, shardRange } from "../../../src/shard/range.ts";
import { makeRandom, syntheticUid } from "../../support/synthetic-pods.ts";
import { proxyInFrontOf } from "../support/live-proxy.ts";

const MiB = 1024 * 1024;
const OWNED = [shardRange(0, 4)];
/** Far more than every kernel buffer between the stand-in and the client can hold. */
const LIST_BYTES = 192 * MiB;
/**
 * Items of the shard pulled from upstream and not yet received by the
 * client, at most: the kernel buffers of the proxy's two loopback
 * connections (a send buffer of up to 4 MiB and a receive buffer the kernel
 * sizes to the reader's pace, each way; upstream's hold 1/4 of this shard's
 * items) and the proxy's own stream buffers (tens of KiB). A proxy that read
 * on regardless of its client would be at the whole list.
 */
const MAX_AHEAD = 16 * MiB;

/**
 * A gate-off PodList of ~1 KiB items, written only as fast as the proxy reads it:
 * `produced()` is the bytes written so far, `producedInShard()` those of the items in {@link OWNED}.
 */
function slowDrainingList(): { readonly answer: (req: IncomingMessage, res: ServerResponse) => void; readonly produced: () => number; readonly producedInShard: () => number } {
  let produced = 0;
  let producedInShard = 0;
  const rnd = makeRandom(34);
  const pad = "x".repeat(900);
  const answer = (_req: IncomingMessage, res: ServerResponse): void => {
    res.writeHead(200, { "content-type": "application/json" });
    const write = (s: string): boolean => {
      produced += Buffer.byteLength(s);
      return res.write(s);
    };
    write('{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[');
    let i = 0;
    const more = (): void => {
      while (produced < LIST_BYTES) {
        const uid = syntheticUid(rnd);
        const item = `${i === 0 ? "" : ","}{"metadata":{"name":"p${i}","namespace":"ns","uid":"${uid}","resourceVersion":"7"},"spec":{"pad":"${pad}"}}`;
        i++;
        if (contains(OWNED, fnv1a64(uid))) producedInShard += item.length;
        if (!write(item)) {
          res.once("drain", more);
          return;
        }
      }
      write("]}");
      res.end();
    };
    res.on("error", () => undefined);
    more();
  };
  return { answer, produced: () => produced, producedInShard: () => producedInShard };
}

/** Resolves once `f()` has not changed for `quietMs`. */
async function settled(f: () => number, quietMs: number): Promise<number> {
  let last = f();
  for (;;) {
    await new Promise((r) => setTimeout(r, quietMs));
    const now = f();
    if (now === last) return now;
    last = now;
  }
}

t.test("a client that stops reading a large list holds the proxy's upstream read back (bounded read-ahead)", async (t) => {
  const upstream = slowDrainingList();
  const proxy = await proxyInFrontOf(t, OWNED, upstream.answer);
  let received = 0;
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(`${proxy.url}/api/v1/pods`, { agent: false, headers: { authorization: "Bearer x", accept: "application/json" } }, resolve);
    req.on("error", reject);
    req.end();
  });
  t.equal(res.statusCode, 200);
  // Read the first MiB, then stop reading for good: the slowest reader there is.
  await new Promise<void>((resolve) => {
    const onData = (b: Buffer): void => {
      received += b.length;
      if (received >= MiB) {
        res.off("data", onData);
        res.pause();
        resolve();
      }
    };
    res.on("data", onData);
  });
  const produced = await settled(upstream.produced, 500);
  t.ok(produced < LIST_BYTES, `the proxy stopped pulling the list (${(produced / MiB).toFixed(1)} of ${LIST_BYTES / MiB} MiB)`);
  const ahead = upstream.producedInShard() - received;
  t.ok(ahead <= MAX_AHEAD, `pulled ahead of the client: ${(ahead / MiB).toFixed(1)} MiB of the shard's items (at most ${MAX_AHEAD / MiB} MiB)`);
  res.destroy();
});

t.test("a client reading at a steady slow pace keeps the proxy's read-ahead bounded throughout", async (t) => {
  const upstream = slowDrainingList();
  const proxy = await proxyInFrontOf(t, OWNED, upstream.answer);
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(`${proxy.url}/api/v1/pods`, { agent: false, headers: { authorization: "Bearer x", accept: "application/json" } }, resolve);
    req.on("error", reject);
    req.end();
  });
  // 8 MiB/s, paused whenever ahead of that pace, for 3 s: a controller busy decoding.
  const bytesPerSecond = 8 * MiB;
  const t0 = performance.now();
  let received = 0;
  let worstAhead = 0;
  await new Promise<void>((resolve) => {
    res.on("data", (b: Buffer) => {
      received += b.length;
      worstAhead = Math.max(worstAhead, upstream.producedInShard() - received);
      const ahead = t0 + (received / bytesPerSecond) * 1000 - performance.now();
      if (performance.now() - t0 > 3000) {
        res.destroy();
        resolve();
      } else if (ahead > 1) {
        res.pause();
        setTimeout(() => res.resume(), ahead);
      }
    });
  });
  t.ok(upstream.produced() < LIST_BYTES, "the list was not pulled whole");
  t.ok(worstAhead <= MAX_AHEAD, `pulled ahead of the client at worst: ${(worstAhead / MiB).toFixed(1)} MiB of the shard's items (at most ${MAX_AHEAD / MiB} MiB)`);
});
