/**
 * Where the proxy sends requests, and how it trusts the apiserver: the
 * cluster half of the configuration the one loader (src/kube/config.ts)
 * chose, or `--server`.
 *
 * Only the cluster half is used: the proxy forwards the controller's own
 * credentials and never attaches its own.
 */
import type * as http from "node:http";
import { http as nodeHttp } from "../../node-builtins.ts";
import * as https from "node:https";
import { ConfigError } from "../../errors.ts";

export interface Upstream {
  readonly url: URL;
  /** PEM bundle the apiserver certificate must chain to; undefined = system roots. */
  readonly ca?: string;
  /** Keep-alive agent shared by every upstream request. */
  readonly agent: http.Agent;
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

/** `tlsServerName`: the name to verify the certificate against, when it is not the server's host. `flag`: the one to blame. */
export function makeUpstream(server: string, ca?: string, opts: { tlsServerName?: string | undefined; flag?: string } = {}): Upstream {
  const flag = opts.flag ?? "--kubeconfig";
  // "127.0.0.1:8080" is no URL, and "localhost:8080" is one with the
  // scheme "localhost:": either way what is missing is the scheme.
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(server)) {
    const local = LOOPBACK.has(server.replace(/:\d+$/, "")) ? `, or "http://${server}" for a development server such as shardcar devapi` : "";
    throw new ConfigError(flag, `${opts.flag ?? "apiserver address"} ${JSON.stringify(server)}: missing scheme, did you mean "https://${server}"${local}?`);
  }
  let url: URL;
  try {
    url = new URL(server);
  } catch (e) {
    throw new ConfigError(flag, `apiserver address ${JSON.stringify(server)} is not a URL`, { cause: e });
  }
  if (url.protocol === "http:") {
    // Plain HTTP exists for the embedded devapi only; a real apiserver is
    // always reached over verified TLS.
    if (!LOOPBACK.has(url.hostname)) {
      throw new ConfigError(flag, `refusing plain-HTTP apiserver ${server}: only loopback development servers may skip TLS`);
    }
    return { url, agent: new nodeHttp.Agent({ keepAlive: true }) };
  }
  if (url.protocol !== "https:") throw new ConfigError(flag, `unsupported apiserver scheme in ${server}`);
  // rejectUnauthorized stays true: never skip verification upstream.
  const agent = new https.Agent({ keepAlive: true, ca, rejectUnauthorized: true, ...(opts.tlsServerName === undefined ? {} : { servername: opts.tlsServerName }) });
  return ca === undefined ? { url, agent } : { url, ca, agent };
}

/**
 * An upstream failure as one line. Node's connect tries every address of a
 * name (`localhost`: ::1 and 127.0.0.1) and fails with an AggregateError
 * whose own message is empty: the addresses' errors are its message then.
 */
export function describeUpstreamError(e: unknown): string {
  if (e instanceof AggregateError && e.message === "") return e.errors.map(describeUpstreamError).join("; ");
  if (!(e instanceof Error)) return String(e);
  // OpenSSL's own text is a line of codes and a source path; its reason is what a reader can use.
  const tls = /SSL routines:[^:]*:([^:]+):/.exec(e.message)?.[1];
  if (tls !== undefined) return `TLS handshake failed: ${tls}${tls === "wrong version number" ? " (does it serve plain http?)" : ""}`;
  const code = (e as Error & { code?: unknown }).code;
  return e.message !== "" ? e.message : typeof code === "string" ? code : e.name;
}
