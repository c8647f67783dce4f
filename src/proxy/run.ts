/**
 * Assembles a running proxy: the loopback listener (HTTP or TLS) with its
 * front door (`serving/front.ts`), the admin listener, metrics and the shard
 * handler (`shard-handler.ts`: one ShardProxy, or two when owner-keyed children
 * must move in order with their parents). Used by
 * `shardcar proxy`, the demo, and end-to-end tests alike.
 */
import type { Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { getHeapSpaceStatistics } from "node:v8";
import { http } from "../node-builtins.ts";
import { Registry } from "../prom.ts";
import { ConfigError } from "../errors.ts";
import { formatBound } from "../shard/hash.ts";
import { createAdminServer, type AdminOptions, type ReadinessCheck } from "./reporting/admin.ts";
import { indexResources } from "./request/classify.ts";
import { createFront } from "./serving/front.ts";
import { ProxyMetrics } from "./reporting/metrics.ts";
import type { ShardProxyOptions } from "./server.ts";
import { createShardHandler, type ShardHandler } from "./shard-handler.ts";

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * The handler's options (documented on `ShardProxyOptions` in server.ts),
 * passed through as they are, and the listeners around it. The metrics are
 * made here, on `registry`.
 */
export interface ProxyConfig extends Omit<ShardProxyOptions, "metrics" | "failBufferBytes" | "random"> {
  readonly listen: ListenAddress;
  readonly admin?: ListenAddress;
  /** Who may read the admin listener's /debug/shardcar and /metrics, and its TLS (admin.ts). */
  readonly adminAccess?: Pick<AdminOptions, "debugFrom" | "metricsAuth" | "tls">;
  /** What the admin listener's /shardcar/prestop runs (admin.ts). */
  readonly preStop?: AdminOptions["preStop"];
  readonly tls?: { readonly key: string; readonly cert: string };
  readonly registry?: Registry;
  readonly readiness?: readonly ReadinessCheck[];
}

export interface RunningProxy {
  /** e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  readonly adminUrl: string | undefined;
  readonly proxy: ShardHandler;
  readonly metrics: ProxyMetrics;
  /** Connections open on the proxy listener, TLS handshakes included. */
  openConnections(): number;
  /** Each open connection's state, one line each: what a leak report names. */
  describeConnections(): string[];
  /** Stops both listeners and ends open watches. Idempotent. */
  close(): Promise<void>;
}

/** What the sidecar's memory is made of (docs/performance.md, "Where the memory goes"), bytes. */
function memoryBreakdown(): Record<string, number> {
  const out: Record<string, number> = { ...process.memoryUsage() };
  for (const s of getHeapSpaceStatistics()) out[`space:${s.space_name}`] = s.space_size;
  return out;
}

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "::1", "localhost"]);

/** Parses `host:port`; `[::1]:7443` for IPv6. */
export function parseListen(flag: string, value: string): ListenAddress {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value);
  const port = Number(m?.[3]);
  if (!m || port > 65535) throw new ConfigError(flag, `invalid ${flag} ${JSON.stringify(value)}: expected host:port, e.g. 127.0.0.1:7443`);
  return { host: m[1] ?? (m[2] === "" ? "0.0.0.0" : (m[2] ?? "0.0.0.0")), port };
}

/** Why an address cannot be listened on, in the user's words, for the codes a wrong flag causes. */
const LISTEN_REFUSED: Readonly<Record<string, string>> = {
  EADDRINUSE: "address already in use (another shardcar proxy, or another process, listens there)",
  EACCES: "permission denied (a port below 1024 needs privileges)",
  EADDRNOTAVAIL: "address not available on this host",
};

/** Listens on `addr`; an address the flag got wrong (in use, privileged, not this host's) is a ConfigError naming `flag` and the address. */
function listen(server: Server, addr: ListenAddress, flag: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const failed = (e: NodeJS.ErrnoException): void => {
      const why = LISTEN_REFUSED[e.code ?? ""];
      const at = addr.host.includes(":") ? `[${addr.host}]:${addr.port}` : `${addr.host}:${addr.port}`;
      reject(why === undefined ? e : new ConfigError(flag, `cannot listen on ${flag} ${at}: ${why}`, { cause: e }));
    };
    server.once("error", failed);
    server.listen(addr.port, addr.host, () => {
      server.off("error", failed);
      resolve(server.address() as AddressInfo);
    });
  });
}

const peerPorts = new WeakMap<Socket, number>();

/** Every raw socket of `server`, including TLS sockets still in their handshake. */
function trackSockets(server: Server): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    // Kept because node forgets it once the peer resets.
    if (s.remotePort !== undefined) peerPorts.set(s, s.remotePort);
    s.once("close", () => sockets.delete(s));
  });
  return sockets;
}

