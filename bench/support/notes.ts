/**
 * The hand-written half of docs/performance.md: why a target is missed and
 * what will fix it, how a figure is measured when that is not obvious, and
 * the profiling log (before/after of each hot-path change). Kept next to the
 * benches so that a change to a measurement and to its explanation land
 * together. Figures quoted here come from the targeted measurements named
 * next to them (profiles, A/B runs), not from the tables, which every run
 * regenerates.
 */

export interface Notes {
  /** Under the summary table. */
  readonly summary: string;
  /** Under each target's section, by id. */
  readonly sections: Readonly<Record<string, string>>;
  /** Shown instead of figures when a target has none yet, by id. */
  readonly pending: Readonly<Record<string, string>>;
  /** The "Where the memory goes" section. */
  readonly memory: string;
  /** The "Profiling the hot paths" section. */
  readonly profile: string;
}

const summary = `**Reading the summary.** A status comes from the latest full run against the target itself (no tolerance). The quick run in CI uses the same benches on small inputs with a 25% tolerance, and judges the known misses below against a ratchet (today's level) so that it catches regressions without being red for a known gap (\`KNOWN_MISSES\` in bench/support/checks.ts).

**Misses and edges, causes and plans, in short:**
- **P7 full relists:** met since the synthetic-DELETE path landed (one LIST for a scale-out by one, the joiner's; P7 section).
- **P5m, client-go: missed, bounded by Node's own floor.** A client-go controller with 6,000 ConfigMaps peaks at 85 MB unsharded; its pod at N = 2 peaks at 145–153 MB, and the break-even is an unsharded controller of ~200 MB (target ≤ 100). Break-even is the controller's floor (34 MB) plus twice the sidecar's peak; a sidecar that costs nothing above a bare Node process with the same listeners (56 MB) would still break even only at ~146 MB. The target needs a sidecar of ≤ 33 MB, less than Node itself (43 MB with no listener). P5m section and "Where the memory goes".
- **P5m, client-node: met** (pod ÷ unsharded 0.84–0.86 at N = 2, 0.56–0.62 at N = 8; 1.25 and 0.85 before issue 14).
- **P6 ring mode: missed by 2 MB** (66.1 MB; static 63.5 MB met; both ready in ≤ 360 ms under a load average of 14). What ring mode adds over static shards is its TLS client, the member and its watch (P6 section).
- **P6b: met** (21.6–26.1 MB of growth for fast and slow clients, gate on and off; +46 to +48 MB before, "Where the memory goes").
- **P1 added p50 is near the target's edge:** met in the latest run, with http-proxy-3 on a quiet machine (+0.22 ms p50, +1.40 ms p99 at 1,000 req/s); missed by 0.01–0.02 ms in two earlier full runs the same day under load (+0.31, +0.32 ms), and by much more in one run on a noisy machine (+0.82 ms, while *direct* p99 also tripled). A hand-written forwarder (tried, reverted; see the profiling log) measured +0.37 ms in a run the same hour: on this shared 2-core VM the run-to-run noise is larger than the forwarder's gain. Plan in the P1 section.

**Can the quick run flap on a busy machine?** It must not: a CI gate that flaps trains everyone to ignore it. A quick P4 once read 0.92× (bound 3×) where the same build read 4.53× an hour earlier: each side had one 300 ms window, the candidate's first, and on a busy machine V8's compiler threads wait for a core too, so the window could end before the scanner's hot loop was optimised. Since then:
- every micro-bench ratio (P2–P4) comes from bench/support/compare.ts: candidate and baseline in alternating rounds (the order swapped each round), each side's figure its cheapest run in CPU time over all counted rounds, two warm-up rounds not counted, rounds continuing (up to 3×) while either side still gets faster by more than 2%; each run repeats the work to at least 10 ms of CPU. The per-round ratios are in the results (\`roundRatioMin/Median/Max\`);
- P1 and P6 have absolute wall-time targets, which a loaded machine misses whatever the build (at a load of 24 on 2 cores: a direct GET's p50 241 ms, a cold start 1.7 s). The full run judges them; the quick run judges the CPU time the serving process spends per GET (≤ 0.3 ms) and the CPU time a sidecar spends from spawn to ready (≤ 500 ms), read from /proc in the same rounds. A regression that adds waiting without CPU shows in the full run only.

Measured (2026-12-01, this VM, commit 7039982, three busy loops on top of the other engineers' jobs, load average 9–21): three quick runs in a row, all passing; JSON P3 4.60×, 4.83×, 4.29×; JSON P4 4.33×, 4.64×, 4.27×; protobuf P4 34.5×, 19.9×, 18.2×; P1 proxy CPU per GET 0.16, 0.20 ms; P6 CPU to ready 130–170 ms. **A real regression still fails it:** \`SHARDCAR_BENCH_SLOW_ITEM=60\` (bench/support/handicap.ts, test-only, read by the benches and by nothing under src/) gives the candidate filters a matcher that hashes every item's key 60 more times; under the same load the quick run exits 1 with JSON P3 2.42× and JSON P4 2.09× missed (bound 3×); protobuf P4 falls from ~20× to 5.77×, still above its bound: its margin over the target is about 5×.`;

