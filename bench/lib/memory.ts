/**
 * Memory figures of another process, for the memory benches (P5m, P6,
 * P6b) and the probe behind docs/performance.md's breakdown: /proc status
 * and smaps_rollup (RSS, its anonymous and file-backed parts, PSS), a
 * sampler that keeps the peak of each, and HTTP readers that
 * consume a response at full speed or at a fixed rate (a slow controller),
 * with backpressure (the reader pauses; nothing is dropped).
 */
import { readFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { request as httpRequest, type IncomingMessage } from "node:http";

/** Every memory figure of the benches is in MiB (2^20 bytes), written "MiB". */
const MiB = 1024 * 1024;

export interface ProcMemory {
  /** VmRSS, bytes. */
  readonly rss: number;
  /** VmHWM: the peak RSS since the process started, bytes. */
  readonly hwm: number;
  /** Anonymous pages (heap, V8, buffers, stacks), bytes. */
  readonly anon: number;
  /** File-backed pages (the node binary's code and data, shared libraries), bytes. */
  readonly file: number;
}

/** Linux only; NaN fields elsewhere or once the process is gone. */
export function procMemory(pid: number): ProcMemory {
  try {
    const s = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(s)?.[1] ?? Number.NaN) * 1024;
    return { rss: kb("VmRSS"), hwm: kb("VmHWM"), anon: kb("RssAnon"), file: kb("RssFile") };
  } catch {
    return { rss: Number.NaN, hwm: Number.NaN, anon: Number.NaN, file: Number.NaN };
  }
}

/** Bytes a process has read and written through syscalls (`/proc/<pid>/io` rchar, wchar): sockets included. */
export function procIo(pid: number): { readonly read: number; readonly written: number } {
  try {
    const s = readFileSync(`/proc/${pid}/io`, "utf8");
    return { read: Number(/^rchar: (\d+)/m.exec(s)?.[1] ?? Number.NaN), written: Number(/^wchar: (\d+)/m.exec(s)?.[1] ?? Number.NaN) };
  } catch {
    return { read: Number.NaN, written: Number.NaN };
  }
}

