/**
 * `shardcar proxy` as a child process, as the sidecar container runs it: its
 * own RSS, heap, file descriptors and sockets, a SIGKILL that really kills it,
 * and a restart on the same port, as the kubelet restarts a native sidecar
 * (the controller keeps the same address in its kubeconfig).
 *
 * The loopback listener serves TLS with a certificate made here (client-node
 * verifies it); the CLI is run through `proxy-child.ts`, which adds the heap
 * sample only the process itself can read. Everything else is read from /proc.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createLocalCa } from "../../src/pki/ca.ts";
import { LogLines } from "./log-lines.ts";

const CHILD = fileURLToPath(new URL("./proxy-child.ts", import.meta.url));

export interface ProxyProcessOptions {
  /** The apiserver (or a link in front of it), `http(s)://127.0.0.1:N`. */
  readonly upstream: string;
  /** PEM file the apiserver's certificate must chain to (https upstreams). */
  readonly upstreamCaFile?: string;
  /** `--resources`, e.g. `pods`. */
  readonly resources: string;
  /** `--shards`, e.g. `0/3` or a `shardRange(...)` selector; `ring` needs `args` with --ring and a kubeconfig. */
  readonly shards: string;
  /** More flags, appended as given. */
  readonly args?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  /** Name used in errors and in the temp dir. */
  readonly name?: string;
  /** Serve TLS on the loopback listener (default true; client-node needs it). False: plain HTTP, for raw-socket clients. */
  readonly tls?: boolean;
  /** Sample the heap after a full collection (runs the child with --expose-gc): live memory, for leak slopes. */
  readonly gcBeforeSample?: boolean;
}

export interface ProcessSample {
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
  readonly heapTotalBytes: number;
  /** Memory outside the V8 heap that V8 tracks (Buffers among it). */
  readonly externalBytes: number;
  /** ArrayBuffers and Buffers (part of external). */
  readonly arrayBuffersBytes: number;
  readonly fds: number;
  /** ESTABLISHED TCP connections from the process to the upstream port. */
  readonly upstreamConnections: number;
  /** Bytes the kernel holds for the process: received but not read yet, on its upstream connections. */
  readonly upstreamRxQueued: number;
  /** Bytes the kernel holds for the process: written but not yet delivered, on all its sockets. */
  readonly txQueued: number;
}

interface Started {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
}

export class ProxyProcess {
  readonly caPem: string;
  readonly #opts: ProxyProcessOptions;
  readonly #dir: string;
  #port = 0;
  #cur: Started | undefined;
  #output = "";
  /** Every log record the process(es) printed, judged as it arrives (stdout and stderr apart: their lines interleave). */
  readonly #logs: LogLines[] = [];
  readonly #upstreamPort: number;

  private constructor(opts: ProxyProcessOptions, caPem: string, dir: string) {
    this.#opts = opts;
    this.caPem = caPem;
    this.#dir = dir;
    const u = new URL(opts.upstream);
    this.#upstreamPort = Number(u.port || (u.protocol === "https:" ? 443 : 80));
  }

  /** Starts the proxy on a free loopback port; resolves once it listens. */
  static async start(opts: ProxyProcessOptions): Promise<ProxyProcess> {
    const now = new Date();
    const ca = await createLocalCa(`shardcar-test-${opts.name ?? "proxy"}`, now, 24 * 3600_000);
    const leaf = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1", "localhost"], now, validityMs: 24 * 3600_000 });
    const dir = mkdtempSync(join(tmpdir(), `shardcar-proxy-${opts.name ?? "p"}-`));
    writeFileSync(join(dir, "tls.crt"), leaf.cert);
    writeFileSync(join(dir, "tls.key"), leaf.key, { mode: 0o600 });
    const p = new ProxyProcess(opts, ca.certPem, dir);
    await p.#spawn();
    return p;
  }

  /** `https://127.0.0.1:N` (`http://` without TLS), the same across restarts. */
  get url(): string {
    return `${this.#opts.tls === false ? "http" : "https"}://127.0.0.1:${this.#port}`;
  }