const p1 = `**How it is measured.** Three processes besides the bench: devapi, a real \`shardcar proxy\` (\`--shards 0/1\`, so every sharded LIST is rewritten and scanned), and the load generator (bench/support/loadgen.ts), which sends at a fixed rate whatever the responses do (open loop; a latency runs from the moment a request was issued, so queueing shows up instead of lowering the rate). Each rate runs twice per path, alternating which goes first; the better round per path is kept. Plain HTTP on loopback: the figure is the proxy's own cost.

**Where the added latency comes from.** The proxy's CPU per request, measured with \`node bench/support/proxy-cost.ts before=… after=… bare\` (proxy user+system time from /proc at 500 req/s, 8 alternating rounds; min / median):

| | GET one pod | sharded LIST, 10 pods |
|---|---|---|
| shardcar with http-proxy-3 (as shipped) | 252 / 274 µs | 408 / 474 µs |
| shardcar with a hand-written forwarder (tried, reverted) | 212 / 254 µs | 340 / 388 µs |
| bare Node forwarder (\`http.request\` + pipe, bench/support/bare-forwarder.ts) | 176 / 228 µs | 192 / 242 µs |
| devapi serving the same request (for scale) | ≈ 40–75 µs | ≈ 60–125 µs |

An added p50 of ~0.3 ms is this CPU time plus one more loopback round trip. With the forwarder a GET cost within 10–20% of the floor for *any* Node proxy on this 2-core VM; the floor itself is Node's HTTP stack (one more request parse, one more \`ClientRequest\`, two more write syscalls: 28–30% of the proxy's profile samples are those two writes).

**Plan for P1.** (1) Done: http-proxy-3's per-request machinery replaced on the HTTP path (profiling section). (2) Next: undici's \`Pool\` as the upstream client instead of \`http.request\` + agent (its parser and request objects are leaner; to be measured with the same tool). (3) A small sharded LIST costs ~130 µs more than a GET: its stream pipeline (Transform + \`stream.pipeline\`, whose internal \`AbortController\` builds a \`DOMException\` on every finish: 2.7% of samples) and one extra write for the chunked terminator. Small lists could be filtered in one buffer and sent with a \`content-length\`.

**Saturation.** 5,000 req/s is at or beyond what one proxy process can serve on this machine (≈ 0.21 ms of CPU per GET, 0.34–0.39 ms per small sharded LIST, on two cores that also run devapi and the load generator): the sharded LIST always queues there, and the GET path queues or not depending on what else runs (p50 +12 ms in one full run, +410 ms in another). The closed-loop throughput ratio (reported, no target) is bounded the same way.`;

const p2p4 = `These figures come from the scanner benches (bench/micro/), candidate and baseline in one process on the same input. For the fast paths (P2), the filter and the byte pipe both hand over references to the input chunks, so their “MB/s” counts bytes handed over, not bytes touched; only the ratio is meaningful there.`;