/** User + system CPU time of a process so far, ms (`/proc/<pid>/stat`, clock ticks of 10 ms). */
export function procCpuMs(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

/** `/proc/<pid>/smaps_rollup` as a map of field → bytes (Rss, Pss, Pss_Anon, Pss_File, Private_Dirty, Anonymous, ...). */
export function smapsRollup(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  try {
    for (const m of readFileSync(`/proc/${pid}/smaps_rollup`, "utf8").matchAll(/^(\w+):\s+(\d+) kB/gm)) out[m[1] ?? ""] = Number(m[2]) * 1024;
  } catch {
    // gone, or not Linux
  }
  return out;
}

/**
 * PSS (proportional set size): the process's private pages plus each
 * shared page divided by the number of processes mapping it. For a sidecar
 * that is its anonymous memory plus its share of the node binary's pages
 * with every other process of the same binary on the machine, so it falls
 * as more of them run. NaN once the process is gone.
 */
export function procPss(pid: number): { readonly pss: number; readonly pssAnon: number; readonly pssFile: number } {
  const s = smapsRollup(pid);
  return { pss: s["Pss"] ?? Number.NaN, pssAnon: s["Pss_Anon"] ?? Number.NaN, pssFile: s["Pss_File"] ?? Number.NaN };
}

/** One process's memory as a cluster may charge it: RSS, its anonymous part, PSS. Bytes. */
export interface MemoryFigures {
  readonly rss: number;
  readonly anon: number;
  readonly pss: number;
}

/** RSS, RssAnon and PSS of `pid` now (NaN fields once it is gone). */
export function memoryNow(pid: number): MemoryFigures {
  const m = procMemory(pid);
  return { rss: m.rss, anon: m.anon, pss: procPss(pid).pss };
}

/** How {@link MemorySampler} samples, for the reports. */
export const SAMPLING = { everyMs: 50, pssEvery: 5 } as const;

/**
 * Polls a process's memory and keeps the peak of each figure. VmHWM is the
 * kernel's own peak, but of RSS only, and it cannot be reset; a peak of the
 * anonymous memory, of PSS, or of RSS "during this phase" needs sampling.
 * RSS and RssAnon come from /proc/<pid>/status every `everyMs` (~30 µs a
 * read); PSS from /proc/<pid>/smaps_rollup every `pssEvery`-th sample (it
 * walks the page tables: ~0.25 ms for an idle Node process, more for a big
 * one), so a PSS peak is sampled 5× less often than the others.
 */
export class MemorySampler {
  readonly #pid: number;
  readonly #pssEvery: number;
  readonly #timer: NodeJS.Timeout;
  readonly #t0 = performance.now();
  readonly peak = { rss: 0, anon: 0, pss: 0 };
  samples = 0;

  constructor(pid: number, everyMs: number = SAMPLING.everyMs, pssEvery: number = SAMPLING.pssEvery) {
    this.#pid = pid;
    this.#pssEvery = pssEvery;
    this.#sample(true);
    this.#timer = setInterval(() => this.#sample(this.samples % this.#pssEvery === 0), everyMs);
  }

  #sample(withPss: boolean): void {
    const m = procMemory(this.#pid);
    if (Number.isFinite(m.rss)) this.peak.rss = Math.max(this.peak.rss, m.rss);
    if (Number.isFinite(m.anon)) this.peak.anon = Math.max(this.peak.anon, m.anon);
    if (withPss) {
      const p = procPss(this.#pid).pss;
      if (Number.isFinite(p)) this.peak.pss = Math.max(this.peak.pss, p);
    }
    this.samples++;
  }

  /** Stops sampling (one last sample of every figure first); returns the peaks, bytes. */
  stop(): MemoryFigures {
    clearInterval(this.#timer);
    this.#sample(true);
    return { ...this.peak };
  }

  /** The mean time between samples so far, ms: above `everyMs` when this process's event loop was busy. */
  meanIntervalMs(): number {
    return (performance.now() - this.#t0) / Math.max(1, this.samples - 1);
  }
}

export interface ReadOptions {
  readonly ca?: string;
  readonly token?: string;
  readonly accept?: string;
  /** Read at most this many body bytes per second (a slow controller); undefined: as fast as possible. */
  readonly bytesPerSecond?: number;
  readonly timeoutMs?: number;
  /** Called with the body bytes read so far, after every chunk. */
  readonly onProgress?: (bytes: number) => void;
  /** Ends the read (a watch): the result then counts what arrived until then. */
  readonly signal?: AbortSignal;
}

export interface ReadResult {
  readonly status: number;
  readonly bytes: number;
  readonly ms: number;
  /** The body's first 4 kB (a list's metadata: its resourceVersion). */
  readonly head: string;
}

function get(url: string, o: ReadOptions): Promise<IncomingMessage> {
  const u = new URL(url);
  const headers = { accept: o.accept ?? "application/json", ...(o.token === undefined ? {} : { authorization: `Bearer ${o.token}` }) };
  return new Promise((resolve, reject) => {
    const req = u.protocol === "https:" ? httpsRequest(u, { headers, ca: o.ca, agent: false }) : httpRequest(u, { headers, agent: false });
    req.on("response", resolve);
    req.on("error", reject);
    req.end();
  });
}

/**
 * Reads a response body to its end, counting bytes. With `bytesPerSecond`
 * the reader pauses whenever it is ahead of that rate, so the kernel and
 * every hop before it see a client that reads slowly, as a controller busy
 * decoding would.
 */
export async function readBody(url: string, o: ReadOptions = {}): Promise<ReadResult> {
  const t0 = performance.now();
  const res = await get(url, o);
  let bytes = 0;
  let head = "";
  await new Promise<void>((resolve, reject) => {
    const timer = o.timeoutMs === undefined ? undefined : setTimeout(() => res.destroy(new Error(`reading ${url}: no end within ${o.timeoutMs} ms`)), o.timeoutMs);
    const onAbort = (): void => {
      clearTimeout(timer);
      res.destroy();
      resolve();
    };
    if (o.signal?.aborted === true) onAbort();
    o.signal?.addEventListener("abort", onAbort, { once: true });
    res.on("data", (b: Buffer) => {
      if (head.length < 4096) head += b.subarray(0, 4096 - head.length).toString("latin1");
      bytes += b.length;
      o.onProgress?.(bytes);
      if (o.bytesPerSecond === undefined) return;
      const due = t0 + (bytes / o.bytesPerSecond) * 1000;
      const ahead = due - performance.now();
      if (ahead > 1) {
        res.pause();
        setTimeout(() => res.resume(), ahead);
      }
    });
    res.on("end", () => {
      clearTimeout(timer);
      resolve();
    });
    res.on("error", (e) => {
      clearTimeout(timer);
      if (o.signal?.aborted === true) resolve();
      else reject(e);
    });
  });
  return { status: res.statusCode ?? 0, bytes, ms: performance.now() - t0, head };
}

/** Bytes as MiB, to 0.1 MiB. */
export const toMiB = (bytes: number): number => Math.round((bytes / MiB) * 10) / 10;
