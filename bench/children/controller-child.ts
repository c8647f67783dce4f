/**
 * One controller replica for P5, in its own process (forked, IPC, run with
 * `--expose-gc`): a real `@kubernetes/client-node` pod informer over
 * verified TLS, pointed either at its shardcar proxy or straight at devapi,
 * exactly as an unmodified controller would be.
 *
 * Every response body byte the controller receives is counted through
 * undici's `undici:request:bodyChunkReceived` diagnostics channel (after
 * de-chunking, as the proxy counts its own), so the figure means the same
 * whether a proxy is in front or not. Wire bytes (TLS records, headers,
 * chunk framing) are counted too, on the sockets `net.client.socket` sees:
 * devapi writes small TLS records, so its wire overhead is larger than a
 * proxy's and would flatter the proxy.
 *
 * Args: `--server URL --ca FILE --token T [--shard i/N]` (the shard only
 * checks that the cache holds nothing outside it).
 * Sends `{ type: "synced", objects, ms }` once the initial list is in.
 * Messages:
 * - `{ type: "check", expect: [[ns/name, rv], ...] }` → `{ type: "check", behind }`:
 *   how many of those objects the cache holds at an older version;
 * - `{ type: "measure" }` → {@link MeasureReply} (after two forced GCs);
 * - `{ type: "exact", ranges: [[start, end], ...] }` (decimal strings) →
 *   `{ type: "exact", objects, outOfRange }`: the cache against ring ranges.
 */
import { subscribe } from "node:diagnostics_channel";
import type { Socket } from "node:net";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { CoreV1Api, KubeConfig, makeInformer, type V1Pod } from "@kubernetes/client-node";
import { HashMatcher, makeRange, shardRange } from "../../src/shard/range.ts";

export interface MeasureReply {
  readonly type: "measure";
  readonly objects: number;
  /** Cached pods whose uid hash lies outside `--shard`. */
  readonly outOfRange: number;
  readonly heapUsed: number;
  readonly rss: number;
  /** Response body bytes. */
  readonly bodyBytes: number;
  /** Bytes read on the sockets (TLS). */
  readonly wireBytes: number;
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { server: { type: "string" }, ca: { type: "string" }, token: { type: "string" }, shard: { type: "string" } } });
  const server = values.server ?? "";
  const caPem = readFileSync(values.ca ?? "", "utf8");

  const sockets = new Set<Socket>();
  subscribe("net.client.socket", (msg) => {
    const s = (msg as { socket?: Socket }).socket;
    if (s !== undefined) sockets.add(s);
  });
  // bytesRead survives the socket's close, so closed sockets still count.
  const wireBytes = (): number => [...sockets].reduce((n, s) => n + s.bytesRead, 0);
  let bodyBytes = 0;
  subscribe("undici:request:bodyChunkReceived", (msg) => {
    const chunk = (msg as { chunk?: Uint8Array }).chunk;
    if (chunk !== undefined) bodyBytes += chunk.byteLength;
  });

  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server, caData: Buffer.from(caPem).toString("base64"), skipTLSVerify: false }],
    users: [{ name: "u", token: values.token ?? "bench" }],
    contexts: [{ name: "ctx", cluster: "c", user: "u" }],
    currentContext: "ctx",
  });
  const core = kc.makeApiClient(CoreV1Api);
  const informer = makeInformer<V1Pod>(kc, "/api/v1/pods", () => core.listPodForAllNamespaces());
  let stopped = false;
  informer.on("error", () => {
    // A controller restarts its informer after an error; so does this one.
    if (!stopped) setTimeout(() => void informer.start().catch(() => undefined), 500).unref();
  });
  const shard = values.shard === undefined ? undefined : /^(\d+)\/(\d+)$/.exec(values.shard);
  const matcher = shard === undefined || shard === null ? undefined : new HashMatcher([shardRange(Number(shard[1]), Number(shard[2]))]);

  const t0 = performance.now();
  await informer.start();
  process.send?.({ type: "synced", objects: informer.list().length, ms: performance.now() - t0 });

  process.on("message", (raw: unknown) => {
    const m = raw as { type: string; expect?: Array<[string, string]>; ranges?: Array<[string, string]> };
    if (m.type === "check") {
      let behind = 0;
      for (const [key, rv] of m.expect ?? []) {
        const [ns, name] = key.split("/");
        const o = informer.get(name ?? "", ns);
        if (o === undefined || Number(o.metadata?.resourceVersion ?? 0) < Number(rv)) behind++;
      }
      process.send?.({ type: "check", behind });
    } else if (m.type === "measure") {
      const gc = (globalThis as { gc?: () => void }).gc;
      gc?.();
      gc?.();
      const pods = informer.list();
      const outOfRange = matcher === undefined ? 0 : pods.filter((p) => !matcher.matchesString(p.metadata?.uid ?? "")).length;
      const mem = process.memoryUsage();
      const reply: MeasureReply = { type: "measure", objects: pods.length, outOfRange, heapUsed: mem.heapUsed, rss: mem.rss, bodyBytes, wireBytes: wireBytes() };
      process.send?.(reply);
    } else if (m.type === "exact") {
      const ranges = new HashMatcher((m.ranges ?? []).map(([a, b]) => makeRange(BigInt(a), BigInt(b))));
      const pods = informer.list();
      process.send?.({ type: "exact", objects: pods.length, outOfRange: pods.filter((p) => !ranges.matchesString(p.metadata?.uid ?? "")).length });
    } else if (m.type === "exit") {
      stopped = true;
      void informer.stop().then(() => process.disconnect());
    }
  });
  process.on("disconnect", () => {
    stopped = true;
    void informer.stop().finally(() => process.exit(0));
  });
}