const p5 = `**How it is measured.** Every replica is two processes — a \`shardcar proxy\` (\`--shards i/N\`, TLS to its controller) and a controller (bench/support/controller-child.ts: a \`@kubernetes/client-node\` pod informer, run with \`--expose-gc\`) — against a devapi process serving HTTPS. Bytes to a controller are response body bytes counted inside the controller (undici's \`undici:request:bodyChunkReceived\` channel), the same way with or without a proxy; *total* is what a controller without a proxy receives in the same run. Churn: a fixed, seeded set of merge patches after every cache synced; figures are taken once every cache holds the last version of every churned pod it owns, and each cache is checked to hold exactly its shard (“exact shard”). Wire bytes are recorded too (\`wireMaxMB\` in the JSON): devapi writes small TLS records, so its wire overhead is ~10% above a proxy's; counting wire bytes would flatter shardcar.

**Memory ∝ 1/N.** The controller's heap is a fixed floor (runtime, client-node, the informer: the fit's constant) plus its cache, which falls as 1/N. **What a replica costs in all** (controller RSS + proxy RSS, last table column, at rest) includes the proxy, whose peak in this run was 76–96 MB (180–240 MB before issue 14): a sharded pod costs less than the unsharded one from N = 2 on. The pod at its peak, against the target, is P5m's.

**Gate off.** Every proxy reads the whole list and every watch event, and the apiserver serializes everything N times: N × total in aggregate. That is the price of the fallback; the controllers' side is the same as with the gate on.`;

const p6 = `**How it is measured.** Three series, interleaved, each a cold start per sample, every process with the sidecar's runtime settings (src/sidecar-runtime.ts) as the image runs it: a bare \`node -e\` process with the sidecar's two listeners, TLS on loopback and plain HTTP for the probes (the baseline, the floor), a static-shard proxy (\`--shards 0/2 --server\`, plain-HTTP devapi, TLS to its controller as an injected sidecar serves: ready as soon as it listens), and a ring-mode proxy, the default, configured in-cluster as in a pod (\`KUBERNETES_SERVICE_HOST/PORT\` and a service-account directory; an HTTPS devapi that requires the sidecar's bearer token, a ShardRing in place). Ring mode is ready once its member Lease is held, so its start-to-ready includes reading the Lease and the ShardRing and creating the Lease over TLS; idle, it renews every 2 s and watches the ring. No coordinator runs, so the member holds no slots (an idle proxy has no cache to index). Start-to-ready was measured under a load average of 10–14 from other work on this 2-core machine; on a quiet machine it was 120–160 ms before and is no slower now.

**Issue 14, measured (idle static proxy, median of three, one session; "Where the memory goes" has the why of each step):**

| step | idle RSS |
|---|---|
| before (main at 3c74d88) | 74.5 MB |
| prom-client's classes from their own files, not its index (no OpenTelemetry) | 73.1 MB |
| \`node:http\`, \`node:fs\`, \`node:util\` by \`require\`, not an ES import (no undici) | 69.3 MB |
| \`--max-semi-space-size=1\`, \`MALLOC_ARENA_MAX=2\` | 66.8 MB |
| \`--invocation-count-for-turbofan=30000\` (no TurboFan at startup) | 61.9 MB |

These are plain-HTTP listeners; the bench's rows above serve TLS, which costs the bare process and the proxy alike (~8 MB: the bare process is 48 MB with one HTTP listener, 56 MB with the sidecar's two).

**Ring mode, 2.6 MB over static shards and 2.1 MB over the target.** What it adds: a TLS client to the apiserver (the static row's upstream is plain HTTP and idle), the ring member and its Lease renewals, one watch. Nothing in it holds data (the member's ranges are a few hundred bytes).

**Before issue 14 (static shards).** Importing \`@kubernetes/client-node\` and every CLI command at start made an idle \`shardcar proxy\` 145–150 MB and 0.6–1.3 s to ready; the CLI now imports a command's module only when it runs, and the proxy imports client-node only where it must. **Ring mode:** 139.8 MB and 810 ms, when the member's Lease and ShardRing calls went through client-node; now through shardcar's own client (\`src/kube/client.ts\`), and a kubeconfig is read by \`src/kube/config.ts\` (js-yaml, ~1 MB, only with \`--kubeconfig\`).`;

