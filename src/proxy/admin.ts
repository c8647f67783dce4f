/**
 * The admin listener: /metrics, /healthz, /readyz and /debug/shardcar. It is
 * separate from the proxy listener because the kubelet probes the pod IP,
 * while the proxy itself binds loopback only.
 */
import type { Server } from "node:http";
import { http } from "../node-builtins.ts";
import type { Registry } from "prom-client";

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
}

export function createAdminServer(opts: AdminOptions): Server {
  return http.createServer((req, res) => {
    const [path, search] = (req.url ?? "/").split("?");
    if (req.method !== "GET") {
      res.writeHead(405).end();
      return;
    }
    switch (path) {
      case "/healthz":
      case "/livez":
        res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
        return;
      case "/readyz": {
        const failing = opts.readiness.map((c) => [c.name, c.check()] as const).filter(([, why]) => why !== undefined);
        if (failing.length === 0) res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
        else res.writeHead(503, { "content-type": "text/plain" }).end(failing.map(([n, why]) => `${n}: ${why}`).join("\n") + "\n");
        return;
      }
      case "/metrics":
        opts.registry.metrics().then(
          (text) => res.writeHead(200, { "content-type": opts.registry.contentType }).end(text),
          (err: unknown) => res.writeHead(500).end(String(err)),
        );
        return;
      case "/debug/shardcar":
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(opts.debug?.(new URLSearchParams(search ?? "")) ?? {}, (_k, v: unknown) => (typeof v === "bigint" ? `0x${v.toString(16).padStart(16, "0")}` : v), 2));
        return;
      default:
        res.writeHead(404).end();
    }
  });
}
