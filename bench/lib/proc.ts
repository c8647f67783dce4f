/**
 * Child processes for the macro benchmarks: every process a bench starts is
 * registered here and stopped by {@link stopAll} (and on exit), so a failed
 * or interrupted bench never leaves a proxy or devapi behind.
 *
 * Also: RSS from /proc, a free loopback port, small HTTP helpers and a
 * readiness poll, all bounded in time.
 */
import { readFileSync } from "node:fs";
import { fork, spawn, type ChildProcess } from "node:child_process";
import { request } from "node:http";
import { createServer } from "node:net";
import { setPriority } from "node:os";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { procMemory } from "./memory.ts";

const children = new Set<Child>();
let hooked = false;

function track(child: Child): void {
  children.add(child);
  child.proc.once("exit", () => children.delete(child));
  if (!hooked) {
    hooked = true;
    // Last resort: a bench that throws or is interrupted still ends its children.
    process.once("exit", () => {
      for (const c of children) c.proc.kill("SIGKILL");
    });
    for (const sig of ["SIGINT", "SIGTERM"] as const) {
      process.once(sig, () => {
        for (const c of children) c.proc.kill("SIGKILL");
        process.exit(130);
      });
    }
  }
}

/** A started child with its output split into lines. */
export class Child {
  readonly proc: ChildProcess;
  readonly name: string;
  readonly lines: string[] = [];
  readonly #waiters = new Set<{ re: RegExp; resolve: (m: RegExpExecArray) => void }>();
  readonly exited: Promise<number | null>;

  constructor(name: string, proc: ChildProcess) {
    this.name = name;
    this.proc = proc;
    this.exited = new Promise((resolve) => proc.once("exit", (code) => resolve(code)));
    for (const s of [proc.stdout, proc.stderr]) {
      if (s === null) continue;
      createInterface({ input: s }).on("line", (line) => {
        // Bounded: a chatty child must not grow the bench's memory.
        if (this.lines.length < 2000) this.lines.push(line);
        for (const w of this.#waiters) {
          const m = w.re.exec(line);
          if (m !== null) {
            this.#waiters.delete(w);
            w.resolve(m);
          }
        }
      });
    }
    track(this);
  }

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  /** Resolves with the first output line (already seen or future) matching `re`; rejects after `timeoutMs` or if the child exits first. */
  waitLine(re: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
    for (const l of this.lines) {
      const m = re.exec(l);
      if (m !== null) return Promise.resolve(m);
    }
    return new Promise((resolve, reject) => {
      const w = {
        re,
        resolve: (m: RegExpExecArray) => {
          clearTimeout(timer);
          resolve(m);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(w);
        reject(new Error(`${this.name}: no line matching ${re} within ${timeoutMs} ms; output:\n${this.lines.slice(-20).join("\n")}`));
      }, timeoutMs);
      this.#waiters.add(w);
      void this.exited.then((code) => {
        if (!this.#waiters.has(w)) return;
        this.#waiters.delete(w);
        clearTimeout(timer);
        reject(new Error(`${this.name} exited (${code}) before printing ${re}; output:\n${this.lines.slice(-20).join("\n")}`));
      });
    });
  }

  /** SIGTERM, then SIGKILL after `graceMs`. Resolves once the process is gone. Idempotent. */
  async stop(graceMs = 3000): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill("SIGTERM");
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Spawns a command (no IPC), output piped. */
export function start(name: string, cmd: string, args: readonly string[], env?: NodeJS.ProcessEnv): Child {
  return new Child(name, spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], env: env ?? process.env }));
}

/** Forks a TypeScript module under this Node (type stripping) with an IPC channel. */
export function forkTs(name: string, module: string | URL, args: readonly string[], execArgv: readonly string[] = []): Child {
  const path = module instanceof URL ? fileURLToPath(module) : module;
  return new Child(name, fork(path, args, { stdio: ["ignore", "pipe", "pipe", "ipc"], execArgv: [...execArgv] }));
}

/**
 * The scheduling niceness of a bench's workload processes: the members and
 * their controllers, next to the control plane (devapi, the manager). On a
 * cluster the apiserver runs on nodes of its own; on this 2-core machine 64
 * members would otherwise take its CPU away, and its Lease answers would
 * time out because of the machine, not the ring. Niceness 10 weighs a
 * process about a ninth of one at 0 (the kernel's CFS weights: 110 against
 * 1024), so the workload competes with itself first.
 */
export const WORKLOAD_NICENESS = 10;

