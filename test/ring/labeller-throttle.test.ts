/**
 * The labeller's shell against an apiserver that pushes back: API Priority
 * and Fairness answers a PATCH it will not queue with 429 TooManyRequests.
 * The pure rate (label-rate.ts) is tested on its own; this checks the I/O
 * shell's half: an HTTP 429 reaches the rate as `throttled` (the target
 * halves, the PATCH is retried, nothing is lost), not as a plain error; and
 * the rate it reports (`shardcar_labeller_rate`) is what the apiserver
 * answered, not the target.
 *
 * A loopback front stands where APF would: it relays every request to
 * devapi, and while `throttling` is set it answers PATCHes with the Status a
 * kube-apiserver sends for a rejected request; `patchDelayMs` holds every
 * PATCH that long before relaying it (a slow apiserver).
 */
import t, { type Test } from "tap";
import { createServer, type Server } from "node:http";
import { relayTo } from "../support/relay.ts";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import { startDevApi, type DevApi } from "../../src/devapi/index.ts";
import { runCoordinator } from "../../src/ring/coordinator.ts";
import { createLocalCa } from "../../src/pki/ca.ts";
import { clusterClock } from "../support/wait.ts";
import { kubeConfig, SHARDRING_REF, TIMINGS, until } from "./harness.ts";
import { startLabelSlotPieces, type LabelSlotPieces } from "../support/label-slot-manager.ts";
import type { LabellingPolicy } from "../../src/ring/labelling.ts";

const NS = "shop";
const LABEL = "shard.shardcar.io/web";
const GADGETS = { group: "example.com", version: "v1", resource: "gadgets" } as const;
const OBJECTS = 300;
const FLOOR = 20;

interface Front {
  readonly url: string;
  throttling: boolean;
  patchDelayMs: number;
  /** PATCHes answered 429. */
  refused: number;
  close(): Promise<void>;
}

async function startFront(upstream: string): Promise<Front> {
  const target = new URL(upstream);
  const front: Front = { url: "", throttling: false, patchDelayMs: 0, refused: 0, close: async () => {} };
  const server: Server = createServer((req, res) => {
    if (req.method === "PATCH" && front.patchDelayMs > 0) {
      req.pause();
      setTimeout(() => relay(req, res), front.patchDelayMs);
      return;
    }
    if (req.method === "PATCH" && front.throttling) {
      front.refused++;
      req.resume();
      res.writeHead(429, { "content-type": "application/json", "retry-after": "1" });
      res.end(JSON.stringify({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "Too many requests, please try again later.", reason: "TooManyRequests", details: { retryAfterSeconds: 1 }, code: 429 }));
      return;
    }
    relay(req, res);
  });
  const relay = relayTo(target);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return Object.assign(front, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

/** devapi with `objects` Gadgets and a labels-mode ring over them, the front, and an elected labeller whose calls go through the front. */
async function startLabelling(t: Test, objects: number, policy: Partial<LabellingPolicy>): Promise<{ api: DevApi; front: Front; pieces: LabelSlotPieces }> {
  const api = await startDevApi({});
  t.teardown(() => api.close());
  api.registerResource({ ...GADGETS, kind: "Gadget", namespaced: true, encoding: "unstructured" });
  for (let i = 0; i < objects; i++) api.store.create(GADGETS, { apiVersion: "example.com/v1", kind: "Gadget", metadata: { name: `g${i}`, namespace: NS }, spec: {} });
  api.store.create(SHARDRING_REF, { apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name: "web", namespace: NS }, spec: { filter: "labels", slots: 64, resources: "gadgets.example.com" } });

  const front = await startFront(api.url);
  t.teardown(() => front.close());
  const ca = await createLocalCa("throttle test CA", new Date(), 3600_000);
  // The labeller's calls go through the front; the coordinator's Lease, straight to devapi.
  const pieces = await startLabelSlotPieces(kubeConfig(front.url), { ca, policy });
  const abort = new AbortController();
  const coordinator = runCoordinator({ kubeConfig: kubeConfig(api.url), namespace: "shardcar-system", identity: "mgr", election: TIMINGS, clock: clusterClock, tasks: [pieces.labeller] }, abort.signal);
  t.teardown(async () => {
    abort.abort();
    await coordinator;
    await pieces.stop();
  });
  return { api, front, pieces };
}

async function metric(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values ?? []).filter((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val)).reduce((n, v) => n + v.value, 0);
}

