/**
 * S3, the write path: what the stamping webhook (`/label-slots`) adds to the
 * latency of a write, through the real apiserver kit's real
 * MutatingAdmissionWebhook plugin (bench/lib/write-path-rig.ts), and
 * what writes do when the manager is slow.
 *
 * Writes are ConfigMaps of a labels-mode ring keyed by `owner` (a
 * controller reference on each): the webhook computes and patches the slot
 * label on every CREATE, and on every UPDATE the shipped matchConditions
 * send it, here a full `PUT` that drops the label (a controller that
 * rebuilt its object), which the webhook restores. Open loop
 * (bench/children/loadgen.ts: requests leave on schedule whatever the
 * answers do, so a webhook that falls behind shows as queueing) at 50, 200
 * and 1,000 creates/s; each round creates `rate × duration` ConfigMaps, then
 * PUTs each of them at the same rate, then deletes them (not timed).
 *
 * The baseline is the same writes with the webhook configuration absent, in
 * the same run: rounds alternate (with, without; then without, with), the
 * configuration created or deleted between them, and the better round of
 * each kept, as P1 does. Added latency = with − without, per percentile.
 *
 * One and three manager replicas (`shardcar manager` processes) behind a
 * loopback TCP balancer that gives each new connection to the next replica
 * (kube-proxy's connection-level balancing; bench/lib/tcp-balancer.ts).
 *
 * The slow manager: the balancer holds every byte from the managers for 5 s,
 * so the apiserver's call times out after the webhook's `timeoutSeconds`
 * (3 s); under `failurePolicy: Ignore` each write must be admitted, after
 * about 3 s, unlabelled, and the labeller must label it. That probe runs
 * first, while the labeller's token bucket is full.
 *
 * The labeller runs at `--label-rate 1`: it labels what the baseline rounds
 * leave unlabelled, and at 1/s its PATCHes are a rounding error beside the
 * rounds' writes (at the default 20/s they would load the baseline alone).
 *
 * Targets (issue 25): at 200 creates/s, p99 added ≤ 5 ms on CREATE and on
 * UPDATE; no write refused, at any rate, nor while the manager is slow.
 *
 * Usage: node bench/macro/s3-write-path.ts [--quick]
 *   S3_RATES ("50,200,1000"), S3_REPLICAS ("1,3"), S3_DURATION_MS (per rate
 *   otherwise), S3_ROUNDS (2) override the sizes.
 */
import type { Bench, BenchResult } from "../lib/bench.ts";
import { s3ManagerCpu } from "../lib/gates.ts";
import type { RateResult } from "../children/loadgen.ts";
import { callRealApi as call } from "../lib/realapi.ts";
import { ask, forkTs, stopAll, type Child } from "../lib/proc.ts";
import { configMapBody, configMapUrl, LABEL, WritePathRig } from "../lib/write-path-rig.ts";

const TARGET_RATE = 200;
const TARGET_ADDED_P99_MS = 5;
/** The webhook's timeoutSeconds (manifests/components/label-slots/webhook.yaml). */
const TIMEOUT_MS = 3000;
/** How long the slow manager takes to answer: beyond the timeout. */
const STALL_MS = 5000;
const LABEL_RATE = 1;

type Mode = "webhook" | "baseline";

const envList = (name: string, dflt: readonly number[]): number[] => {
  const v = process.env[name];
  return v === undefined || v === "" ? [...dflt] : v.split(",").map(Number);
};
const envInt = (name: string, dflt: number): number => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : dflt;
};
const r3 = (n: number): number => Math.round(n * 1000) / 1000;

/** Long enough for a p99 of a few thousand writes; 1,000/s needs fewer seconds for as many. */
function durationFor(rate: number, quick: boolean): number {
  if (quick) return envInt("S3_DURATION_MS", 7000);
  return envInt("S3_DURATION_MS", rate <= 50 ? 20_000 : rate <= 200 ? 15_000 : 10_000);
}