  get port(): number {
    return this.#port;
  }

  get pid(): number | undefined {
    return this.#cur?.child.pid;
  }

  get running(): boolean {
    return this.#cur !== undefined && this.#cur.child.exitCode === null && this.#cur.child.signalCode === null;
  }

  /** Log records that repeat a key or do not parse, over every start of the process. */
  logProblems(): string[] {
    return this.#logs.flatMap((l) => l.problems());
  }

  /** Log records printed so far, over every start. */
  logRecords(): number {
    return this.#logs.reduce((n, l) => n + l.records, 0);
  }

  /** Everything the process(es) wrote, for failure messages (the last 20 kB). */
  output(): string {
    return this.#output.slice(-20_000);
  }

  /** Sends `signal` and waits for the process to exit. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    const cur = this.#cur;
    if (cur === undefined || !this.running) return;
    cur.child.kill(signal);
    await cur.exited;
  }

  /** Starts the proxy again on the same port (after {@link kill}, or a crash). */
  async restart(): Promise<void> {
    if (this.running) throw new Error("restart: the proxy is still running; kill it first");
    await this.#spawn();
  }

  /**
   * Graceful stop, as SIGTERM in a pod (ring mode leaves the ring first);
   * SIGKILL if it takes over 15 s. Idempotent. Then throws if any log record
   * the process printed repeated a key or did not parse: every suite that
   * runs proxy processes checks their logs (test/support/log-lines.ts).
   */
  async stop(): Promise<void> {
    const cur = this.#cur;
    if (cur !== undefined && this.running) {
      cur.child.send({ type: "stop" });
      const timer = setTimeout(() => cur.child.kill("SIGKILL"), 15_000);
      await cur.exited;
      clearTimeout(timer);
    }
    rmSync(this.#dir, { recursive: true, force: true });
    for (const l of this.#logs) l.end();
    const bad = this.logProblems();
    if (bad.length > 0) throw new Error(`proxy ${this.#opts.name ?? ""} printed ${bad.length} bad log record(s):\n${bad.slice(0, 5).join("\n")}`);
  }

  /** Writes a V8 heap snapshot of the running process to `file` (after a collection, with `gcBeforeSample`). */
  async heapSnapshot(file: string): Promise<string> {
    const cur = this.#cur;
    if (cur === undefined || !this.running) throw new Error("heapSnapshot: the proxy is not running");
    return new Promise<string>((resolve) => {
      const onMessage = (m: { type?: string; file?: string }): void => {
        if (m.type !== "heap-snapshot") return;
        cur.child.off("message", onMessage);
        resolve(m.file ?? file);
      };
      cur.child.on("message", onMessage);
      cur.child.send({ type: "heap-snapshot", file });
    });
  }

  /** RSS, heap, fds and upstream connections of the running process. */
  async sample(): Promise<ProcessSample> {
    const cur = this.#cur;
    const pid = cur?.child.pid;
    if (cur === undefined || pid === undefined || !this.running) throw new Error("sample: the proxy is not running");
    const memory = await new Promise<NodeJS.MemoryUsage>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("sample: no answer from the proxy process within 10 s")), 10_000);
      const onMessage = (m: { type?: string; memory?: NodeJS.MemoryUsage }): void => {
        if (m.type !== "sample" || m.memory === undefined) return;
        clearTimeout(timer);
        cur.child.off("message", onMessage);
        resolve(m.memory);
      };
      cur.child.on("message", onMessage);
      cur.child.send({ type: "sample", gc: this.#opts.gcBeforeSample === true });
    });
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? "0");
    return { rssBytes: rssKb * 1024, heapUsedBytes: memory.heapUsed, heapTotalBytes: memory.heapTotal, externalBytes: memory.external, arrayBuffersBytes: memory.arrayBuffers, ...socketsOf(pid, this.#upstreamPort) };
  }

  async #spawn(): Promise<void> {
    const o = this.#opts;
    const args = [
      "--resources",
      o.resources,
      "--shards",
      o.shards,
      "--server",
      o.upstream,
      ...(o.upstreamCaFile === undefined ? [] : ["--certificate-authority", o.upstreamCaFile]),
      "--listen",
      `127.0.0.1:${this.#port}`,
      "--admin-listen",
      "off",
      ...(o.tls === false ? [] : ["--tls-cert", join(this.#dir, "tls.crt"), "--tls-key", join(this.#dir, "tls.key")]),
      "--log-level",
      "warn",
      ...(o.args ?? []),
    ];
    const child = fork(CHILD, args, {
      env: o.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe", "ipc"],
      // Not the test runner's own flags (tap's --import hooks would load into
      // the sidecar and count in its RSS): the process runs as `node` would.
      execArgv: o.gcBeforeSample === true ? ["--expose-gc"] : [],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    this.#cur = { child, exited };
    let out = "";
    const listening = new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`proxy ${o.name ?? ""} did not listen within 30 s:\n${this.output()}`)), 30_000);
      for (const s of [child.stdout, child.stderr]) {
        const logs = new LogLines();
        this.#logs.push(logs);
        s?.on("data", (b: Buffer) => {
          logs.add(b);
          this.#output += b.toString();
          out += b.toString();
          const m = /shardcar proxy listening on https?:\/\/127\.0\.0\.1:(\d+)/.exec(out);
          if (m !== null) {
            clearTimeout(timer);
            resolve(Number(m[1]));
          }
        });
      }
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`proxy ${o.name ?? ""} exited (${code}) before listening:\n${this.output()}`));
      });
    });
    this.#port = await listening;
  }
}

