/**
 * A real `shardcar proxy` process for the macro benches, started from the
 * built CLI as the sidecar container starts it: upstream over verified TLS
 * (the bench CA), TLS to its controller, admin on loopback. Its stats and
 * memory are read from its own /debug/shardcar.
 */
import { availableParallelism } from "node:os";
import { sidecarProcessEnv } from "../../src/sidecar-runtime.ts";
import { CLI, httpGet, start, type Child } from "./proc.ts";
import type { BenchTls } from "./tls.ts";

export interface ProxyProc {
  readonly child: Child;
  readonly url: string;
  readonly admin: string;
}

export interface ProxyProcOptions {
  readonly name: string;
  readonly upstream: string;
  /** Serves TLS to the client with this, and trusts it upstream unless `upstreamCaFile` says otherwise. */
  readonly tls: BenchTls;
  readonly upstreamCaFile?: string;
  /** `--shards`, e.g. `0/4`. */
  readonly shards: string;
  readonly resources?: string;
  /** Node flags before the CLI (e.g. `--heapsnapshot-signal=SIGUSR2`). */
  readonly nodeFlags?: readonly string[];
  /** Default: the sidecar's own runtime settings (src/sidecar-runtime.ts) over this process's environment. */
  readonly env?: NodeJS.ProcessEnv;
  readonly extraArgs?: readonly string[];
  /** A command the proxy runs under (e.g. `["heaptrack", "-o", FILE]`): then `child.pid` is the wrapper's. */
  readonly wrapper?: readonly string[];
}

/**
 * `base` with V8's and glibc's own defaults in place of the sidecar's
 * runtime settings, for a before/after: a proxy started without them would
 * add them itself (src/cli/bin.ts), but keeps a semi-space size and an arena
 * count that are set. `--max-semi-space-size=0` is V8's default (sized by
 * V8); 8 arenas a core is glibc's default limit on 64-bit.
 */
export function withoutSidecarRuntime(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...base, NODE_OPTIONS: "--max-semi-space-size=0", MALLOC_ARENA_MAX: String(8 * availableParallelism()) };
}

export async function startProxyProc(o: ProxyProcOptions): Promise<ProxyProc> {
  const [cmd, ...pre] = [...(o.wrapper ?? []), process.execPath];
  const child = start(
    o.name,
    cmd ?? process.execPath,
    [
      ...pre,
      ...(o.nodeFlags ?? []),
      CLI,
      "proxy",
      "--server",
      o.upstream,
      "--certificate-authority",
      o.upstreamCaFile ?? o.tls.caFile,
      "--resources",
      o.resources ?? "pods",
      "--shards",
      o.shards,
      "--listen",
      "127.0.0.1:0",
      "--admin-listen",
      "127.0.0.1:0",
      "--tls-cert",
      o.tls.certFile,
      "--tls-key",
      o.tls.keyFile,
      "--log-level",
      "info",
      ...(o.extraArgs ?? []),
    ],
    o.env ?? sidecarProcessEnv(),
  );
  const m = await child.waitLine(/"msg":"proxy ready"/, 60_000);
  const line = JSON.parse(m.input) as { url?: string; admin?: string };
  if (line.url === undefined || line.admin === undefined) throw new Error(`proxy ready line without url/admin: ${m.input}`);
  return { child, url: line.url, admin: line.admin };
}

export interface ProxyStats {
  upstreamBytes: number;
  clientBytes: number;
  lists: number;
  watches: number;
}

/** The proxy's tallies for `resource` (its /debug/shardcar). */
export async function proxyStats(p: ProxyProc, resource = "pods"): Promise<ProxyStats> {
  const r = await httpGet(`${p.admin}/debug/shardcar`);
  const body = JSON.parse(r.body) as { resources?: Record<string, ProxyStats> };
  return body.resources?.[resource] ?? { upstreamBytes: 0, clientBytes: 0, lists: 0, watches: 0 };
}