interface Round {
  readonly create: RateResult;
  readonly update: RateResult;
  /** CPU ms per write (creates and updates) of each process over the round. */
  readonly cpuPerWrite: { readonly apiserver: number; readonly etcd: number; readonly managers: number; readonly balancer: number };
  /** Reviews each manager answered in the round. */
  readonly reviews: readonly number[];
  /** Connections the apiserver opened to the managers in the round (through the balancer): more than a few means a TLS handshake per call. */
  readonly connections: number;
}

/** One round: creates, then updates of the same objects, at `rate`; then the objects are deleted. */
async function runRound(rig: WritePathRig, gen: Child, mode: Mode, rate: number, durationMs: number, warmupMs: number, name: string): Promise<Round> {
  await rig.setWebhook(mode === "webhook");
  const base = { type: "rate", rate, durationMs, warmupMs, token: rig.api.token, ca: rig.api.caPem };
  const timeout = warmupMs + durationMs + 60_000;
  const cpu0 = rig.cpu();
  const rev0 = await rig.reviews();
  rig.balancer.resetStats();
  const create = await ask<RateResult>(gen, { ...base, url: configMapUrl(rig.api), method: "POST", body: configMapBody(name) }, "result", timeout);
  // The same objects (indices 0…), rebuilt without their slot label: the matchConditions send it.
  const update = await ask<RateResult>(gen, { ...base, url: configMapUrl(rig.api, `${name}-{i}`), method: "PUT", body: configMapBody(name) }, "result", timeout);
  const cpu1 = rig.cpu();
  const rev1 = await rig.reviews();
  await rig.deleteRound(name);
  const writes = Math.max(1, create.sent + update.sent);
  const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);
  return {
    create,
    update,
    cpuPerWrite: {
      apiserver: (cpu1.apiserver - cpu0.apiserver) / writes,
      etcd: (cpu1.etcd - cpu0.etcd) / writes,
      managers: (sum(cpu1.managers) - sum(cpu0.managers)) / writes,
      balancer: (cpu1.bench - cpu0.bench) / writes,
    },
    reviews: rev1.map((r, i) => (r["total"] ?? 0) - (rev0[i]?.["total"] ?? 0)),
    connections: Object.values(rig.balancer.stats().connections).reduce((a, b) => a + b, 0),
  };
}

const score = (r: RateResult): number => r.p50 + r.p99;

