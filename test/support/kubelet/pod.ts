/**
 * A kubelet for one pod: takes a Pod exactly as the apiserver stored it and
 * runs it on this machine as a kubelet and a container runtime would.
 *
 * - The sandbox (sandbox.ts) holds the pod's network namespace (the pod IP on
 *   its loopback) and the mount namespace its containers start from.
 * - Volumes (volumes.ts) are materialised first; secrets, configMaps and the
 *   projected service-account token come from the apiserver or the test.
 * - Init containers run in order. A native sidecar (`restartPolicy: Always`)
 *   is started and the next container waits until it is *started*: its
 *   startupProbe passed (probed as specified), or it is running when it has
 *   none. Then every app container starts.
 * - Each container gets its environment and command line as spec.ts derives
 *   them, its mounts and root as container.ts builds them, and runs as its
 *   user. Startup, liveness and readiness probes run as the kubelet runs
 *   them; a failed startup or liveness probe restarts the container. A
 *   container that exits is restarted per its restart policy, after a
 *   back-off (`restartBackoffMs`, doubling to 8×; the kubelet's is 10 s to
 *   5 min, which tests cannot wait for).
 * - `stop()` terminates app containers first, then sidecars in reverse order,
 *   each SIGTERM then SIGKILL after `graceMs`, as the kubelet orders them.
 *
 * Needs root (mount and network namespaces, bind mounts, setpriv) and
 * util-linux's `unshare`/`nsenter`; {@link kubeletUnavailable} says why not.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { appendFileSync, chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { V1Container, V1Pod, V1Probe } from "@kubernetes/client-node";
import { mountPlan, nodeFs, setprivArgs, setupScript } from "./container.ts";
import { NodePort, dialPod, serveEgress } from "./network.ts";
import { probeOnce, type ProbeTarget } from "./probe.ts";
import { UnsupportedError, commandLine, containerEnv, identity, probeTiming, resolveInRoot, type ImageSpec, type ObjectReader, type ProcessIdentity } from "./spec.ts";
import { materializeVolumes, type NodeVolume } from "./volumes.ts";

export { NodePort } from "./network.ts";
export type { ImageSpec } from "./spec.ts";

const SANDBOX = fileURLToPath(new URL("./sandbox.ts", import.meta.url));
const TOOLS = ["/usr/bin/unshare", "/usr/bin/nsenter", "/usr/bin/setpriv", "/usr/sbin/chroot", "/usr/sbin/ip", "/usr/bin/mount"];

/** Why this machine cannot run pods (a missing tool, not root), or undefined when it can. */
export function kubeletUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return "the one-pod kubelet needs root (mount and network namespaces, bind mounts)";
  const missing = TOOLS.filter((t) => !existsSync(t));
  if (missing.length > 0) return `the one-pod kubelet needs ${missing.join(", ")} (util-linux, coreutils, iproute2)`;
  const probe = spawnSync("/usr/bin/unshare", ["--mount", "--net", "--", "/bin/true"], { encoding: "utf8" });
  if (probe.status !== 0) return `unshare --mount --net fails here: ${(probe.stderr || probe.error?.message || "").trim()}`;
  return undefined;
}

export interface KubeletOptions {
  /** The image behind each image reference. */
  readonly images: (ref: string) => ImageSpec | undefined;
  /** The node-side 127.0.0.1 port of the apiserver; the pod reaches the `kubernetes` Service at 127.0.0.1:PORT. */
  readonly apiserverPort: number;
  /** ConfigMaps and Secrets for volumes and env, as the kubelet reads them from the apiserver. */
  readonly read: ObjectReader;
  /** The service-account token for the pod (what TokenRequest would return). */
  readonly token: string;
  readonly podIP?: string;
  readonly restartBackoffMs?: number;
  readonly graceMs?: number;
  /** How often secret and configMap volumes are re-read (the kubelet's sync). Default 1 s. */
  readonly volumeSyncMs?: number;
  /**
   * How long `runPod` waits for each init container (a kubelet waits
   * forever; a test must not). Default 120 s; then it fails with the timeline and logs.
   */
  readonly initTimeoutMs?: number;
}

