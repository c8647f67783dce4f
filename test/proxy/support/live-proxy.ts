/**
 * Live proxies (`startProxy`) for tests: one in front of a stand-in
 * apiserver whose every answer the test writes, and the probes that tests
 * holding a proxy to "never dies on input" share: its admin `/readyz`, the
 * front's count of handlers that threw, and what its upstream agent holds
 * open.
 */
import { createServer, get, type Agent, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import { silentLogger } from "../../../src/log.ts";
import { StaticOwnership } from "../../../src/shard/ownership.ts";
import { startProxy, type ProxyConfig, type RunningProxy } from "../../../src/proxy/run.ts";
import { makeUpstream } from "../../../src/proxy/serving/upstream.ts";
import type { Range } from "../../../src/shard/range.ts";
import { parseResources } from "../../../src/shard/spec.ts";

/**
 * A proxy sharding `pods` to `owned` (fallback filter) in front of a
 * node:http stand-in apiserver answering with `answer`; both closed on
 * teardown. `over` replaces any of the proxy's settings.
 */
export async function proxyInFrontOf(t: { teardown(fn: () => Promise<void>): void }, owned: readonly Range[], answer: RequestListener, over: Partial<ProxyConfig> = {}): Promise<RunningProxy> {
  const upstream = createServer(answer);
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  const proxy = await startProxy({
    listen: { host: "127.0.0.1", port: 0 },
    upstream: makeUpstream(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`),
    resources: parseResources("pods"),
    ownership: new StaticOwnership([...owned]),
    fallback: "filter",
    logger: silentLogger(),
    ...over,
  });
  t.teardown(async () => {
    await proxy.close();
    upstream.closeAllConnections();
    await new Promise<void>((r) => upstream.close(() => r()));
  });
  return proxy;
}

/** "" when the admin server's `/readyz` answers 200, else what went wrong. */
export function readyz(adminUrl: string | undefined): Promise<string> {
  return new Promise((resolve) => {
    get(`${adminUrl ?? ""}/readyz`, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode === 200 ? "" : `/readyz answered ${res.statusCode}`));
    }).on("error", (e) => resolve(`/readyz failed: ${e.message}`));
  });
}

/** `shardcar_proxy_handler_failures_total`, summed: handlers that threw (each answered 500 by the front). */
export async function handlerFailures(running: RunningProxy): Promise<number> {
  return (await running.metrics.handlerFailures.get()).values.reduce((s, v) => s + v.value, 0);
}

/**
 * Each upstream request in use: its method, path and bearer token (a
 * fuzzer's names its seed and case), as a leak report names it. Reads the
 * request a socket serves from node's `_httpMessage`; changes nothing.
 */
export function describeAgentRequests(agent: Agent): string[] {
  const out: string[] = [];
  for (const list of Object.values(agent.sockets)) {
    for (const socket of list ?? []) {
      const req = (socket as unknown as { _httpMessage?: { method?: string; path?: string; getHeader?: (name: string) => unknown } })._httpMessage;
      if (req === undefined) {
        out.push("a socket with no request");
        continue;
      }
      const auth = req.getHeader?.("authorization");
      const token = typeof auth === "string" ? /^Bearer (\S{1,80})/i.exec(auth)?.[1] : undefined;
      out.push(`${req.method ?? "?"} ${JSON.stringify((req.path ?? "").slice(0, 200))}${token === undefined ? "" : ` (token ${token})`}`);
    }
  }
  return out;
}

/** Upstream connections carrying a request, and idle kept-alive ones. */
export function agentSockets(agent: Agent): { inUse: number; idle: number } {
  const count = (m: NodeJS.ReadOnlyDict<unknown[]>): number => Object.values(m).reduce((n, l) => n + (l?.length ?? 0), 0);
  return { inUse: count(agent.sockets), idle: count(agent.freeSockets) };
}
