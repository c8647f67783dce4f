/**
 * P5m for the kind of controller most clusters run: a client-go 0.36
 * informer (test/support/client-go/, client-go's own defaults: protobuf,
 * watch-list) against the real k8s.io/apiserver kit, which serves protobuf
 * (devapi does not), behind `shardcar proxy --shards i/N` processes (TLS on
 * both sides, the sidecar's runtime settings).
 *
 * For N = 1, 2, 4, 8 (quick: 2), gate on and off (the kit restarted on the
 * same data), each pod's peak RSS (controller VmHWM + proxy VmHWM) against
 * the same controller unsharded; at rest too (the controller after
 * runtime.GC + FreeOSMemory). 6,000 ConfigMaps of ~3.5 kB (quick: 1,500),
 * the example. Beside each row, the controller's own floor: the
 * same binary watching an empty namespace.
 *
 * And the break-even curve (gate on): for growing caches, the unsharded
 * controller's peak against the pod's at N = 2; the break-even size is
 * where the line through those points crosses "pod = unsharded" (target:
 * ≤ 100 MiB of unsharded peak RSS).
 *
 * Skipped (BenchSkipped, with the reason) when the Go toolchain or the kit
 * is missing; in quick mode also when the controller is not built yet (a
 * cold build takes minutes).
 *
 * Usage: node bench/macro/p5m-client-go.ts [--quick]
 *   P5MG_OBJECTS, P5MG_NS ("1,2,4,8"), P5MG_CURVE ("1000,2000,4000,8000,16000"), P5MG_BYTES override.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HashMatcher, shardRange } from "../../src/shard/range.ts";
import { buildClientGoController, cachedClientGoController, startClientGoController, writeKubeconfig, type ClientGoController } from "../../test/support/client-go-controller.ts";
import { BenchSkipped, type Bench, type BenchResult } from "../lib/bench.ts";
import { memoryNow, MemorySampler, procMemory, toMiB, type MemoryFigures } from "../lib/memory.ts";
import { breakEven, NO_MEMORY, podMemory, type PodFigures } from "../lib/pod-memory.ts";
import { sleep, stopAll, until } from "../lib/proc.ts";
import { startProxyProc, type ProxyProc } from "../lib/proxy-proc.ts";
import { configMapUids, seedConfigMaps, startRealApi, stopRealApi, type RealApi } from "../lib/realapi.ts";
import { benchTls, type BenchTls } from "../lib/tls.ts";

/** Data sizes (the cache's objects) in MB, 10^6 bytes; memory is in MiB (toMiB). */
const MB = 1e6;
const P5M_NS = "p5m";
const CURVE_NS = "p5m-curve";
const EMPTY_NS = "p5m-empty";

interface Setup {
  readonly api: RealApi;
  readonly tls: BenchTls;
  readonly binary: string;
  readonly dir: string;
}

interface Figures extends PodFigures {
  readonly exact: boolean;
  readonly objects: number;
}

const list = (v: string | undefined, dflt: string): number[] => (v === undefined || v === "" ? dflt : v).split(",").map(Number);
const r1 = (x: number): number => Math.round(x * 10) / 10;

/**
 * N controllers on `namespace`, each behind its own proxy (`sharded`) or
 * straight at the server; waits until each cache holds exactly its share of
 * `uids`, then reads every process's memory.
 */