const p5m = `**How it is measured.** client-node: the P5 run itself (bench/macro/p5-scale.ts): each replica's controller and proxy, their VmHWM (the peak since the process started, as the kernel counts it) and their RSS at rest (the controller after two forced GCs). client-go: bench/macro/p5m-client-go.ts, the client-go 0.36 informer of test/support/client-go/ (client-go's defaults: protobuf, watch-list; GOGC untouched) against the real apiserver kit (\`../shared/realapi\`, which serves protobuf; devapi does not), 6,000 ConfigMaps of ~3.5 kB in one namespace, the issue's example; at rest is after \`runtime.GC\` + \`debug.FreeOSMemory\`. The kit is restarted with the gate off on the same data for the gate-off rows. Every proxy runs with the sidecar's runtime settings and serves TLS to its controller. A pod's peak is the sum of its two processes' peaks: what its memory limit must cover, whether or not they coincide. "floor" is the same controller binary watching an empty namespace.

**client-node meets the target.** Its cache is heavy (a 20,000-pod informer peaks at ~560 MB), so half of it pays for the sidecar many times over.

**client-go misses it, and Node's own floor is why.** At N = 2 a pod is the controller's floor plus half its cache plus the sidecar: pod(N = 2) ≈ F + (U − F)/2 + S, for a controller of unsharded peak U, floor F (34 MB here) and sidecar peak S. The pod costs less than the unsharded controller once U > F + 2S. The sidecar's peak in these runs was 76–107 MB (63 MB idle, ~10–17 MB the first requests cost whatever their size — code compiled and resident, allocator arenas —, the rest the lists); that puts break-even at ~200 MB, as measured. The target (≤ 100 MB) needs S ≤ 33 MB. A bare Node 24 process with the sidecar's listeners is 56 MB (S = 56 would give 146 MB), and Node with no listener at all 43 MB, of which 34 MB are the node binary's own code and data pages: no Node sidecar reaches 33 MB. How close this one came: 200 MB against that 146 MB floor, from ~230 MB before (the issue's estimate: a 32 MB floor and a 99 MB sidecar). The quick run (CI) cannot see that crossing: its curve is three caches of at most 3,000 ConfigMaps, whose line has a slope near 1 and crossed at 216 MB in one run and 482 MB in another under the same load. It judges F + 2S from its own floor and sidecar peak instead (190 MB in the run that gave 216), against the ratchet of 300 MB.

**Gate off, N = 8** is the costliest client-go sidecar (107 MB): each of the eight reads and filters the whole 21 MB protobuf list.`;

const p6b = `**How it is measured.** bench/macro/p6b-load.ts: four \`shardcar proxy\` processes at once (gate on and off, a fast client and a 2 MB/s one that pauses its socket whenever it is ahead), each owning half the keyspace, TLS on both sides, the sidecar's runtime settings. Each client LISTs 24,000 pods (98 MB unsharded; gate off the proxy reads all of it, gate on the server sends half), then WATCHes from the list's resourceVersion while devapi patches 200 pods a second for 5 minutes (60,000 events; ~120 MB to each client). RSS is sampled every 50 ms; growth is the peak over list and churn minus the same process idle.

**Before the runtime settings** (the same bench with \`P6B_RUNTIME=none\`: no NODE_OPTIONS or MALLOC_ARENA_MAX, the same hour): growth 31.9–41.8 MB (peaks 97–107 MB over an idle 64.7–65.0 MB), three of the four cases over the target; with them, 21.6–26.1 MB (peaks 84–89 MB). Before issue 14 (memory probe, gate off, 94 MB list through a \`--shards 0/4\` proxy): +46 MB with a fast reader and +48 MB with a 2 MB/s reader over a 73.5 MB idle process.

**What the growth is.** Not data held: the proxy's live heap mid-list is 0.9 MB over idle (heap snapshot), and what it takes from the server tracks what it writes to the client ("Where the memory goes"). About 10 MB is what the first requests cost whatever their size (compiled code and its pages, TLS client state, allocator arenas: a 3.8 MB list alone adds ~10 MB); the rest is garbage between collections and what glibc keeps of freed memory, which the semi-space and arena settings bound.`;

