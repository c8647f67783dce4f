/**
 * P7, ring scale-out by one: M replicas in ring mode (each a real
 * `shardcar proxy --shards ring` process with a client-node informer
 * process behind it) under a real coordinator (`runCoordinator`, as
 * `shardcar manager` runs it), against a devapi process; then one more
 * replica joins. Measured from the new proxy's spawn until the ShardRing
 * has committed a table with every member, nothing is pending, every proxy
 * enforces its committed slots, and every controller's cache holds exactly
 * its slots:
 *
 * - full relists: LIST requests devapi served for pods during the
 *   scale-out, and which proxy sent them (target: 1, the new member's);
 * - convergence time, next to its bound in the same run: the member lease
 *   duration (the CLI's default, 15 s) plus one list — the time a
 *   controller takes to list every pod straight from devapi and start its
 *   watch (target: convergence ≤ bound, i.e. ratio bound/convergence ≥ 1).
 *
 * Usage: node bench/macro/p7-scale-out.ts [--quick]
 *   P7_PODS, P7_MEMBERS override the sizes.
 */
import { writeFileSync } from "node:fs";
import { get } from "node:https";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { runCoordinator } from "../../src/ring/coordinator.ts";
import { DEFAULT_MEMBER_TIMINGS } from "../../src/ring/member.ts";
import { RING_GROUP, RING_PLURAL, RING_VERSION } from "../../src/ring/names.ts";
import { parseSlots, type ShardRingStatusJson } from "../../src/ring/table.ts";
import { formatBound } from "../../src/shard/hash.ts";
import { HashMatcher, type Range } from "../../src/shard/range.ts";
import { slotsToRanges } from "../../src/shard/table.ts";
import type { Bench, BenchResult } from "../lib/bench.ts";
import { ask, CLI, forkTs, httpGet, start, stopAll, until, type Child } from "../lib/proc.ts";
import { benchTls, type BenchTls } from "../lib/tls.ts";

const CONTROLLER = fileURLToPath(new URL("../children/controller-child.ts", import.meta.url));
const DEVAPI = fileURLToPath(new URL("../children/scale-devapi.ts", import.meta.url));
const NS = "bench";
const RING = "bench";

interface Replica {
  readonly name: string;
  readonly proxy: Child;
  readonly admin: string;
  readonly controller: Child;
}

interface Debug {
  generation: number;
  ranges: Array<{ start: string; end: string }>;
  resources: { pods?: { lists: number; forcedRelists: number } };
}

function getJson<T>(url: string, ca: string): Promise<T | undefined> {
  return new Promise((resolve) => {
    const req = get(url, { ca, headers: { accept: "application/json", authorization: "Bearer bench-p7" }, timeout: 5000 }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (b: Buffer) => parts.push(b));
      res.on("end", () => {
        try {
          resolve(res.statusCode === 200 ? (JSON.parse(Buffer.concat(parts).toString("utf8")) as T) : undefined);
        } catch {
          resolve(undefined);
        }
      });
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(undefined));
  });
}

async function debugOf(r: Replica): Promise<Debug | undefined> {
  try {
    return JSON.parse((await httpGet(`${r.admin}/debug/shardcar`)).body) as Debug;
  } catch {
    return undefined;
  }
}

function writeKubeconfig(tls: BenchTls, server: string): string {
  const file = join(tls.dir, "kubeconfig.json");
  const kc = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "devapi", cluster: { server, "certificate-authority": tls.caFile } }],
    users: [{ name: "sidecar", user: { token: "bench-sidecar" } }],
    contexts: [{ name: "bench", context: { cluster: "devapi", user: "sidecar", namespace: NS } }],
    "current-context": "bench",
  };
  writeFileSync(file, JSON.stringify(kc));
  return file;
}

async function startReplica(name: string, kubeconfig: string, tls: BenchTls): Promise<Replica> {
  const proxy = start(`proxy-${name}`, process.execPath, [
    CLI,
    "proxy",
    "--kubeconfig",
    kubeconfig,
    "--resources",
    "pods",
    "--shards",
    "ring",
    "--ring",
    RING,
    "--pod-name",
    name,
    "--pod-namespace",
    NS,
    "--listen",
    "127.0.0.1:0",
    "--admin-listen",
    "127.0.0.1:0",
    "--tls-cert",
    tls.certFile,
    "--tls-key",
    tls.keyFile,
    "--log-level",
    "info",
  ]);
  const m = await proxy.waitLine(/"msg":"proxy ready"/, 60_000);
  const line = JSON.parse(m.input) as { url?: string; admin?: string };
  if (line.url === undefined || line.admin === undefined) throw new Error(`proxy ready line without url/admin: ${m.input}`);
  const controller = forkTs(`controller-${name}`, CONTROLLER, ["--server", line.url, "--ca", tls.caFile, "--token", `bench-${name}`], ["--expose-gc"]);
  await ask(controller, { type: "" }, "synced", 300_000);
  return { name, proxy, admin: line.admin, controller };
}

