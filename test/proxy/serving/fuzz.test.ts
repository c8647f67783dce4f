/**
 * The proxy never dies on input, never leaks, and never hands a controller
 * an object outside its shard, whatever arrives on its listener.
 *
 * Two live proxies (`startProxy`, as `shardcar proxy` runs them) in front of
 * devapi with seeded pods and configmaps under churn: one plain HTTP with a
 * static shard, one TLS whose MutableOwnership moves like a ring member's
 * (never into the last quarter of the keyspace), both renaming a
 * `--leader-election` lock. Requests from the recorded kubectl and client-go
 * corpus, mutated (test/proxy/support/http-mutate.ts), go out raw over
 * sockets; each answer is judged by test/proxy/support/fuzz-oracle.ts. Then:
 * both proxies still answer /readyz and serve; no handler threw; sockets,
 * file descriptors, RSS and heap are back where they were.
 *
 * Short and fixed in `npm test`; `npm run fuzz` runs it for
 * `SHARDCAR_FUZZ_SECONDS` with a fresh seed (test/support/fuzz/runner.ts).
 */
import t from "tap";
import type { Agent } from "node:http";
import { startDevApi, seedPods, type DevApi } from "../../../src/devapi/index.ts";
import { silentLogger } from "../../../src/log.ts";
import { parseLockSpec } from "../../../src/settings/lock.ts";
import { MutableOwnership, StaticOwnership, type OwnershipSource } from "../../../src/shard/ownership.ts";
import { startProxy, type RunningProxy } from "../../../src/proxy/run.ts";
import { makeUpstream } from "../../../src/proxy/serving/upstream.ts";
import { shardRange, split, type Range } from "../../../src/shard/range.ts";
import { parseResources } from "../../../src/shard/spec.ts";
import { createLocalCa } from "../../../src/pki/ca.ts";
import { eventually } from "../../support/wait.ts";
import { exchange, type Endpoint } from "../../support/fuzz/raw-http.ts";
import { Random } from "../../support/fuzz/random.ts";
import { formatFinding, fuzzSettings, runFuzz, summaryLine, type FuzzCase } from "../../support/fuzz/runner.ts";
import { VitalsLog } from "../../support/fuzz/vitals.ts";
import { loadK8sProto } from "../../support/proto/k8s.ts";
import { lockRequests, observedRequests, type RequestModel } from "../support/fuzz-corpus.ts";
import { describePlan, planCase, unmutatedPlan } from "../support/http-mutate.ts";
import { judgeExchange, type ProxyUnderTest } from "../support/fuzz-oracle.ts";
import { agentSockets, describeAgentRequests, handlerFailures, readyz } from "../support/live-proxy.ts";

const FILE = "test/proxy/serving/fuzz.test.ts";
const NAMESPACES = ["ns-0", "ns-1", "ns-2", "ns-3"];
const KEYS = new Map([
  ["pods", "uid"],
  ["configmaps", "namespace"],
] as const);

/** Growth allowed from the warm sample (VitalsLog) to the end, after a forced GC (see docs/testing.md). */
const BOUNDS = { rssMiB: 160, heapMiB: 32 };
/** File descriptors allowed on top of two per idle upstream keep-alive connection (its two ends are in this process). */
const FD_SLACK = 16;

interface Target extends ProxyUnderTest {
  readonly running: RunningProxy;
  readonly endpoint: Endpoint;
  readonly agent: Agent;
  readonly corpus: readonly RequestModel[];
}

/** Objects beyond these are removed again: the fuzzer's writes must not grow devapi without bound. */
const STORE_CAPS = { pods: 200, configmaps: 100, leases: 50 } as const;
const MAX_OBJECT_BYTES = 32 * 1024;

/**
 * Writes beside the fuzzer's own (which may delete anything, a whole
 * collection included): each write is tried and a failed one skipped, the
 * data set is topped up when the fuzzer wiped it, and what the fuzzer wrote
 * that is large or too many is removed, so that devapi, which shares this
 * process, reaches a steady size and the memory measured is the proxies'.
 */