async function replicas(s: Setup, namespace: string, n: number, sharded: boolean, uids: readonly string[]): Promise<Figures[]> {
  const proxies: ProxyProc[] = [];
  const controllers: ClientGoController[] = [];
  // Peaks of anonymous memory and PSS (VmHWM is RSS only), from each process's start.
  const proxySamplers: MemorySampler[] = [];
  const controllerSamplers: MemorySampler[] = [];
  try {
    for (let i = 0; i < n; i++) {
      let server = s.api.url;
      let caFile = s.api.caFile;
      if (sharded) {
        const p = await startProxyProc({ name: `proxy-${i}/${n}`, upstream: s.api.url, tls: s.tls, shards: `${i}/${n}`, resources: "configmaps", upstreamCaFile: s.api.caFile });
        proxies.push(p);
        proxySamplers.push(new MemorySampler(p.child.pid));
        server = p.url;
        caFile = s.tls.caFile;
      }
      const kubeconfig = writeKubeconfig(s.dir, server, caFile, s.api.token, `kubeconfig-${i}`);
      const c = await startClientGoController({ binary: s.binary, kubeconfig, resource: "configmaps", namespace });
      controllers.push(c);
      controllerSamplers.push(new MemorySampler(c.pid));
    }
    const wants = controllers.map((_, i) => {
      const m = sharded ? new HashMatcher([shardRange(i, n)]) : undefined;
      return new Set(uids.filter((u) => m === undefined || m.matchesString(u)));
    });
    const synced = await until(async () => (await Promise.all(controllers.map((c) => c.status()))).every((st, i) => st.synced && st.objects === wants[i]?.size), 300_000, 200);
    if (!synced) throw new Error(`${n} client-go controllers on ${namespace} did not sync within 300 s; stderr:\n${controllers.map((c) => c.stderr().slice(-2000)).join("\n")}`);
    await sleep(1000);
    const controllerPeaks = controllerSamplers.map((x) => x.stop());
    const proxyPeaks = proxySamplers.map((x) => x.stop());
    const out: Figures[] = [];
    for (let i = 0; i < n; i++) {
      const c = controllers[i] as ClientGoController;
      const p = proxies[i];
      const items = (await c.objects()).items;
      const want = wants[i] ?? new Set<string>();
      const controllerPeak = { ...(controllerPeaks[i] ?? NO_MEMORY), rss: procMemory(c.pid).hwm };
      await c.gc();
      out.push({
        controllerPeak,
        controllerRest: memoryNow(c.pid),
        proxyPeak: p === undefined ? NO_MEMORY : { ...(proxyPeaks[i] ?? NO_MEMORY), rss: procMemory(p.child.pid).hwm },
        proxyRest: p === undefined ? NO_MEMORY : memoryNow(p.child.pid),
        objects: items.length,
        exact: items.length === want.size && items.every((o) => want.has(o.uid)),
      });
    }
    return out;
  } finally {
    for (const x of [...controllerSamplers, ...proxySamplers]) x.stop();
    await Promise.all(controllers.map((c) => c.stop()));
    await Promise.all(proxies.map((p) => p.child.stop()));
  }
}

/** Each figure's largest over `xs`. */
function largest(xs: readonly MemoryFigures[]): MemoryFigures {
  return { rss: Math.max(...xs.map((x) => x.rss)), anon: Math.max(...xs.map((x) => x.anon)), pss: Math.max(...xs.map((x) => x.pss)) };
}

/** A pod's peak: the sum of its two processes' peaks, each figure. */
const podPeak = (f: PodFigures): MemoryFigures => ({ rss: f.controllerPeak.rss + f.proxyPeak.rss, anon: f.controllerPeak.anon + f.proxyPeak.anon, pss: f.controllerPeak.pss + f.proxyPeak.pss });