/** Socket inodes of `pid` (from its fd table). */
function socketInodes(pid: number): { fds: number; inodes: Set<string> } {
  const inodes = new Set<string>();
  const fds = readdirSync(`/proc/${pid}/fd`);
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m !== null) inodes.add(m[1] ?? "");
    } catch {
      // closed between readdir and readlink
    }
  }
  return { fds: fds.length, inodes };
}

export interface TcpQueues {
  /** ESTABLISHED connections that matched. */
  readonly connections: number;
  /** Received by the kernel, not yet read by the process. */
  readonly rx: number;
  /** Written by the process, not yet delivered to the peer. */
  readonly tx: number;
}

/**
 * What the kernel holds queued on `pid`'s ESTABLISHED TCP sockets that match
 * (a local or remote port; none: all), from /proc/<pid>/net/tcp{,6}.
 */
export function tcpQueues(pid: number, match: { readonly localPort?: number; readonly remotePort?: number } = {}, inodes = socketInodes(pid).inodes): TcpQueues {
  const hex = (p: number | undefined): string | undefined => p?.toString(16).toUpperCase().padStart(4, "0");
  const local = hex(match.localPort);
  const remote = hex(match.remotePort);
  let connections = 0;
  let rx = 0;
  let tx = 0;
  for (const table of ["tcp", "tcp6"]) {
    let text = "";
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      // sl local rem st tx_queue:rx_queue tr:when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== "01" || !inodes.has(f[9] ?? "")) continue;
      if (local !== undefined && (f[1] ?? "").split(":")[1] !== local) continue;
      if (remote !== undefined && (f[2] ?? "").split(":")[1] !== remote) continue;
      const [t, r] = (f[4] ?? "0:0").split(":").map((h) => parseInt(h, 16));
      connections++;
      tx += t ?? 0;
      rx += r ?? 0;
    }
  }
  return { connections, rx, tx };
}

/** File descriptors of `pid`, its connections to `remotePort`, and the kernel's queues on them and on all its sockets. */
export function socketsOf(pid: number, remotePort: number): { fds: number; upstreamConnections: number; upstreamRxQueued: number; txQueued: number } {
  const { fds, inodes } = socketInodes(pid);
  const up = tcpQueues(pid, { remotePort }, inodes);
  return { fds, upstreamConnections: up.connections, upstreamRxQueued: up.rx, txQueued: tcpQueues(pid, {}, inodes).tx };
}