function describeSocket(s: Socket): string {
  const http = (s as Socket & { _httpMessage?: { req?: { method?: string; url?: string } } | null })._httpMessage;
  const peer = s.remotePort ?? peerPorts.get(s);
  const upgraded = s.listenerCount("data") === 0 && s.readableFlowing !== true;
  return [
    `peer :${peer ?? "?"}${s.remotePort === undefined ? " (gone)" : ""}`,
    `read ${s.bytesRead} B, wrote ${s.bytesWritten} B`,
    `readable ${s.readableEnded ? "ended" : s.isPaused() ? "paused" : `flowing=${String(s.readableFlowing)}`}`,
    `writable ${s.writableFinished ? "finished" : s.writableEnded ? "ending" : `${s.writableLength} B queued`}`,
    http?.req !== undefined ? `answering ${http.req.method ?? "?"} ${JSON.stringify((http.req.url ?? "").slice(0, 120))}` : upgraded ? "no HTTP listener (upgraded or detached)" : "idle HTTP",
  ].join(", ");
}

function closeServer(server: Server, sockets: ReadonlySet<Socket> = new Set()): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
    // A TLS socket whose handshake has not finished is not an HTTP
    // connection yet: closeAllConnections misses it, and close() would wait
    // for it (up to the 120 s TLS handshake timeout).
    for (const s of sockets) s.destroy();
  });
}

export async function startProxy(cfg: ProxyConfig): Promise<RunningProxy> {
  // The proxy carries the controller's credentials; it must never be
  // reachable from outside the pod (design.md: must).
  if (!LOOPBACK_HOSTS.has(cfg.listen.host)) {
    throw new ConfigError("--listen", `invalid --listen ${JSON.stringify(`${cfg.listen.host}:${cfg.listen.port}`)}: the proxy listens on loopback only (127.0.0.1, ::1 or localhost)`);
  }
  const registry = cfg.registry ?? new Registry();
  const metrics = new ProxyMetrics(registry);
  // The listeners' part stays here: the handler is given only its own options.
  const { listen: _listen, admin: _admin, tls: _tls, registry: _registry, readiness: _readiness, ...handler } = cfg;
  const proxy = createShardHandler({ ...handler, metrics });
  // No request reaches the proxy's handlers but through the front (target
  // made the forwarded one, sharded upgrades refused, throws answered 500).
  const front = createFront({ handle: proxy.handle, handleUpgrade: proxy.handleUpgrade, index: indexResources(cfg.resources), logger: cfg.logger, metrics });
  const server = cfg.tls === undefined ? http.createServer(front.request) : createHttpsServer({ key: cfg.tls.key, cert: cfg.tls.cert }, front.request);
  const sockets = trackSockets(server);
  // Watches are long-lived; node's default request timeout would cut them.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  server.keepAliveTimeout = 120_000;
  server.on("upgrade", front.upgrade);
  server.on("connect", front.connect);
  server.on("checkContinue", front.checkContinue);
  const addr = await listen(server, cfg.listen, "--listen");
  let admin: Server | undefined;
  let adminUrl: string | undefined;
  if (cfg.admin !== undefined) {
    admin = createAdminServer({
      ...cfg.adminAccess,
      ...(cfg.preStop === undefined ? {} : { preStop: cfg.preStop }),
      registry,
      readiness: cfg.readiness ?? [],
      debug: (query) => {
        const key = query.get("key");
        return {
          generation: cfg.ownership.current().generation,
          ranges: cfg.ownership.current().ranges.map((r) => ({ start: formatBound(r.start), end: formatBound(r.end) })),
          resources: Object.fromEntries(proxy.stats()),
          memory: memoryBreakdown(),
          // ?key=<uid or namespace>: did a watch recently deliver it? (audit --canary)
          ...(key === null ? {} : { key, delivered: proxy.delivered(key) }),
        };
      },
    });
    // The proxy listener is open by now: it must not outlive a failed start.
    const a = await listen(admin, cfg.admin, "--admin-listen").catch(async (e: unknown) => {
      proxy.close();
      await closeServer(server, sockets);
      throw e;
    });
    adminUrl = `${cfg.adminAccess?.tls === undefined ? "http" : "https"}://${a.family === "IPv6" ? `[${a.address}]` : a.address}:${a.port}`;
  }
  const scheme = cfg.tls === undefined ? "http" : "https";
  const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  let closed: Promise<void> | undefined;
  return {
    url: `${scheme}://${host}:${addr.port}`,
    adminUrl,
    proxy,
    metrics,
    openConnections: () => sockets.size,
    describeConnections: () => [...sockets].map(describeSocket),
    close() {
      closed ??= (async () => {
        proxy.close();
        await Promise.all([closeServer(server, sockets), admin === undefined ? Promise.resolve() : closeServer(admin)]);
      })();
      return closed;
    },
  };
}