function startChurn(api: DevApi, rnd: Random): () => void {
  let n = 0;
  const prune = (resource: keyof typeof STORE_CAPS): void => {
    const all = api.store.list(resource);
    for (const [i, o] of all.entries()) {
      if (i >= STORE_CAPS[resource] || JSON.stringify(o).length > MAX_OBJECT_BYTES) api.store.delete(resource, o.metadata?.namespace, o.metadata?.name ?? "");
    }
  };
  const timer = setInterval(() => {
    n++;
    try {
      if (api.store.list("pods").length < 40) seedPods(api, { count: 40, namespaces: NAMESPACES, prefix: `reseed-${n}-` });
      if (api.store.list("configmaps").length < 20) for (let i = 0; i < 20; i++) api.store.create("configmaps", { metadata: { name: `cm-${n}-${i}`, namespace: NAMESPACES[i % 4] } });
      api.store.create("pods", { metadata: { name: `churn-${n}`, namespace: rnd.pick(NAMESPACES), labels: { app: "churn" } }, spec: { containers: [{ name: "c", image: "x" }] } });
      const victim = rnd.pick(api.store.list("pods"));
      if (rnd.chance(0.5)) api.store.patch("pods", victim.metadata?.namespace, victim.metadata?.name ?? "", { metadata: { labels: { touched: String(n) } } });
      else api.store.delete("pods", victim.metadata?.namespace, victim.metadata?.name ?? "");
      const cm = rnd.pick(api.store.list("configmaps"));
      api.store.patch("configmaps", cm.metadata?.namespace, cm.metadata?.name ?? "", { data: { touched: String(n) } });
      if (n % 20 === 0) for (const r of Object.keys(STORE_CAPS) as Array<keyof typeof STORE_CAPS>) prune(r);
    } catch {
      // The fuzzer's writes got there first.
    }
  }, 50);
  return () => clearInterval(timer);
}

/** Nothing the proxies opened upstream is still in use: no request, no devapi watch. */
function upstreamIdle(targets: readonly Target[], api: DevApi): boolean {
  return api.stats.openWatches === 0 && targets.every((x) => agentSockets(x.agent).inUse === 0);
}

function drainState(targets: readonly Target[], api: DevApi): string {
  const watches = api.stats.openWatchUrls;
  return `proxy connections ${targets.map((x) => x.running.openConnections()).join("/")}, upstream requests ${targets.map((x) => agentSockets(x.agent).inUse).join("/")}, devapi watches ${watches.length}${watches.length === 0 ? "" : ` (${watches.map((u) => JSON.stringify(u.slice(0, 300))).join(", ")})`}${targets.flatMap((x) => x.running.describeConnections().map((c) => `; ${x.name} connection: ${c}`)).join("")}${targets.flatMap((x) => describeAgentRequests(x.agent).map((r) => `; ${x.name} upstream request: ${r}`)).join("")}`;
}

async function failures(targets: readonly Target[]): Promise<string[]> {
  const out: string[] = [];
  for (const x of targets) {
    const n = await handlerFailures(x.running);
    if (n > 0) out.push(`${x.name}: ${n} handler failures counted (shardcar_proxy_handler_failures_total)`);
  }
  return out;
}

// Read before any server starts: a missing recording fails the file at once,
// with its path, and leaves nothing open behind it.
const observed = observedRequests().map((o) => o.request);