const rangeKey = (rs: ReadonlyArray<{ start: string; end: string }>): string => rs.map((r) => `${r.start}-${r.end}`).join(",");

/**
 * Undefined once the committed table holds exactly `replicas`, nothing is
 * pending, each proxy enforces its committed slots at the committed
 * generation, and each cache holds exactly the pods in those slots;
 * otherwise what is still missing (for the error when it never settles).
 */
async function unsettled(replicas: readonly Replica[], devapiUrl: string, ca: string, uids: readonly string[]): Promise<string | undefined> {
  const ring = await getJson<{ status?: Partial<ShardRingStatusJson> }>(`${devapiUrl}/apis/${RING_GROUP}/${RING_VERSION}/namespaces/${NS}/${RING_PLURAL}/${RING}`, ca);
  const st = ring?.status;
  if (st?.committed === undefined) return "no committed table";
  if (st.pending !== undefined) return `generation ${st.pending.generation} pending (${JSON.stringify(st.pending).slice(0, 300)})`;
  const committed = st.committed;
  const slotCount = st.slotCount ?? 256;
  const names = committed.members.map((m) => m.name).sort().join(",");
  if (names !== replicas.map((r) => r.name).sort().join(",")) return `committed generation ${committed.generation} has members [${names}]`;
  for (const r of replicas) {
    const entry = committed.members.find((m) => m.name === r.name);
    const slots = entry === undefined ? undefined : parseSlots(entry.slots, slotCount);
    if (slots === undefined || !slots.ok) return `${r.name}: no valid slots in the committed table`;
    const ranges: Range[] = slotsToRanges(slots.value, slotCount);
    const dbg = await debugOf(r);
    if (dbg === undefined) return `${r.name}: no /debug/shardcar`;
    if (dbg.generation !== committed.generation) return `${r.name}: proxy at generation ${dbg.generation}, committed ${committed.generation}`;
    if (rangeKey(dbg.ranges) !== rangeKey(ranges.map((x) => ({ start: formatBound(x.start), end: formatBound(x.end) })))) return `${r.name}: proxy enforces ${rangeKey(dbg.ranges)}, committed slots ${entry?.slots ?? ""}`;
    const matcher = new HashMatcher(ranges);
    const expected = uids.filter((u) => matcher.matchesString(u)).length;
    const got = await ask<{ objects: number; outOfRange: number }>(r.controller, { type: "exact", ranges: ranges.map((x) => [x.start.toString(), x.end.toString()]) }, "exact", 30_000);
    if (got.objects !== expected || got.outOfRange !== 0) return `${r.name}: cache holds ${got.objects} pods (${got.outOfRange} outside its slots), expected ${expected}`;
  }
  return undefined;
}

/** Waits until {@link unsettled} is satisfied; throws with the last reason after `timeoutMs`. */
async function settle(replicas: readonly Replica[], devapiUrl: string, ca: string, uids: readonly string[], timeoutMs: number): Promise<void> {
  let why: string | undefined = "not checked";
  const ok = await until(
    async () => {
      why = await unsettled(replicas, devapiUrl, ca, uids);
      return why === undefined;
    },
    timeoutMs,
    100,
  );
  if (!ok) {
    const logs = replicas.map((r) => `${r.name}:\n  ${r.proxy.lines.slice(-8).join("\n  ")}`).join("\n");
    throw new Error(`the ring did not settle with [${replicas.map((r) => r.name).join(", ")}] within ${timeoutMs / 1000} s: ${why}\n${logs}`);
  }
}