const memory = `Measured on real \`shardcar proxy\` processes with TLS on both sides (bench/support/memory-probe.ts: RSS and its anonymous/file split from /proc, the process's own \`process.memoryUsage()\` and V8 space sizes from its /debug/shardcar, /proc/<pid>/io for bytes read and written, heap snapshots by \`--heapsnapshot-signal\` summarised by bench/support/heap-summary.ts, \`--heap-prof\` allocation sampling), against devapi and the real apiserver kit, Node 24.21 on this 2-core VM under a load average of 8–18 from other work (memory figures move little with CPU load).

**The floor.** Node 24 with no listener: 42.7 MB RSS, of which 34.5 MB are file-backed (the node binary's code and data pages it touched) and 8.2 MB anonymous. With the sidecar's two listeners (TLS on loopback, plain HTTP for the probes): 56 MB (P6's baseline). An idle sidecar is 7–10 MB above that.

**Idle, where it went (issue 14's fixes, in order of size):**
- *TurboFan at startup, ~5 MB.* Module resolution's path loops cross TurboFan's default budget while the proxy starts (\`--trace-opt\`: \`normalizeString\` and a few others); compiling them touches ~5 MB of TurboFan's own code in the node binary (resident pages mapped to the compiler's symbols, read from /proc/<pid>/pagemap), for good. \`--invocation-count-for-turbofan=30000\` keeps startup on Ignition, Sparkplug and Maglev; under traffic the scanners' functions still reach TurboFan within the first tens of MB, and proxy CPU per request and per list did not change.
- *undici, ~4 MB in the sidecar (13 MB in a bare process).* An ES import of \`node:http\` (any form) makes Node build its ESM facade, which reads every export once, and \`http.WebSocket\`, \`CloseEvent\` and \`MessageEvent\` are lazy getters that load Node's bundled undici (a 760 kB source, compiled and run). \`node:fs\` (\`fs.promises\`) and \`node:util\` have the same trap, smaller. The sidecar's modules now \`require\` them (src/node-builtins.ts); test/cli/footprint.test.ts fails if undici is loaded again.
- *The young generation, ~2.5 MB.* V8 sized it at 8 MB before any traffic; \`--max-semi-space-size=1\`.
- *prom-client's index, ~1.5 MB.* It loads its default metrics and, through them, \`@opentelemetry/api\`; src/prom.ts loads the four classes shardcar uses from their own files (docs/dependencies.md). prom-client itself stays.
- What is left above the floor: pino 1.1 MB, http-proxy-3 0.4 MB, shardcar's scanners and proxy 1.3 MB, its CLI and run code 0.9 MB (each measured on top of a bare process with the same listeners), and ring mode's TLS client and member (2.6 MB).

**Under load, the issue's candidates:**
- *Upstream reads that outrun the client: no.* With a 2 MB/s reader, the proxy's bytes read (/proc rchar) stay four times its bytes written (a 1/4 shard, gate off) and its bytes written stay 3–4 MB ahead of what the client has read: the kernel's socket buffers. test/e2e/fault-slow-reader.test.ts (issue 12) measures what the proxy itself holds for a client that stops reading: 0.3–0.5 MiB.
- *http-proxy-3's buffering: no.* Sharded responses are piped by shardcar (\`selfHandleResponse\`); a heap snapshot mid-list holds 0.9 MB more than idle, none of it response data.
- *Socket and TLS buffers:* kernel queues (not the process's RSS) and one 64 kB NodeBIO buffer per TLS connection.
- *The delivered index:* ring mode only (synthetic deletes), 210–280 bytes per delivered object (2.8 MB for a 10,000-object shard), measured on \`Lineage\` directly.
- *Young-generation sizing, V8 not returning memory: yes, the largest part.* Before the settings, a gate-off 94 MB list took an idle 73.5 MB process to 119–122 MB: the young generation grew from 8 to 16 MB and stayed; \`external\`/\`arrayBuffers\` swung up to 25 MB between scavenges (dead chunk buffers: each TLS read is a fresh buffer, freed only when a scavenge finds its wrapper); the rest, 10–20 MB, was native memory glibc kept after the buffers were freed. A 1 MB semi-space scavenges sooner (–10 to –20 MB at the peak; 5–15% more proxy CPU per small request, none measurable per list: bench/support/proxy-cost.ts), two malloc arenas keep freed memory where the next allocation finds it.
- *prom-client's idle share:* 1.5 MB, above.
- *Anything that holds a whole list or event: nothing.* Sampled live allocations at exit after a 94 MB list (\`--heap-prof\`): 4.3 MB, all module code and sources; mid-list snapshot: +0.9 MB. One bounded hold exists by design: with \`--fallback fail\`, a list without shardInfo is held (up to 64 MiB, \`failBufferBytes\` in src/proxy/server.ts) until the proxy knows whether the server filtered it.`;

