/**
 * The client-go informer controller (test/support/client-go/main.go) as a
 * child process: built once by {@link buildGoProgram}, started with a
 * kubeconfig or the in-cluster environment, read through its loopback
 * status endpoint. Shared by the benchmarks (P5m) and the in-pod tests.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { buildGoProgram, cachedGoProgram, type GoBuild } from "./go-build.ts";

const SOURCES = fileURLToPath(new URL("./client-go/", import.meta.url));

/** Builds (or finds cached) the controller binary; `ok: false` says why not (callers skip). */
export function buildClientGoController(env: NodeJS.ProcessEnv = process.env): Promise<GoBuild> {
  return buildGoProgram("client-go-controller", SOURCES, env);
}

/** The controller binary if it is built already (no build: a cold one takes minutes); else why not. */
export function cachedClientGoController(env: NodeJS.ProcessEnv = process.env): Promise<GoBuild> {
  return cachedGoProgram("client-go-controller", SOURCES, env);
}

export interface ControllerStatus {
  readonly synced: boolean;
  readonly objects: number;
  readonly adds: number;
  readonly updates: number;
  readonly deletes: number;
  /** VmRSS and VmHWM of the controller, bytes. */
  readonly rss: number;
  readonly peakRss: number;
  readonly goHeap: number;
  readonly goSys: number;
}

export interface CachedObject {
  /** `namespace/name`, or `name` for a cluster-scoped object. */
  readonly key: string;
  readonly uid: string;
  readonly rv: string;
}

export interface ClientGoController {
  readonly proc: ChildProcess;
  readonly pid: number;
  /** The status endpoint, `http://127.0.0.1:PORT`. */
  readonly url: string;
  status(): Promise<ControllerStatus>;
  objects(): Promise<{ readonly synced: boolean; readonly items: readonly CachedObject[] }>;
  /** Forces a GC and returns memory to the OS, then the status ("at rest"). */
  gc(): Promise<ControllerStatus>;
  /** The controller's stderr so far (klog), for failure messages. */
  stderr(): string;
  /** SIGTERM, SIGKILL after 3 s. Idempotent. */
  stop(): Promise<void>;
}

export interface StartOptions {
  readonly binary: string;
  /** A kubeconfig file; without it, in-cluster config from `env`. */
  readonly kubeconfig?: string;
  /** `pods`, `configmaps`, or `GROUP/VERSION/RESOURCE`. Default pods. */
  readonly resource?: string;
  readonly namespace?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** How long to wait for the ready line. Default 30 s. */
  readonly readyTimeoutMs?: number;
}

export async function startClientGoController(opts: StartOptions): Promise<ClientGoController> {
  const args = ["--resource", opts.resource ?? "pods", ...(opts.kubeconfig === undefined ? [] : ["--kubeconfig", opts.kubeconfig]), ...(opts.namespace === undefined ? [] : ["--namespace", opts.namespace])];
  const proc = spawn(opts.binary, args, { stdio: ["ignore", "pipe", "pipe"], env: opts.env ?? process.env });
  let err = "";
  proc.stderr?.on("data", (b: Buffer) => {
    // Bounded: klog at -v=0 is quiet, but a crash loop must not grow this.
    if (err.length < 64 * 1024) err += b.toString("utf8");
  });
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  const stop = async (): Promise<void> => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill("SIGTERM");
    const timer = setTimeout(() => proc.kill("SIGKILL"), 3000);
    await exited;
    clearTimeout(timer);
  };
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`client-go controller: no ready line within ${opts.readyTimeoutMs ?? 30_000} ms; stderr:\n${err}`)), opts.readyTimeoutMs ?? 30_000);
    const lines = createInterface({ input: proc.stdout ?? process.stdin });
    lines.once("line", (line) => {
      clearTimeout(timer);
      try {
        resolve((JSON.parse(line) as { ready: string }).ready);
      } catch (e) {
        reject(new Error(`client-go controller: bad ready line ${JSON.stringify(line)}`, { cause: e }));
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`client-go controller exited (${proc.exitCode ?? proc.signalCode}) before it was ready; stderr:\n${err}`));
    });
  }).catch(async (e: unknown) => {
    await stop();
    throw e;
  });
  return {
    proc,
    pid: proc.pid ?? -1,
    url,
    status: () => call<ControllerStatus>(url, "GET", "/status"),
    objects: () => call(url, "GET", "/objects"),
    gc: () => call<ControllerStatus>(url, "POST", "/gc"),
    stderr: () => err,
    stop,
  };
}

function call<T>(base: string, method: string, path: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, base), { method, agent: false, timeout: 30_000 }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (b: Buffer) => parts.push(b));
      res.on("end", () => {
        const body = Buffer.concat(parts).toString("utf8");
        if (res.statusCode !== 200) reject(new Error(`${method} ${path}: HTTP ${res.statusCode ?? 0}: ${body}`));
        else resolve(JSON.parse(body) as T);
      });
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`${method} ${path}: timeout`)));
    req.on("error", reject);
    req.end();
  });
}

/** A kubeconfig for a controller: one cluster (server + CA file), one bearer token. Returns its path. */
export function writeKubeconfig(dir: string, server: string, caFile: string, token: string, name = "kubeconfig"): string {
  const file = join(dir, name);
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ${server}
    certificate-authority: ${caFile}
users:
- name: u
  user:
    token: ${token}
contexts:
- name: ctx
  context:
    cluster: c
    user: u
current-context: ctx
`,
    { mode: 0o600 },
  );
  return file;
}