export const bench: Bench = async ({ quick }) => {
  const pods = Number(process.env["P7_PODS"] ?? (quick ? 1_000 : 10_000));
  const members = Number(process.env["P7_MEMBERS"] ?? (quick ? 2 : 3));
  const tls = await benchTls("p7");
  const devapi = forkTs("devapi", DEVAPI, ["--pods", String(pods), "--cert", tls.certFile, "--key", tls.keyFile]);
  const abort = new AbortController();
  let coordinator: Promise<void> | undefined;
  try {
    const ready = await ask<{ url: string }>(devapi, { type: "" }, "ready", 300_000);
    const { uids } = await ask<{ uids: string[] }>(devapi, { type: "inventory" }, "inventory", 60_000);
    const kubeconfig = writeKubeconfig(tls, ready.url);

    // One list, as a controller experiences it: list every pod straight from
    // devapi into an informer cache and open the watch.
    const direct = forkTs("controller-direct", CONTROLLER, ["--server", ready.url, "--ca", tls.caFile, "--token", "bench-direct"], ["--expose-gc"]);
    const oneList = (await ask<{ ms: number }>(direct, { type: "" }, "synced", 300_000)).ms;
    await direct.stop();

    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "devapi", server: ready.url, caData: Buffer.from(tls.caPem).toString("base64"), skipTLSVerify: false }],
      users: [{ name: "manager", token: "bench-manager" }],
      contexts: [{ name: "bench", cluster: "devapi", user: "manager" }],
      currentContext: "bench",
    });
    coordinator = runCoordinator({ kubeConfig: kc, namespace: NS, ringNamespace: NS, identity: "bench-manager-0" }, abort.signal);

    const replicas: Replica[] = [];
    for (let i = 0; i < members; i++) replicas.push(await startReplica(`web-${i}`, kubeconfig, tls));
    await settle(replicas, ready.url, tls.caPem, uids, quick ? 60_000 : 120_000);

    const before = await ask<{ lists: number }>(devapi, { type: "stats" }, "stats", 10_000);
    const perBefore = await Promise.all(replicas.map((r) => debugOf(r)));
    const t0 = performance.now();
    const joiner = await startReplica(`web-${members}`, kubeconfig, tls);
    replicas.push(joiner);
    // A cache that is still wrong after this long stays wrong: nothing in
    // the protocol revisits it (see the error's reason).
    await settle(replicas, ready.url, tls.caPem, uids, quick ? 30_000 : 120_000);
    const convergenceMs = performance.now() - t0;
    // Late relists would still count: look again a moment later.
    await new Promise((r) => setTimeout(r, quick ? 1000 : 3000));
    const after = await ask<{ lists: number }>(devapi, { type: "stats" }, "stats", 10_000);
    const perAfter = await Promise.all(replicas.map((r) => debugOf(r)));
    const listsBy = replicas.map((r, i) => (perAfter[i]?.resources.pods?.lists ?? 0) - (perBefore[i]?.resources.pods?.lists ?? 0));
    const relistsOld = listsBy.slice(0, members).reduce((a, b) => a + b, 0);
    const listsNew = listsBy[members] ?? 0;
    const totalLists = after.lists - before.lists;
    const bound = DEFAULT_MEMBER_TIMINGS.leaseDurationSeconds * 1000 + oneList;

    const results: BenchResult[] = [
      {
        id: "P7",
        name: `ring scale-out ${members} → ${members + 1}: LIST requests for pods during the handoff`,
        candidate: { label: "LISTs devapi served", value: totalLists, unit: "lists" },
        baseline: { label: "static resharding (every replica restarts and relists)", value: members + 1, unit: "lists" },
        ratio: (members + 1) / Math.max(1, totalLists),
        extra: { targetMax: 1, listsByNewMember: listsNew, relistsByExistingMembers: relistsOld, perMember: listsBy.join(","), pods },
      },
      {
        id: "P7",
        name: `ring scale-out ${members} → ${members + 1}: convergence (spawn to every cache exact)`,
        candidate: { label: "convergence", value: Math.round(convergenceMs), unit: "ms" },
        baseline: { label: "lease duration + one list", value: Math.round(bound), unit: "ms" },
        ratio: bound / convergenceMs,
        target: 1,
        extra: { leaseDurationMs: DEFAULT_MEMBER_TIMINGS.leaseDurationSeconds * 1000, oneListMs: Math.round(oneList), pods },
      },
    ];
    return results;
  } finally {
    // Children first (a leaving member would wait for the coordinator), then
    // the coordinator, which releases its election Lease if devapi still answers.
    await stopAll();
    abort.abort();
    await Promise.race([coordinator, new Promise((r) => setTimeout(r, 5000))]);
    tls.remove();
  }
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