const p7 = `**How it is measured.** M replicas (real \`shardcar proxy --shards ring\` processes with a client-node informer each) under a real coordinator (\`runCoordinator\`, as \`shardcar manager\` runs it), then one more joins; the bench waits until the ShardRing's committed table holds every member with nothing pending, every proxy enforces its committed slots (its \`/debug/shardcar\`), and every cache holds exactly the pods in its slots. LISTs are counted at devapi and attributed per proxy (\`perMember\`: the joiner last).

**How one LIST is reached.** Two proxy mechanisms (docs/rings.md, "Narrowing without a relist"). (1) A member that only *loses* slots keeps its watches: the proxy sends synthetic DELETED events for the objects leaving its ranges, drawn from an index of what it delivered to the controller (taps on the filters' output), and goes on filtering the same stream with the narrower ranges. (2) The joiner's proxy holds its controller's first LIST until the ring gives it slots (\`--wait-for-ranges\`), so the controller does not list an empty shard first and relist a moment later.

**Before.** 4 LISTs for 3 → 4, one per member (2026-11-30 09:38 UTC, commit 712aa82): every member that lost slots had its watches ended with 410 and relisted although it already held everything it kept. With (1) alone, test/ring/proxy.test.ts still counted 2 LISTs per scale-out step: its joiner's informer started before the member had slots, listed an empty shard, and relisted when its slots came.

**Seen while building this bench, fixed since by the proxy's owner.** A member could narrow without its cache being relisted when the range change fell between an informer's LIST and the WATCH it resumes from it: the proxy ended only the watches open at that instant, and the resumed watch kept the wider list's objects for good (P7 then never settled). The proxy now answers a watch that resumes from a list served under older ranges with 410 (commit 99b248e).`;

const p8 = `**How it is measured.** P5's machinery (\`runConfig\` in bench/macro/p5-scale.ts: a \`shardcar proxy\` and a client-node controller process per replica, TLS on every hop, churn, figures once every cache caught up), against a devapi whose pods all carry \`shard.shardcar.io/bench\` set to the slot of their uid (256 slots, computed with src/shard/slots.ts, as the webhook writes it). Labels mode runs \`--filter labels --ring bench --shards i/N\` with the gate **off**; the row next to it is shardselector mode with the gate on; \`total\` is one controller without a proxy, measured once (it does not depend on N). A run fails when any cache does not hold exactly its shard.

**What it shows.** With the gate off, shardselector mode reads 1.0× of total per proxy (P5, "the price of fallback"); labels mode reads the same 1/N as shardselector mode with the gate on, because the apiserver applies the label selector \`shard.shardcar.io/bench in (…)\` on every version. The cost is on the write side: every object needs the label (the manager's webhook and backfill, docs/operations.md), and the proxy still scans every list item and watch event to check it (the filter path, P3/P4 speeds), since a label selector carries no \`shardInfo\` to vouch for a fast path.`;

