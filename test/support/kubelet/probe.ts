/**
 * One probe attempt, as the kubelet's prober makes it: `httpGet` (HTTP or
 * HTTPS without verification, any 2xx/3xx passes, `host` defaulting to the
 * pod IP), `tcpSocket` (a connection is enough), `exec` (exit code 0), each
 * within `timeoutSeconds`. gRPC probes are refused by name.
 */
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { connect as tlsConnect } from "node:tls";
import type { Socket } from "node:net";
import type { V1Container, V1Probe } from "@kubernetes/client-node";
import { UnsupportedError, resolvePort } from "./spec.ts";

export interface ProbeTarget {
  readonly podIP: string;
  dial(host: string, port: number, timeoutMs: number): Promise<Socket>;
  exec(argv: readonly string[], timeoutMs: number): Promise<{ code: number | null }>;
}

export type ProbeResult = { readonly ok: true } | { readonly ok: false; readonly reason: string };

export async function probeOnce(c: V1Container, p: V1Probe, target: ProbeTarget, timeoutMs: number): Promise<ProbeResult> {
  try {
    if (p.httpGet !== undefined) {
      const g = p.httpGet;
      const port = resolvePort(c, g.port);
      const host = g.host ?? target.podIP;
      const raw = await target.dial(host, port, timeoutMs);
      const https = (g.scheme ?? "HTTP").toUpperCase() === "HTTPS";
      const headers: Record<string, string> = { "user-agent": "kube-probe/1.36", accept: "*/*" };
      for (const h of g.httpHeaders ?? []) headers[h.name.toLowerCase()] = h.value;
      const status = await new Promise<number>((resolve, reject) => {
        const opts = {
          method: "GET",
          path: g.path ?? "/",
          headers: { host: `${host}:${port}`, ...headers },
          // dialPod hands the stream over paused (nothing may be lost before a reader attaches).
          createConnection: () => (https ? tlsConnect({ socket: raw, rejectUnauthorized: false }) : raw.resume()),
        };
        const req = (https ? httpsRequest : httpRequest)(opts, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        // The kubelet's timeoutSeconds bounds the whole attempt, connection included.
        const deadline = setTimeout(() => req.destroy(new Error(`timeout after ${timeoutMs} ms`)), timeoutMs);
        req.on("error", (e) => {
          clearTimeout(deadline);
          reject(e);
        });
        req.on("close", () => clearTimeout(deadline));
        req.end();
      });
      raw.destroy();
      return status >= 200 && status < 400 ? { ok: true } : { ok: false, reason: `HTTP probe failed with statuscode: ${status}` };
    }
    if (p.tcpSocket !== undefined) {
      const s = await target.dial(p.tcpSocket.host ?? target.podIP, resolvePort(c, p.tcpSocket.port), timeoutMs);
      s.destroy();
      return { ok: true };
    }
    if (p.exec !== undefined) {
      const { code } = await target.exec(p.exec.command ?? [], timeoutMs);
      return code === 0 ? { ok: true } : { ok: false, reason: `command exited with ${code ?? "a signal"}` };
    }
  } catch (e) {
    if (e instanceof UnsupportedError) throw e;
    return { ok: false, reason: e instanceof Error ? e.message : String(e) };
  }
  throw new UnsupportedError(`container ${c.name}: probe ${JSON.stringify(Object.keys(p))} has no handler this runner implements (httpGet, tcpSocket, exec)`);
}
