/**
 * The admin listener: /metrics, /healthz, /readyz, /debug/shardcar and
 * /shardcar/prestop. It is
 * separate from the proxy listener because the kubelet probes the pod IP,
 * while the proxy itself binds loopback only.
 *
 * Who may read what: the probes are open (the kubelet sends no credentials).
 * `/debug/shardcar` says whether a given key was delivered to the
 * controller, so it answers loopback peers only (another container of the
 * pod, `kubectl port-forward`), unless `debugFrom: "anyone"` (the sidecar's
 * `--debug-remote`, for `shardcar audit --canary` through the apiserver's pod
 * proxy). `/metrics` is open, or with `metricsAuth` answers only requests
 * the apiserver authenticates and authorizes (src/kube/access-review.ts),
 * as controller-runtime's metrics server does; the listener then serves TLS,
 * so the scraper's token does not cross the network in clear.
 * `/shardcar/prestop` is the controller container's preStop hook, which the
 * kubelet sends to the pod IP with no credentials: it answers once the
 * member's slots are handed on. Anyone who reaches the pod IP can therefore
 * make the member step aside; what that costs is bounded, because a step
 * aside not followed by the pod's end is taken back (see `preStop`).
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { http } from "../../node-builtins.ts";
import type { Registry } from "prom-client";
import type { RequestAuthorizer } from "../../kube/access-review.ts";

export interface ReadinessCheck {
  readonly name: string;
  /** Returns undefined when ready, or why not. Must not throw or block. */
  check(): string | undefined;
}

export interface AdminOptions {
  readonly registry: Registry;
  readonly readiness: readonly ReadinessCheck[];
  /** Extra JSON for /debug/shardcar (stats, owned ranges), given the request's query. */
  readonly debug?: (query: URLSearchParams) => unknown;
  /** Who /debug/shardcar answers. Default `loopback`. */
  readonly debugFrom?: "loopback" | "anyone";
  /** When given, /metrics answers only what this allows (401/403 otherwise). */
  readonly metricsAuth?: RequestAuthorizer;
  /**
   * What `/shardcar/prestop` runs; resolves with a line for the answer once
   * it is safe for the kubelet to stop the controller. Without it the hook
   * answers at once (nothing to hand on).
   */
  readonly preStop?: () => Promise<string>;
  /** Serve HTTPS with this certificate. */
  readonly tls?: { readonly key: string; readonly cert: string };
}

/** Whether the peer is this host: 127.0.0.0/8, ::1, or either mapped into IPv6. */
export function isLoopbackPeer(address: string | undefined): boolean {
  const a = (address ?? "").replace(/^::ffff:/i, "");
  return a === "::1" || /^127\.\d+\.\d+\.\d+$/.test(a);
}

export function createAdminServer(opts: AdminOptions): Server {
  const text = (res: ServerResponse, code: number, body: string): void => void res.writeHead(code, { "content-type": "text/plain" }).end(body);
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const [path = "/", search] = (req.url ?? "/").split("?");
    if (req.method !== "GET") {
      res.writeHead(405).end();
      return;
    }
    switch (path) {
      case "/healthz":
      case "/livez":
        text(res, 200, "ok\n");
        return;
      case "/readyz": {
        const failing = opts.readiness.map((c) => [c.name, c.check()] as const).filter(([, why]) => why !== undefined);
        if (failing.length === 0) text(res, 200, "ok\n");
        else text(res, 503, failing.map(([n, why]) => `${n}: ${why}`).join("\n") + "\n");
        return;
      }
      case "/metrics": {
        const serve = (): void => {
          opts.registry.metrics().then(
            (body) => res.writeHead(200, { "content-type": opts.registry.contentType }).end(body),
            (err: unknown) => res.writeHead(500).end(String(err)),
          );
        };
        if (opts.metricsAuth === undefined) return serve();
        opts.metricsAuth.authorize(req.headers.authorization, req.method, path).then(
          (d) => (d.allowed ? serve() : text(res, d.status, `${d.message}\n`)),
          () => text(res, 500, "Authentication failed\n"),
        );
        return;
      }
      case "/debug/shardcar":
        if ((opts.debugFrom ?? "loopback") === "loopback" && !isLoopbackPeer(req.socket.remoteAddress)) {
          text(res, 403, "/debug/shardcar answers loopback only (the sidecar's --debug-remote opens it, e.g. for shardcar audit --canary through the pod proxy)\n");
          return;
        }
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(opts.debug?.(new URLSearchParams(search ?? "")) ?? {}, (_k, v: unknown) => (typeof v === "bigint" ? `0x${v.toString(16).padStart(16, "0")}` : v), 2));
        return;
      case "/shardcar/prestop":
        if (opts.preStop === undefined) return text(res, 200, "nothing to hand on\n");
        opts.preStop().then(
          (line) => text(res, 200, `${line}\n`),
          (err: unknown) => text(res, 500, `${err instanceof Error ? err.message : String(err)}\n`),
        );
        return;
      default:
        res.writeHead(404).end();
    }
  };
  return opts.tls === undefined ? http.createServer(handler) : createHttpsServer({ key: opts.tls.key, cert: opts.tls.cert }, handler);
}