const profile = `Tools: \`node bench/support/profile-proxy.ts [--path …]\` (a \`shardcar proxy\` process under \`--cpu-prof\` with closed-loop load; prints self and inclusive time by function), \`node bench/support/proxy-cost.ts before=<dist/cli/bin.js> after=<…> bare\` (proxy CPU per request, builds alternating). Before/after figures below are from those tools, each change in its own commit.

| change | what the profile showed | before → after (proxy CPU per request, min / median) | commit |
|---|---|---|---|
| HTTP requests forwarded by a 128-line forwarder instead of http-proxy-3 (upgrades kept on it). **Reverted**: http-proxy-3 is the stack the project chose for forwarding (design.md, data path §1), and the gain does not decide P1 (missed by 0.01–0.02 ms with and without it on the same day) | shardcar's own code (classify, rewrite, filter, metrics) under 5% of samples; http-proxy-3's generic passes (a URL rebuilt per request, five response passes, option closures) the largest part above Node's own HTTP cost | GET 252 / 274 → **212 / 254 µs**; sharded LIST 408 / 474 → **340 / 388 µs** (bare Node forwarder: 176 / 228 and 192 / 242) | f5af455, reverted |
| The CLI loads each command only when it runs; the proxy loads client-node, ring and injected-mode code only when it needs them | heap snapshots and import timing: client-node and the other commands were most of an idle sidecar's memory | idle RSS 145–150 MB → **73 MB**; start to ready 0.6–1.3 s → **0.12 s** | P6 section |
| Ring mode: the member's Lease and ShardRing calls and the kubeconfig without client-node (\`src/kube/\`) | import timing: client-node was +82 MB and ~650 ms of an idle ring-mode sidecar | ring-mode idle RSS 139.8 MB → **78.2 MB**; start to ready 810 ms → **160 ms** | P6 section |
| One key reader per encoding for every key (uid, namespace, owner, slot label; \`src/proxy/scan/object-key.ts\`), replacing the per-key paths. Not a speed-up: a check that the abstraction costs nothing | the first version called the protobuf reader for every ObjectMeta field: −10% on both protobuf filters; a bitmask of the fields the key reads removed the calls | quick scanner benches, the main branch against this one, alternating runs (MB/s, mean): JSON LIST 819 → 809, JSON WATCH 671 → 609 (one outlier run at 482; the other two equal), protobuf LIST 7,796 → 7,685, protobuf WATCH 1.58 → 1.54 M events/s; run-to-run spread about 5% | issue 13 |
| Issue 14: no undici (\`src/node-builtins.ts\`), no prom-client index (\`src/prom.ts\`), the sidecar's V8 and allocator settings (\`src/sidecar-runtime.ts\`) | /proc pagemap, heap snapshots, \`process.memoryUsage()\` and /proc io on the real proxy ("Where the memory goes") | idle RSS 74.5 → **61.9 MB** (plain HTTP; P6 with TLS: 63.5 MB); growth through a 100 MB list and 5 minutes of churn +46–48 → **+22–26 MB**; 5–15% more CPU per small request (the semi-space) | P6, P6b sections |

Candidates from the issue that the profiles ruled out, so nothing was changed:
- **Metrics label lookups:** a prom-client \`inc\` with a label object costs ~0.15 µs, the same as a pre-bound child; the proxy bumps ~7 per LIST and 1 per passed-through request (< 0.5% of a request). Counters are bumped once per response, never per item.
- **Buffer copies in the scanner, per-event allocations:** a proxy filtering 20,000 pods (gate off, N = 4) and 4,000 watch events at 1,000/s was 68% idle; the JSON scanner was 4.5% of samples, \`writev\` (TLS) 6%, GC 3.5%, and no copy or per-event allocation appeared among the top frames. The filters already push views of the input.
- **\`stream.pipeline\`'s \`DOMException\`** (2.7% of a small-LIST profile): Node's pipeline aborts an internal \`AbortController\` on every finish. Kept: one terminal path per stream is worth more than 10 µs.`;

export const NOTES: Notes = {
  summary,
  sections: { P1: p1, P2: p2p4, P3: p2p4, P4: p2p4, P5: p5, P5m: p5m, P6: p6, P6b: p6b, P7: p7, P8: p8 },
  pending: {
    P7: "Pending: the ring is not integrated with the proxy yet.",
  },
  memory,
  profile,
};