/** Results for one (replicas, rate): added latency per op and percentile, and the refused writes. */
function rateResults(replicas: number, rate: number, rounds: Record<Mode, Round[]>, quick: boolean): BenchResult[] {
  const out: BenchResult[] = [];
  const all = (m: Mode): Round[] => rounds[m];
  for (const op of ["create", "update"] as const) {
    const best = (m: Mode): RateResult => all(m).map((r) => r[op]).reduce((a, b) => (score(b) < score(a) ? b : a));
    const w = best("webhook");
    const b = best("baseline");
    for (const q of ["p50", "p99"] as const) {
      const added = w[q] - b[q];
      const judged = rate === TARGET_RATE && q === "p99" && !quick;
      out.push({
        id: "S3",
        name: `${op.toUpperCase()} at ${rate}/s, ${replicas} manager replica${replicas === 1 ? "" : "s"}: ${q} latency`,
        candidate: { label: "with the stamping webhook", value: r3(w[q]), unit: "ms" },
        baseline: { label: "webhook configuration absent", value: r3(b[q]), unit: "ms" },
        ratio: b[q] / w[q],
        extra: {
          metric: "latency",
          op,
          rate,
          replicas,
          percentile: q,
          addedMs: r3(added),
          ...(judged ? { targetMaxAddedMs: TARGET_ADDED_P99_MS } : {}),
          achievedRps: Math.round(w.achievedRps),
          achievedRpsBaseline: Math.round(b.achievedRps),
          writes: w.recorded,
          maxMs: r3(w.max),
          maxMsBaseline: r3(b.max),
        },
      });
    }
  }
  const refused = (m: Mode): number => all(m).reduce((n, r) => n + r.create.errors + r.update.errors, 0);
  const statuses = (m: Mode): string => {
    const acc: Record<string, number> = {};
    for (const r of all(m)) for (const res of [r.create, r.update]) for (const [k, v] of Object.entries(res.statuses)) acc[k] = (acc[k] ?? 0) + v;
    return Object.entries(acc)
      .map(([k, v]) => `${k}×${v}`)
      .join(" ");
  };
  const mean = (xs: readonly number[]): number => xs.reduce((a, x) => a + x, 0) / Math.max(1, xs.length);
  const reviews = all("webhook").reduce<number[]>((acc, r) => r.reviews.map((n, i) => n + (acc[i] ?? 0)), []);
  const writes = all("webhook").reduce((n, r) => n + r.create.sent + r.update.sent, 0);
  const cpu = (m: Mode, k: keyof Round["cpuPerWrite"]): number => r3(mean(all(m).map((r) => r.cpuPerWrite[k])));
  out.push({
    id: "S3",
    name: `writes refused at ${rate}/s, ${replicas} manager replica${replicas === 1 ? "" : "s"}`,
    candidate: { label: "with the stamping webhook", value: refused("webhook"), unit: "writes" },
    baseline: { label: "webhook configuration absent", value: refused("baseline"), unit: "writes" },
    ratio: (refused("baseline") + 1) / (refused("webhook") + 1),
    extra: {
      metric: "refused",
      rate,
      replicas,
      targetMax: 0,
      statuses: statuses("webhook"),
      statusesBaseline: statuses("baseline"),
      // Every write sent reached a manager (CREATE, and an UPDATE that drops the label).
      reviewsPerWrite: r3(reviews.reduce((a, b) => a + b, 0) / Math.max(1, writes)),
      reviewsByReplica: reviews.join("/"),
      webhookConnections: all("webhook").reduce((n, r) => n + r.connections, 0),
      managerCpuMsPerWrite: cpu("webhook", "managers"),
      apiserverCpuMsPerWrite: cpu("webhook", "apiserver"),
      apiserverCpuMsPerWriteBaseline: cpu("baseline", "apiserver"),
      etcdCpuMsPerWrite: cpu("webhook", "etcd"),
      balancerCpuMsPerWrite: cpu("webhook", "balancer"),
    },
  });
  // The quick (CI) run cannot judge milliseconds on a shared 2-core machine
  // (P1's lesson); it judges the manager's CPU per write against the
  // apiserver's for the same write without the webhook, read from /proc in
  // the same rounds. A webhook that gets costlier (a parse per patch, a
  // ring lookup per review) moves this ratio; the machine's load does not.
  // The bound: S3_QUICK_CPU_RATIO (lib/gates.ts), less 25%.
  out.push(s3ManagerCpu(rate, replicas, cpu("webhook", "managers"), cpu("baseline", "apiserver"), quick && rate === TARGET_RATE));
  return out;
}

interface ProbeWrite {
  readonly ms: number;
  readonly status: number;
  readonly labelled: boolean;
}

/**
 * The slow manager: `count` CREATEs, then a PUT of each that drops the
 * label, spaced `spacingMs` apart, while every byte from the managers is
 * held for {@link STALL_MS}; then the wait for the labeller to label them all.
 */