t.test("every request the listener can receive gets an answer or a clean close, and no sharded answer leaves the shard", async (t) => {
  const settings = fuzzSettings({ cases: 300, seed: 20261201, concurrency: 8 });
  // Short histories: what devapi keeps must stop growing early in the run.
  const api = await startDevApi({ gate: "off", watchHistory: 200, maxRecordedRequests: 2000 });
  seedPods(api, { count: 80, namespaces: NAMESPACES });
  for (let i = 0; i < 40; i++) api.store.create("configmaps", { metadata: { name: `cm-${i}`, namespace: NAMESPACES[i % 4] }, data: { i: String(i) } });
  const stopChurn = startChurn(api, new Random(settings.seed ^ 0xc4));
  t.teardown(stopChurn);
  const ca = await createLocalCa("fuzz", new Date(), 3600_000);
  const tls = await ca.issue({ commonName: "localhost", names: ["localhost", "127.0.0.1"], now: new Date(), validityMs: 3600_000 });
  t.ok(observed.length >= 9, `the recorded corpus holds the kubectl and client-go requests (${observed.length})`);

  // The ring-like proxy owns some of the first three quarters; never the last.
  const quarters = split(4).slice(0, 3);
  const ringHistory = new Map<number, readonly Range[]>([[1, [quarters[0] as Range, quarters[1] as Range]]]);
  const ring = new MutableOwnership({ generation: 1, ranges: ringHistory.get(1) as Range[] });
  const staticRanges = [shardRange(1, 3)];

  const start = async (name: string, ownership: OwnershipSource, history: ReadonlyMap<number, readonly Range[]>, withTls: boolean, lock: "leases/demo-lock" | "configmaps/ctrl-lock", ns: string): Promise<Target> => {
    const upstream = makeUpstream(api.url);
    const running = await startProxy({
      listen: { host: "127.0.0.1", port: 0 },
      admin: { host: "127.0.0.1", port: 0 },
      ...(withTls ? { tls } : {}),
      upstream,
      resources: parseResources("pods, configmaps=namespace"),
      ownership,
      fallback: "filter",
      logger: silentLogger(),
      syntheticDeletes: withTls,
      lock: { spec: parseLockSpec(lock), identity: name },
    });
    const port = Number(new URL(running.url).port);
    const spec = parseLockSpec(lock);
    return {
      name,
      keys: KEYS,
      history,
      running,
      agent: upstream.agent,
      endpoint: withTls ? { host: "127.0.0.1", port, tls: { ca: ca.certPem, servername: "localhost" } } : { host: "127.0.0.1", port },
      corpus: [...observed, ...lockRequests({ resource: spec.resource as "leases" | "configmaps", name: spec.name }, ns)],
    };
  };
  const targets = [await start("static", new StaticOwnership(staticRanges), new Map([[0, staticRanges]]), false, "leases/demo-lock", "ns-0"), await start("ring", ring, ringHistory, true, "configmaps/ctrl-lock", "ns-1")];

  // Ownership moves while requests are in flight, as a ring member's does.
  const moves = new Random(settings.seed ^ 0x5eed);
  let moving = true;
  let generation = 1;
  const move = (): void => {
    if (!moving) return;
    generation++;
    const ranges = quarters.filter(() => moves.chance(0.5));
    ringHistory.set(generation, ranges);
    ring.set({ generation, ranges });
    setTimeout(move, moves.between(100, 600));
  };
  setTimeout(move, 200);

  t.teardown(async () => {
    moving = false;
    stopChurn();
    await Promise.all(targets.map((x) => x.running.close()));
    await api.close();
  });

  const pb = loadK8sProto();
  // The harness itself: each corpus request, unmutated, is answered and judged clean.
  for (const x of targets) {
    for (const [k, r] of x.corpus.entries()) {
      const plan = unmutatedPlan(r, `warmup-${x.name}-${k}`, 300);
      const res = await exchange(x.endpoint, plan, [r.method]);
      t.same(judgeExchange(plan, res, api.stats.requests, x, pb), [], `${x.name}: corpus request ${k} (${r.method} ${r.path}) is judged clean`);
      t.match(res.received.subarray(0, 12).toString("latin1"), /^HTTP\/1\.1 [24]\d\d/, `${x.name}: corpus request ${k} is answered`);
    }
  }

  // The last case sent from each client port: a connection left open names its case.
  // The case number only: this process's heap is judged, and a description
  // per port (tens of thousands of them, up to a few kB each) filled it for
  // the first half of a long run. The replay command rebuilds the case.
  const casesByPort = new Map<number, number>();
  const make = (rnd: Random, i: number): FuzzCase => {
    const target = targets[rnd.int(targets.length)] as Target;
    const plan = planCase(rnd, target.corpus, `fuzz-${settings.seed}-${i}`, target.endpoint.tls !== undefined);
    return {
      description: `to the ${target.name} proxy (${target.endpoint.tls === undefined ? "plain HTTP" : "TLS"})\n${describePlan(plan)}`,
      requests: plan.messages.length,
      run: async () => {
        const res = await exchange(target.endpoint, plan, plan.methods);
        if (res.localPort !== undefined) casesByPort.set(res.localPort, i);
        const p = judgeExchange(plan, res, api.stats.requests, target, pb);
        // One case at a time (a reproduction), each must release what it opened: this names the case that leaks.
        if (settings.concurrency === 1 && !(await eventually(() => upstreamIdle(targets, api) && targets.every((x) => x.running.openConnections() === 0), 5000))) p.push(`the proxy kept connections or upstream requests open after the client left (${drainState(targets, api)})`);
        return p;
      },
    };
  };
  const log = new VitalsLog(settings);
  let idleWarm = 0;
  const alive = async (): Promise<string[]> => [...(await Promise.all(targets.map((x) => readyz(x.running.adminUrl).then((p) => (p === "" ? [] : [`${x.name}: ${p}`]))))).flat(), ...(await failures(targets))];
  const check = async (p: { cases: number; seconds: number }): Promise<string[]> => {
    if (log.sample(p)) idleWarm = targets.reduce((n, x) => n + agentSockets(x.agent).idle, 0);
    return alive();
  };
  const outcome = await runFuzz(settings, make, { every: 100, check });
  moving = false;
  t.comment(summaryLine("proxy", settings, outcome));
  for (const f of outcome.findings) t.comment(formatFinding(settings, FILE, f));
  t.equal(outcome.findings.length, 0, "the fuzzer found nothing");
  t.ok(outcome.cases > 0, "cases ran");

  t.same(await alive(), [], "both proxies answer /readyz, and no handler threw");
  // Every client is gone: nothing may stay open on either side of the proxy.
  const drained = (): boolean => upstreamIdle(targets, api) && targets.every((x) => x.running.openConnections() === 0);
  const isDrained = await eventually(drained, 30_000);
  t.ok(isDrained, `sockets drain once every client is gone (${drainState(targets, api)})`);
  if (!isDrained) {
    for (const c of targets.flatMap((x) => x.running.describeConnections())) {
      const port = /^peer :(\d+)/.exec(c)?.[1];
      const sent = port === undefined ? undefined : casesByPort.get(Number(port));
      t.comment(`left open: ${c}; sent by ${port === undefined ? "an unknown case" : sent === undefined ? "no case on record" : `case ${sent} (replay: SHARDCAR_FUZZ_SEED=${settings.seed} SHARDCAR_FUZZ_CASE=${sent} tap --disable-coverage test/proxy/serving/fuzz.test.ts)`}`);
    }
  }
  const after = log.final(outcome.cases);
  const idleAfter = targets.reduce((n, x) => n + agentSockets(x.agent).idle, 0);
  for (const line of log.lines()) t.comment(line);
  t.comment(`idle upstream connections ${idleWarm} -> ${idleAfter}`);
  const memory = log.judge(after, { ...BOUNDS, fds: FD_SLACK + 2 * Math.max(0, idleAfter - idleWarm) }, outcome.findings.length > 0 || settings.only !== undefined);
  if ("skipped" in memory) t.comment(memory.skipped);
  else t.same(memory.problems, [], `from warm to the end: RSS (from half-way in a long run) within +${BOUNDS.rssMiB} MiB, heap and external within +${BOUNDS.heapMiB} MiB, file descriptors flat`);
});