export type ContainerKind = "init" | "sidecar" | "app";

export interface TimelineEvent {
  readonly at: number;
  readonly container: string;
  readonly event: "start" | "started" | "ready" | "unready" | "exit" | "probe-failed" | "kill" | "preStop" | "preStop-done";
  readonly detail?: string;
}

export interface ContainerState {
  readonly name: string;
  readonly kind: ContainerKind;
  readonly running: boolean;
  readonly started: boolean;
  readonly ready: boolean;
  readonly restarts: number;
  readonly pid: number | undefined;
  readonly lastExit: { readonly code: number | null; readonly signal: string | null } | undefined;
  /** Why the runner could not start it (an unsupported field, a missing image): the kubelet's Waiting reason. */
  readonly error: string | undefined;
}

export interface ExecResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

interface Instance {
  readonly proc: ChildProcess;
  readonly pid: number;
  readonly identity: ProcessIdentity;
  readonly env: ReadonlyMap<string, string>;
  readonly exited: Promise<void>;
  /** The runtime finished creating it: the process is in its root (exec and probes see the container). */
  created: boolean;
  started: boolean;
  ready: boolean;
  stopTimers: Array<() => void>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The container's process and anything it started (its process group: spawned detached). */
function signalGroup(inst: Instance, signal: NodeJS.Signals): void {
  try {
    process.kill(-inst.pid, signal);
  } catch {
    inst.proc.kill(signal);
  }
}

class ContainerSupervisor {
  readonly spec: V1Container;
  readonly kind: ContainerKind;
  restarts = 0;
  current: Instance | undefined;
  lastExit: ContainerState["lastExit"];
  stopping = false;
  error: string | undefined;
  readonly #pod: RunningPod;
  #firstStarted: () => void = () => {};
  readonly firstStarted: Promise<void>;
  #done: Promise<void> = Promise.resolve();
  #log = "";
  constructor(pod: RunningPod, spec: V1Container, kind: ContainerKind) {
    this.#pod = pod;
    this.spec = spec;
    this.kind = kind;
    this.firstStarted = new Promise((r) => (this.#firstStarted = r));
  }

  logs(): string {
    return this.#log;
  }

  #append(text: string): void {
    this.#log = (this.#log + text).slice(-256 * 1024);
    appendFileSync(join(this.#pod.dir, "logs", `${this.spec.name}.log`), text);
  }

  /** Runs until stopped (restarting per policy); for a plain init container, until it succeeded. Resolves with the last exit code. */
  run(): Promise<void> {
    this.#done = this.#loop().catch((e: unknown) => {
      this.error = e instanceof Error ? e.message : String(e);
      this.#pod.record(this.spec.name, "exit", `not started: ${this.error}`);
      throw e;
    });
    return this.#done;
  }

  async #loop(): Promise<void> {
    let backoff = this.#pod.options.restartBackoffMs ?? 1000;
    for (;;) {
      const inst = await this.#startInstance();
      await inst.exited;
      for (const stop of inst.stopTimers) stop();
      this.current = undefined;
      const code = inst.proc.exitCode;
      this.lastExit = { code, signal: inst.proc.signalCode };
      this.#pod.record(this.spec.name, "exit", `code ${code ?? "-"} signal ${inst.proc.signalCode ?? "-"}`);
      if (this.stopping) return;
      const policy = this.kind === "sidecar" ? "Always" : (this.#pod.spec.spec?.restartPolicy ?? "Always");
      if (this.kind === "init" && code === 0) return;
      if (policy === "Never" || (policy === "OnFailure" && code === 0)) return;
      this.restarts++;
      await sleep(backoff);
      backoff = Math.min(backoff * 2, (this.#pod.options.restartBackoffMs ?? 1000) * 8);
      if (this.stopping) return;
    }
  }

  async #startInstance(): Promise<Instance> {
    const pod = this.#pod;
    const c = this.spec;
    const image = pod.options.images(c.image ?? "");
    if (image === undefined) throw new UnsupportedError(`container ${c.name}: no image ${JSON.stringify(c.image)} on this node (ErrImagePull)`);
    const env = await containerEnv(pod.spec, c, image, {
      podIP: pod.podIP,
      hostIP: "127.0.0.1",
      kubernetes: { host: "127.0.0.1", port: pod.options.apiserverPort },
      read: pod.options.read,
    });
    const argv = commandLine(c, image, env);
    const id = identity(pod.spec, c, image);
    const root = join(pod.dir, "roots", c.name);
    mkdirSync(root, { recursive: true });
    const script = setupScript(root, pod.fs, mountPlan(c, image, pod.volumeMap, pod.fs), id, c.workingDir ?? image.workingDir);
    const proc = spawn(
      "/usr/bin/nsenter",
      [`--net=/proc/${pod.sandboxPid}/ns/net`, `--mount=/proc/${pod.sandboxPid}/ns/mnt`, "--", "/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, c.name, ...argv],
      { env: Object.fromEntries(env), stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
    proc.stdout.on("data", (b: Buffer) => this.#append(b.toString("utf8")));
    proc.stderr.on("data", (b: Buffer) => this.#append(b.toString("utf8")));
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    const inst: Instance = { proc, pid: proc.pid ?? -1, identity: id, env, exited, created: false, started: false, ready: false, stopTimers: [] };
    this.current = inst;
    // The runtime has created the container once its process is in the new
    // root; before that an exec or a probe would see the node's filesystem.
    let gone = false;
    void exited.then(() => (gone = true));
    for (const end = Date.now() + 30_000; !gone && Date.now() < end; await sleep(10)) {
      try {
        if (readlinkSync(`/proc/${inst.pid}/root`) === root) break;
      } catch {
        break;
      }
    }
    inst.created = !gone;
    pod.record(c.name, "start", argv.join(" "));
    this.#probe(inst);
    return inst;
  }

  #markStarted(inst: Instance): void {
    inst.started = true;
    this.#pod.record(this.spec.name, "started");
    this.#firstStarted();
    if (this.spec.readinessProbe === undefined) inst.ready = true;
  }

  /**
   * The kubelet starts one worker per probe with the container; liveness and
   * readiness workers tick from then on but probe only once the container
   * has started (so readiness follows a passed startupProbe within a period).
   */
  #probe(inst: Instance): void {
    if (this.kind === "init" || this.spec.startupProbe === undefined) this.#markStarted(inst);
    else this.#loopProbe(inst, "startup", this.spec.startupProbe);
    if (this.kind === "init") return;
    if (this.spec.livenessProbe !== undefined) this.#loopProbe(inst, "liveness", this.spec.livenessProbe);
    if (this.spec.readinessProbe !== undefined) this.#loopProbe(inst, "readiness", this.spec.readinessProbe);
  }

  /** The kubelet's worker for one probe of one container instance. */
  #loopProbe(inst: Instance, which: "startup" | "liveness" | "readiness", probe: V1Probe): void {
    const timing = probeTiming(probe);
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    inst.stopTimers.push(() => {
      stopped = true;
      clearTimeout(timer);
    });
    let successes = 0;
    let failures = 0;
    const target = this.#pod.probeTarget(inst);
    const tick = async (): Promise<void> => {
      if (stopped) return;
      if (which !== "startup" && !inst.started) {
        timer = setTimeout(() => void tick(), timing.periodMs);
        return;
      }
      const result = await probeOnce(this.spec, probe, target, timing.timeoutMs).catch((e: unknown) => ({ ok: false as const, reason: String(e) }));
      if (stopped) return;
      if (result.ok) {
        failures = 0;
        successes++;
        if (successes >= timing.successThreshold) {
          if (which === "startup") {
            this.#markStarted(inst);
            return;
          }
          if (which === "readiness" && !inst.ready) {
            inst.ready = true;
            this.#pod.record(this.spec.name, "ready");
          }
        }
      } else {
        successes = 0;
        failures++;
        this.#pod.record(this.spec.name, "probe-failed", `${which} ${failures}/${timing.failureThreshold}: ${result.reason}`);
        if (failures >= timing.failureThreshold) {
          if (which === "readiness") {
            if (inst.ready) this.#pod.record(this.spec.name, "unready");
            inst.ready = false;
          } else {
            // Startup or liveness exhausted: the kubelet kills the container and restarts it.
            void this.terminate(inst);
            return;
          }
        }
      }
      timer = setTimeout(() => void tick(), timing.periodMs);
    };
    timer = setTimeout(() => void tick(), timing.initialDelayMs);
  }

  /**
   * The container's preStop hook (httpGet or sleep), then SIGTERM, then
   * SIGKILL at the end of the grace period, which counts from before the
   * hook, as the kubelet counts it.
   */
  async terminate(inst = this.current): Promise<void> {
    if (inst === undefined || inst.proc.exitCode !== null || inst.proc.signalCode !== null) return;
    const graceMs = this.#pod.options.graceMs ?? 5000;
    const timer = setTimeout(() => signalGroup(inst, "SIGKILL"), graceMs);
    const hook = this.spec.lifecycle?.preStop;
    if (hook !== undefined) {
      this.#pod.record(this.spec.name, "preStop", hook.httpGet !== undefined ? `GET ${hook.httpGet.path ?? "/"}` : "sleep");
      const sleepSeconds = hook.sleep?.seconds;
      const ran = hook.httpGet !== undefined
        ? probeOnce(this.spec, { httpGet: hook.httpGet }, this.#pod.probeTarget(inst), graceMs).then((r) => (r.ok ? "ok" : r.reason))
        : sleepSeconds !== undefined
          ? new Promise<string>((resolve) => setTimeout(() => resolve("ok"), sleepSeconds * 1000))
          : Promise.reject(new UnsupportedError(`${this.spec.name}: a preStop other than httpGet or sleep`));
      // A hook that fails or outlasts the grace period does not hold the stop up.
      const result = await Promise.race([ran, inst.exited.then(() => "the container exited")]).catch((e: unknown) => String(e));
      this.#pod.record(this.spec.name, "preStop-done", result);
    }
    if (inst.proc.exitCode === null && inst.proc.signalCode === null) {
      this.#pod.record(this.spec.name, "kill", "SIGTERM");
      signalGroup(inst, "SIGTERM");
    }
    await inst.exited;
    clearTimeout(timer);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.terminate();
    await this.#done.catch(() => {});
  }

  state(): ContainerState {
    const inst = this.current;
    return {
      name: this.spec.name,
      kind: this.kind,
      running: inst?.created === true,
      started: inst?.started ?? false,
      ready: inst?.ready ?? false,
      restarts: this.restarts,
      pid: inst?.pid,
      lastExit: this.lastExit,
      error: this.error,
    };
  }
}

export class RunningPod {
  readonly spec: V1Pod;
  readonly options: KubeletOptions;
  readonly dir: string;
  readonly podIP: string;
  readonly fs = nodeFs();
  readonly timeline: TimelineEvent[] = [];
  volumeMap = new Map<string, NodeVolume>();
  sandboxPid = -1;
  #sandbox: ChildProcess | undefined;
  #token: string;
  readonly #egress: Server[] = [];
  readonly #forwards: NodePort[] = [];
  readonly #containers = new Map<string, ContainerSupervisor>();
  readonly #t0 = Date.now();
  #syncTimer: NodeJS.Timeout | undefined;
  #stopped: Promise<void> | undefined;

  constructor(spec: V1Pod, options: KubeletOptions) {
    this.spec = spec;
    this.options = options;
    this.podIP = options.podIP ?? "10.88.0.2";
    this.#token = options.token;
    this.dir = mkdtempSync(join(tmpdir(), "shardcar-pod-"));
    // The container users must traverse to their mount sources and roots.
    chmodSync(this.dir, 0o755);
    for (const d of ["net", "logs", "roots", "volumes"]) mkdirSync(join(this.dir, d), { mode: 0o755 });
  }

  record(container: string, event: TimelineEvent["event"], detail?: string): void {
    this.timeline.push({ at: Date.now() - this.#t0, container, event, ...(detail === undefined ? {} : { detail }) });
  }

  probeTarget(inst: Instance): ProbeTarget {
    return {
      podIP: this.podIP,
      dial: (host, port, timeoutMs) => dialPod(this.dir, host, port, timeoutMs),
      exec: (argv, timeoutMs) => this.#execIn(inst, argv, timeoutMs),
    };
  }

  async start(): Promise<void> {
    const volumes = await materializeVolumes(this.spec, {
      dir: this.dir,
      read: this.options.read,
      token: () => this.#token,
      podIP: this.podIP,
      hostIP: "127.0.0.1",
    });
    this.volumeMap = new Map(volumes.map((v) => [v.name, v]));
    this.#egress.push(await serveEgress(this.dir, this.options.apiserverPort));
    const config = join(this.dir, "sandbox.json");
    writeFileSync(
      config,
      JSON.stringify({
        dir: this.dir,
        podIP: this.podIP,
        egress: [this.options.apiserverPort],
        tmpfs: volumes.filter((v) => v.tmpfs !== undefined).map((v) => ({ path: v.path, size: v.tmpfs?.size })),
      }),
    );
    const sandbox = spawn("/usr/bin/unshare", ["--mount", "--net", "--propagation", "private", "--", "/usr/bin/setpriv", "--pdeathsig=SIGKILL", "--", process.execPath, SANDBOX, config], {
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    this.#sandbox = sandbox;
    this.sandboxPid = sandbox.pid ?? -1;
    let err = "";
    sandbox.stderr.on("data", (b: Buffer) => (err += b.toString("utf8")));
    await new Promise<void>((resolve, reject) => {
      const lines = createInterface({ input: sandbox.stdout });
      lines.once("line", () => resolve());
      sandbox.once("exit", (code) => reject(new Error(`pod sandbox exited (${code ?? "signal"}) before it was ready: ${err}`)));
    });
    const sync = (): void => {
      this.#syncTimer = setTimeout(() => {
        void this.refreshVolumes()
          .catch(() => {})
          .finally(() => {
            if (this.#stopped === undefined) sync();
          });
      }, this.options.volumeSyncMs ?? 1000);
    };
    sync();

    for (const c of this.spec.spec?.initContainers ?? []) {
      const sup = new ContainerSupervisor(this, c, c.restartPolicy === "Always" ? "sidecar" : "init");
      this.#containers.set(c.name, sup);
      const done = sup.run();
      const limit = this.options.initTimeoutMs ?? 120_000;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`init container ${c.name} did not ${sup.kind === "sidecar" ? "start" : "complete"} within ${limit} ms; timeline:\n${this.describe()}\nlogs:\n${sup.logs().slice(-4000)}`)), limit);
      });
      try {
        await Promise.race([sup.kind === "sidecar" ? sup.firstStarted : done, done, timeout]);
      } finally {
        clearTimeout(timer);
      }
      if (sup.kind === "init" && sup.lastExit?.code !== 0) throw new Error(`init container ${c.name} failed: ${JSON.stringify(sup.lastExit)}`);
      if (this.#stopped !== undefined) return;
    }
    for (const c of this.spec.spec?.containers ?? []) {
      const sup = new ContainerSupervisor(this, c, "app");
      this.#containers.set(c.name, sup);
      // Its failure to start is its state (error), as a Waiting container's.
      sup.run().catch(() => {});
    }
  }

  #sup(name: string): ContainerSupervisor {
    const s = this.#containers.get(name);
    if (s === undefined) throw new Error(`pod ${this.spec.metadata?.name ?? ""} has no started container ${JSON.stringify(name)}`);
    return s;
  }

  state(name: string): ContainerState {
    return this.#sup(name).state();
  }

  states(): ContainerState[] {
    return [...this.#containers.values()].map((s) => s.state());
  }

  logs(name: string): string {
    return this.#containers.get(name)?.logs() ?? "";
  }

  /** What a crash does: SIGKILL to the container's process; the kubelet restarts it per its policy. */
  crash(name: string): number {
    const inst = this.#sup(name).current;
    if (inst?.created !== true) throw new Error(`container ${name} is not running`);
    this.record(name, "kill", "SIGKILL (crash)");
    signalGroup(inst, "SIGKILL");
    return inst.pid;
  }

  /** `kubectl exec`: argv in the container's namespaces and root, as its user, with its environment. */
  exec(name: string, argv: readonly string[], timeoutMs = 10_000): Promise<ExecResult> {
    const inst = this.#sup(name).current;
    if (inst?.created !== true) return Promise.reject(new Error(`container ${name} is not running`));
    return this.#execIn(inst, argv, timeoutMs);
  }

  #execIn(inst: Instance, argv: readonly string[], timeoutMs: number): Promise<ExecResult> {
    return new Promise((resolve) => {
      const p = spawn("/usr/bin/nsenter", ["-t", String(inst.pid), "-m", "-n", "-r", "-w", "--", ...setprivArgs(inst.identity), "--", ...argv], {
        env: Object.fromEntries(inst.env),
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      p.stdout.on("data", (b: Buffer) => (stdout += b.toString("utf8")));
      p.stderr.on("data", (b: Buffer) => (stderr += b.toString("utf8")));
      const timer = setTimeout(() => p.kill("SIGKILL"), timeoutMs);
      p.once("close", (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
  }

  /** A file as the container sees it (read as root through /proc/PID/root). */
  readFile(name: string, path: string): string {
    const inst = this.#sup(name).current;
    if (inst?.created !== true) throw new Error(`container ${name} is not running`);
    // Absolute symlinks under /proc/PID/root resolve against our root, not
    // the container's, so resolve the path the container's way first.
    return readFileSync(`/proc/${inst.pid}/root${resolveInRoot(path, this.fs).path}`, "utf8");
  }

  /** `kubectl port-forward`: a node-side 127.0.0.1 port to `host:port` in the pod (default 127.0.0.1). */
  async forward(port: number, host = "127.0.0.1"): Promise<number> {
    const np = await NodePort.open();
    np.route(this.dir, host, port);
    this.#forwards.push(np);
    return np.port;
  }

  /** Routes a Service's node port to this pod's `port` on the pod IP (its endpoint). */
  serve(np: NodePort, port: number): void {
    np.route(this.dir, this.podIP, port);
  }

  /** The kubelet's TokenRequest returns a new token: projected volumes are rewritten. */
  async rotateToken(token: string): Promise<void> {
    this.#token = token;
    await this.refreshVolumes();
  }

  async refreshVolumes(): Promise<void> {
    for (const v of this.volumeMap.values()) await v.refresh();
  }

  /** The timeline, one event a line (for failure messages). */
  describe(): string {
    return this.timeline.map((e) => `  ${e.at} ms ${e.container} ${e.event} ${e.detail ?? ""}`).join("\n");
  }

  async waitFor(what: string, cond: () => boolean, timeoutMs: number): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (!cond()) {
      if (Date.now() > end) throw new Error(`pod ${this.spec.metadata?.name ?? ""}: timed out after ${timeoutMs} ms waiting until ${what}; timeline:\n${this.describe()}`);
      await sleep(50);
    }
  }

  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      clearTimeout(this.#syncTimer);
      const all = [...this.#containers.values()];
      await Promise.all(all.filter((s) => s.kind === "app").map((s) => s.stop()));
      for (const s of all.filter((s) => s.kind !== "app").reverse()) await s.stop();
      const sb = this.#sandbox;
      if (sb !== undefined && sb.exitCode === null && sb.signalCode === null) {
        const gone = new Promise((r) => sb.once("exit", r));
        sb.kill("SIGKILL");
        await gone;
      }
      for (const np of this.#forwards) await np.close();
      for (const s of this.#egress) await new Promise((r) => s.close(r));
      rmSync(this.dir, { recursive: true, force: true });
    })();
    return this.#stopped;
  }
}

/** Starts `pod` and resolves once its app containers were started (not necessarily ready). */
export async function runPod(pod: V1Pod, options: KubeletOptions): Promise<RunningPod> {
  const running = new RunningPod(pod, options);
  try {
    await running.start();
  } catch (e) {
    await running.stop();
    throw e;
  }
  return running;
}