async function slowManagerProbe(rig: WritePathRig, count: number, spacingMs: number): Promise<BenchResult[]> {
  await rig.setWebhook(true);
  rig.balancer.stall(STALL_MS);
  const name = "slow";
  const body = (i: number): unknown => JSON.parse(configMapBody(name).replaceAll("{i}", String(i)));
  const path = (i = -1): string => new URL(configMapUrl(rig.api, i < 0 ? "" : `${name}-${i}`)).pathname;
  const write = async (method: string, i: number): Promise<ProbeWrite> => {
    const t0 = performance.now();
    const r = await call(rig.api, method, path(method === "POST" ? -1 : i), body(i));
    return { ms: performance.now() - t0, status: r.status, labelled: r.body.includes(LABEL) };
  };
  const spaced = async (method: string): Promise<ProbeWrite[]> =>
    Promise.all(Array.from({ length: count }, (_, i) => new Promise<void>((r) => setTimeout(r, i * spacingMs)).then(() => write(method, i))));
  let creates: ProbeWrite[];
  let updates: ProbeWrite[];
  try {
    creates = await spaced("POST");
    updates = await spaced("PUT");
  } finally {
    rig.balancer.stall(0);
  }
  const done = performance.now();
  // The labeller labels what was admitted without its label.
  let labelledAfterMs = Number.NaN;
  for (const deadline = done + 120_000; performance.now() < deadline; ) {
    const slots = await Promise.all(Array.from({ length: count }, (_, i) => rig.slotOf(`${name}-${i}`)));
    if (slots.every((s) => s !== undefined)) {
      labelledAfterMs = performance.now() - done;
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  await rig.deleteRound(name);
  const results: BenchResult[] = [];
  for (const [op, ws] of [["create", creates], ["update", updates]] as const) {
    const ms = ws.map((w) => w.ms).sort((a, b) => a - b);
    const refused = ws.filter((w) => w.status < 200 || w.status > 299).length;
    results.push({
      id: "S3",
      name: `${op.toUpperCase()} while the manager answers after ${STALL_MS / 1000} s: latency (max)`,
      candidate: { label: "write, the webhook timing out", value: r3(ms[ms.length - 1] ?? Number.NaN), unit: "ms" },
      baseline: { label: "the webhook's timeoutSeconds", value: TIMEOUT_MS, unit: "ms" },
      ratio: TIMEOUT_MS / (ms[ms.length - 1] ?? Number.NaN),
      extra: {
        metric: "slow-manager",
        op,
        writes: ws.length,
        minMs: r3(ms[0] ?? Number.NaN),
        medianMs: r3(ms[Math.floor(ms.length / 2)] ?? Number.NaN),
        admittedUnlabelled: ws.filter((w) => w.status >= 200 && w.status <= 299 && !w.labelled).length,
        labelledAfterMs: Math.round(labelledAfterMs),
        labelRate: LABEL_RATE,
      },
    });
    results.push({
      id: "S3",
      name: `${op.toUpperCase()}s refused while the manager answers after ${STALL_MS / 1000} s`,
      candidate: { label: "refused (failurePolicy: Ignore)", value: refused, unit: "writes" },
      baseline: { label: "writes sent", value: ws.length, unit: "writes" },
      ratio: (ws.length - refused) / Math.max(1, ws.length),
      extra: { metric: "slow-manager-refused", op, targetMax: 0 },
    });
  }
  if (!Number.isFinite(labelledAfterMs)) throw new Error(`the labeller did not label the ${count} ConfigMaps written while the webhook timed out within 120 s`);
  return results;
}

export const bench: Bench = async ({ quick }) => {
  const rates = envList("S3_RATES", quick ? [TARGET_RATE] : [50, TARGET_RATE, 1000]);
  const replicaSets = envList("S3_REPLICAS", quick ? [1] : [1, 3]);
  const rounds = envInt("S3_ROUNDS", 2);
  const warmupMs = quick ? 1000 : 2000;
  const rig = await WritePathRig.start({ replicas: Math.max(...replicaSets), labelRate: LABEL_RATE });
  const gen = forkTs("loadgen", new URL("../children/loadgen.ts", import.meta.url), []);
  try {
    await ask(gen, { type: "" }, "ready", 20_000);
    rig.use(1);
    const results = await slowManagerProbe(rig, quick ? 5 : 10, 300);
    for (const replicas of replicaSets) {
      rig.use(replicas);
      for (const rate of rates) {
        const durationMs = durationFor(rate, quick);
        const got: Record<Mode, Round[]> = { webhook: [], baseline: [] };
        for (let r = 0; r < rounds; r++) {
          // Alternate which goes first, so drift on the machine hits both alike.
          const order: Mode[] = r % 2 === 0 ? ["webhook", "baseline"] : ["baseline", "webhook"];
          for (const mode of order) {
            rig.balancer.resetStats();
            got[mode].push(await runRound(rig, gen, mode, rate, durationMs, warmupMs, `r${replicas}-${rate}-${mode[0] ?? ""}${r}`));
          }
        }
        results.push(...rateResults(replicas, rate, got, quick));
      }
    }
    return results;
  } finally {
    gen.proc.send({ type: "exit" });
    await rig.stop().catch(() => {});
    await stopAll();
  }
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
