/**
 * Where `shardcar proxy` sends the controller's requests, and as whom its
 * ring member calls the apiserver:
 *
 * - `--injected`: the sidecar's own service account (`--real-sa-dir`)
 *   against the in-cluster apiserver, for both;
 * - `--server URL`: that upstream (with `--certificate-authority`); the
 *   ring's credentials from `--kubeconfig` only, none without;
 * - otherwise the one rule of src/kube/config.ts (`--kubeconfig`, else
 *   `$KUBECONFIG`, else in-cluster, else `~/.kube/config`), for both halves
 *   at once, so they always name the same cluster.
 */
import { fs } from "../node-builtins.ts";
import type { ApiClient } from "../kube/client.ts";
import { connectionFor, describeSource, inClusterAccess, loadKubeAccess, readKubeconfig, type KubeAccess } from "../kube/config.ts";
import type { Logger } from "../log.ts";
import type { AdminOptions } from "../proxy/reporting/admin.ts";
import { makeUpstream, type Upstream } from "../proxy/serving/upstream.ts";
import { UsageError } from "./flags.ts";
import { selfSignedTls } from "./serving-tls.ts";

export interface SidecarAccess {
  readonly upstream: Upstream;
  /** The ring member's identity; undefined for `--server` without `--kubeconfig`. */
  readonly identity: KubeAccess | undefined;
}

export interface SidecarAccessOptions {
  readonly injected: boolean;
  readonly server: string | undefined;
  readonly caFile: string | undefined;
  readonly kubeconfig: string | undefined;
  /** The sidecar's own service-account directory (`--real-sa-dir`). */
  readonly saDir: string;
  readonly env: NodeJS.ProcessEnv;
}

export async function sidecarAccess(o: SidecarAccessOptions): Promise<SidecarAccess> {
  if (o.server !== undefined) {
    const ca = o.caFile === undefined ? undefined : readCa(o.caFile);
    return { upstream: makeUpstream(o.server, ca, { flag: "--server" }), identity: o.kubeconfig === undefined ? undefined : await readKubeconfig(o.kubeconfig) };
  }
  const identity = o.injected ? inClusterAccess(o.env, o.saDir, "--injected") : await loadKubeAccess({ kubeconfig: o.kubeconfig, env: o.env, saDir: o.saDir });
  return { upstream: makeUpstream(identity.cluster.server, identity.cluster.ca, { tlsServerName: identity.cluster.tlsServerName }), identity };
}

function readCa(path: string): string {
  try {
    return fs.readFileSync(path, "utf8");
  } catch (e) {
    throw new UsageError("--certificate-authority", `cannot read --certificate-authority ${JSON.stringify(path)}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}

/**
 * The ring member's client. client-node loads only when the kubeconfig's
 * user needs it (exec plugins, auth providers, ...): idle RSS, P6.
 */
export async function ringClient(access: SidecarAccess, log: Logger): Promise<ApiClient> {
  const { identity } = access;
  if (identity === undefined) throw new UsageError("--shards", "--shards ring needs credentials for the member Lease: use --kubeconfig (or --injected), or drop --server");
  if (identity.needsClientNode !== undefined) {
    log.info({ kubeconfig: describeSource(identity.source), needs: identity.needsClientNode }, "the kubeconfig's user needs client-node; loading it for the ring member");
  }
  const [{ ApiClient }, connection] = await Promise.all([import("../kube/client.ts"), connectionFor(identity)]);
  return new ApiClient(connection);
}

/**
 * Who may read the admin listener (src/proxy/reporting/admin.ts). `--metrics-auth`
 * asks the apiserver with the sidecar's own identity, the one its ring
 * member uses, and serves the listener over TLS.
 */
export async function adminAccessFor(o: { debugRemote: boolean; metricsAuth: boolean; access: SidecarAccess }): Promise<Pick<AdminOptions, "debugFrom" | "metricsAuth" | "tls">> {
  const debugFrom = o.debugRemote ? ("anyone" as const) : ("loopback" as const);
  if (!o.metricsAuth) return { debugFrom };
  const { identity } = o.access;
  if (identity === undefined) throw new UsageError("--metrics-auth", "--metrics-auth asks the apiserver with the sidecar's own credentials: use --kubeconfig (or --injected), or drop --server");
  const [{ ApiClient }, { DelegatedAuth }, connection, { tls }] = await Promise.all([import("../kube/client.ts"), import("../kube/access-review.ts"), connectionFor(identity), selfSignedTls("shardcar admin CA", ["localhost", "127.0.0.1"])]);
  return { debugFrom, metricsAuth: new DelegatedAuth(new ApiClient(connection)), tls };
}