/** Runs `child` below the control plane (see {@link WORKLOAD_NICENESS}); returns it. */
export function asWorkload(child: Child): Child {
  if (child.proc.pid !== undefined) setPriority(child.proc.pid, WORKLOAD_NICENESS);
  return child;
}

/**
 * The control plane's niceness where the bench may raise a priority (as
 * root): with 64 workload processes at {@link WORKLOAD_NICENESS} their
 * weights still add up to about the control plane's, and S1's devapi then
 * answered Lease renewals after more than 10 s. At -10 (CFS weight 9548
 * against 110) it gets what it asks for, as on nodes of its own.
 */
export const CONTROL_PLANE_NICENESS = -10;

/** Runs `child` above the workload where allowed (see {@link CONTROL_PLANE_NICENESS}); returns it. */
export function asControlPlane(child: Child): Child {
  try {
    if (child.proc.pid !== undefined) setPriority(child.proc.pid, CONTROL_PLANE_NICENESS);
  } catch {
    // Not root: the workload's own niceness is all the bench can do.
  }
  return child;
}

/** Stops every child still running (bench teardown). */
export async function stopAll(): Promise<void> {
  await Promise.all([...children].map((c) => c.stop(1000)));
}

/** Sends `msg` and resolves with the first reply whose `type` is `replyType`; rejects after `timeoutMs`. */
export function ask<T>(child: Child, msg: { type: string } & Record<string, unknown>, replyType: string, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: unknown): void => {
      if (typeof m === "object" && m !== null && (m as { type?: unknown }).type === replyType) {
        cleanup();
        resolve(m as T);
      }
    };
    const onExit = (code: number | null): void => {
      cleanup();
      reject(new Error(`${child.name} exited (${code}) while waiting for ${replyType}; output:\n${child.lines.slice(-20).join("\n")}`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`${child.name}: no ${replyType} within ${timeoutMs} ms; output:\n${child.lines.slice(-20).join("\n")}`));
    }, timeoutMs);
    const cleanup = (): void => {
      clearTimeout(timer);
      child.proc.off("message", onMessage);
      child.proc.off("exit", onExit);
    };
    child.proc.on("message", onMessage);
    child.proc.once("exit", onExit);
    if (msg.type !== "") child.proc.send(msg);
  });
}

/** VmRSS and VmHWM (peak RSS) of a process in bytes, from /proc (Linux). NaN elsewhere. */
export function rssOf(pid: number): { rss: number; peak: number } {
  const m = procMemory(pid);
  return { rss: m.rss, peak: m.hwm };
}

/**
 * CPU time (user + system) process `pid` has used so far, in ms, from
 * /proc (USER_HZ ticks, 10 ms each); NaN when it is gone.
 */
export function cpuMsOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after "pid (comm) ": state is the 3rd field, utime the 14th, stime the 15th.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

/**
 * Bytes process `pid` has passed to write-like system calls so far
 * (`wchar` in /proc/<pid>/io: sockets included, so TLS records as sent);
 * NaN when it is gone or not readable.
 */
export function writtenBytesOf(pid: number): number {
  try {
    const m = /^wchar: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, "utf8"));
    return m === null ? Number.NaN : Number(m[1]);
  } catch {
    return Number.NaN;
  }
}

/** A loopback port that was free a moment ago (bind 0, read, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      const port = typeof a === "object" && a !== null ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** GET over plain HTTP; resolves status and body, rejects on a connection error or after `timeoutMs`. */
export function httpGet(url: string, timeoutMs = 5000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "GET", timeout: timeoutMs, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (b: Buffer) => parts.push(b));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url}: timeout`)));
    req.on("error", reject);
    req.end();
  });
}

/**
 * Polls `url` every `everyMs` until it answers 200; resolves the time that
 * took from `t0` (a `performance.now()` value) in ms. Rejects after `timeoutMs`.
 */
export async function waitReady(url: string, t0: number, timeoutMs: number, everyMs = 2): Promise<number> {
  const end = t0 + timeoutMs;
  for (;;) {
    try {
      const r = await httpGet(url, 1000);
      if (r.status === 200) return performance.now() - t0;
    } catch {
      // not listening yet
    }
    if (performance.now() > end) throw new Error(`${url} not ready within ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The CLI as `npm run build` leaves it. */
export const CLI = fileURLToPath(new URL("../../dist/cli/bin.js", import.meta.url));

/** Polls `cond` every `everyMs` until true; false after `timeoutMs`. */
export async function until(cond: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 50): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return true;
    if (Date.now() > end) return false;
    await sleep(everyMs);
  }
}