export const bench: Bench = async ({ quick }) => {
  const objects = list(process.env["P5MG_OBJECTS"], quick ? "1500" : "6000")[0] ?? 6000;
  const ns = list(process.env["P5MG_NS"], quick ? "2" : "1,2,4,8");
  const curve = list(process.env["P5MG_CURVE"], quick ? "500,3000" : "1000,2000,4000,8000,16000").sort((a, b) => a - b);
  const bytes = list(process.env["P5MG_BYTES"], "3500")[0] ?? 3500;
  const built = quick ? await cachedClientGoController() : await buildClientGoController();
  if (!built.ok) throw new BenchSkipped(`client-go controller: ${built.reason}`);
  const tls = await benchTls("p5m");
  const dir = mkdtempSync(join(tmpdir(), "shardcar-bench-p5m-"));
  let api = await startRealApi("on");
  try {
    const s = (): Setup => ({ api, tls, binary: built.binary, dir });
    await seedConfigMaps(api, P5M_NS, 0, objects, bytes);
    await seedConfigMaps(api, EMPTY_NS, 0, 0, bytes);
    const uids = await configMapUids(api, P5M_NS);
    const dataMB = r1((uids.length * bytes) / MB);
    const floor = (await replicas(s(), EMPTY_NS, 1, false, []))[0];
    const floorExtra = {
      controllerFloorPeakMiB: toMiB(floor?.controllerPeak.rss ?? 0),
      controllerFloorRestMiB: toMiB(floor?.controllerRest.rss ?? 0),
      controllerFloorPeakAnonMiB: toMiB(floor?.controllerPeak.anon ?? 0),
    };
    const unsharded = (await replicas(s(), P5M_NS, 1, false, uids))[0];
    if (unsharded === undefined) throw new Error("no unsharded figures");
    const base = { peak: unsharded.controllerPeak, rest: unsharded.controllerRest };
    const results: BenchResult[] = [];
    /** The sidecar's peaks at N = 2, gate on (the largest of the two proxies, each figure). */
    let sidecarPeakN2: MemoryFigures | undefined;
    /** The pods' peaks at N = 2, gate on (the largest pod, each figure). */
    let podPeakN2: MemoryFigures | undefined;
    const rows = async (gate: "on" | "off"): Promise<void> => {
      for (const n of ns) {
        const f = await replicas(s(), P5M_NS, n, true, uids);
        if (gate === "on" && n === 2) {
          sidecarPeakN2 = largest(f.map((x) => x.proxyPeak));
          podPeakN2 = largest(f.map(podPeak));
        }
        results.push(...podMemory("client-go", n, gate, f, base, { objects: uids.length, dataMB, exact: f.every((x) => x.exact) ? "yes" : "no", ...floorExtra }));
      }
    };
    await rows("on");

    // The break-even curve, gate on: one namespace grown step by step.
    const points: Array<{ readonly one: MemoryFigures; readonly pod: MemoryFigures }> = [];
    let seeded = 0;
    for (const size of curve) {
      await seedConfigMaps(api, CURVE_NS, seeded, size, bytes);
      seeded = size;
      const cu = await configMapUids(api, CURVE_NS);
      const one = (await replicas(s(), CURVE_NS, 1, false, cu))[0];
      const two = await replicas(s(), CURVE_NS, 2, true, cu);
      if (one === undefined) continue;
      const pod = largest(two.map(podPeak));
      points.push({ one: one.controllerPeak, pod });
      const pointExtra = { objects: size, dataMB: r1((size * bytes) / MB), exact: two.every((x) => x.exact) ? "yes" : "no", ...floorExtra };
      results.push(
        {
          id: "P5m",
          name: `break-even curve: client-go pod at N=2 vs unsharded, ${size} configmaps`,
          candidate: { label: "pod at N=2 (controller + proxy peak RSS)", value: toMiB(pod.rss), unit: "MiB" },
          baseline: { label: "unsharded controller peak RSS", value: toMiB(one.controllerPeak.rss), unit: "MiB" },
          ratio: one.controllerPeak.rss / pod.rss,
          extra: { metric: "break-even-point", ...pointExtra },
        },
        {
          id: "P5m",
          name: `break-even curve (anonymous memory): client-go pod at N=2 vs unsharded, ${size} configmaps`,
          candidate: { label: "pod at N=2 (controller + proxy peak anonymous memory)", value: toMiB(pod.anon), unit: "MiB" },
          baseline: { label: "unsharded controller peak anonymous memory", value: toMiB(one.controllerPeak.anon), unit: "MiB" },
          ratio: one.controllerPeak.anon / pod.anon,
          extra: { metric: "break-even-point-anon", unshardedRssMiB: toMiB(one.controllerPeak.rss), ...pointExtra },
        },
      );
    }
    if (podPeakN2 !== undefined) points.push({ one: unsharded.controllerPeak, pod: podPeakN2 });
    for (const key of ["rss", "anon"] as const) {
      const be = breakEven(key, points, quick, floor?.controllerPeak, sidecarPeakN2, floorExtra);
      if (be !== undefined) results.push(be);
    }

    // Gate off: the same data, the server ignoring the selector.
    await stopRealApi(api, false);
    api = await startRealApi("off", api.runDir);
    await rows("off");
    return results;
  } finally {
    await stopAll();
    await stopRealApi(api, true).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    tls.remove();
  }
};

if (import.meta.main) {
  const results = await bench({ quick: process.argv.includes("--quick") });
  console.log(JSON.stringify(results, null, 2));
}