t.test("a 429 from the apiserver halves the labeller's target rate, never below --label-rate-min, and every object is still labelled", async (t) => {
  const { api, front, pieces } = await startLabelling(t, OBJECTS, { minRatePerSecond: FLOOR, maxRatePerSecond: 1000, burst: FLOOR });
  const rate = () => metric(pieces.registry, "shardcar_labeller_rate_target");
  const labelledCount = () => api.store.list(GADGETS, { namespace: NS }).filter((o) => o.metadata?.labels?.[LABEL] !== undefined).length;

  // Fast answers and a backlog: the rate climbs above the floor.
  await until("the target climbs above --label-rate-min", async () => (await rate()) > FLOOR, 20_000);
  const climbed = await rate();
  t.ok(labelledCount() < OBJECTS, "work is still waiting when the apiserver starts pushing back");

  front.throttling = true;
  await until("the labeller backs off", async () => (await metric(pieces.registry, "shardcar_labeller_rate_backoffs_total")) >= 1, 20_000);
  t.ok((await rate()) < climbed, `the rate fell from ${climbed}/s`);
  t.ok((await rate()) >= FLOOR, "never below the floor");
  front.throttling = false;

  t.ok(front.refused > 0, "PATCHes were refused");
  // The last answers may still be on their way to the labeller when the
  // front has sent them (or devapi has stored the label): wait until it has
  // read them before counting.
  const outcome = (o: string) => metric(pieces.registry, "shardcar_labeller_patches_total", { outcome: o });
  await until("the labeller has read every 429", async () => (await outcome("throttled")) >= front.refused, 10_000);
  t.equal(await outcome("throttled"), front.refused, "every 429 is counted as throttled");
  t.equal(await outcome("error"), 0, "a 429 is not an error");
  await until("every object labelled after the push-back", async () => labelledCount() === OBJECTS && (await outcome("labelled")) >= OBJECTS, 30_000);
  t.equal(await outcome("labelled"), OBJECTS, "each object labelled once: the refused PATCHes were retried, none lost");
});

t.test("shardcar_labeller_rate reports the achieved rate: with PATCHes of 100 ms and 8 in flight it stays at most 8 ÷ 100 ms while the target is 1000/s", async (t) => {
  const objects = 1_000;
  const { api, front, pieces } = await startLabelling(t, objects, { minRatePerSecond: 1000, maxRatePerSecond: 1000, burst: 100, maxInFlight: 8 });
  front.patchDelayMs = 100;
  const labelledCount = () => api.store.list(GADGETS, { namespace: NS }).filter((o) => o.metadata?.labels?.[LABEL] !== undefined).length;
  // Each PATCH takes at least 100 ms and at most 8 are in flight: at most 80
  // answered a second (a 10 s window holds at most one more per slot, for a
  // timer that fires a millisecond early). No lower bound: a loaded machine
  // only slows it.
  const bound = 8 / 0.1 + 8 / 10;
  let peak = 0;
  await until("every object labelled through the slow front", async () => {
    peak = Math.max(peak, await metric(pieces.registry, "shardcar_labeller_rate"));
    return labelledCount() === objects;
  }, 120_000);
  t.ok(peak > 0, `the achieved rate was reported: ${peak}/s at its highest`);
  t.ok(peak <= bound, `never above 8 ÷ 100 ms: ${peak}/s ≤ ${bound}/s`);
  t.equal(await metric(pieces.registry, "shardcar_labeller_rate_target"), 1000, "while the target stays at 1000/s");
});
