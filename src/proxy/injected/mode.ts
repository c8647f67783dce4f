/**
 * The sidecar's half of in-pod transparency (`shardcar proxy --injected`).
 *
 * The webhook points each app container's in-cluster config at
 * `https://127.0.0.1:<proxy port>` and mounts an emptyDir over its
 * service-account directory. This module fills that emptyDir and provides
 * the certificate the proxy serves, so that an unmodified client's
 * `rest.InClusterConfig()` / `loadFromCluster()` just works:
 *
 * - `token`: a copy of the sidecar's real projected token, refreshed when the
 *   kubelet rotates it (polled: the kubelet swaps a `..data` symlink, which
 *   `fs.watch` does not report reliably);
 * - `namespace`: the pod's namespace;
 * - `ca.crt`: the pod-local CA (which signed the proxy's certificate) followed
 *   by the cluster CA, so a client that reaches the real apiserver by another
 *   route (`kubernetes.default.svc`) still verifies it;
 * - `kubeconfig` (optional): the same, for clients that read a kubeconfig.
 *
 * Every file is written to a temporary name and renamed into place, so an app
 * never reads a half-written token. The pod CA's private key is created
 * non-extractable, signs the one serving certificate and is then dropped;
 * the CA certificate and the serving key and certificate stay in the
 * emptyDir for the pod's life, so a restarted sidecar serves what the apps
 * already trust (pod-tls.ts).
 *
 * Never touches `process`; stops when `signal` aborts or `close()` is called.
 */
import { randomBytes } from "node:crypto";
import { rename, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../../log.ts";
import type { TlsMaterial } from "../../pki/ca.ts";
import { loadOrCreatePodTls, readOptional } from "./pod-tls.ts";

/** The service-account directory every in-cluster client reads. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

export interface InjectedModeOptions {
  /** The sidecar's own (real) service-account mount. Default {@link SERVICE_ACCOUNT_DIR}. */
  realServiceAccountDir?: string;
  /** The emptyDir, as the sidecar sees it (`--sa-dir`); app containers mount it at the SA path. */
  sharedDir: string;
  /**
   * Where app containers see `sharedDir`, for the paths inside the kubeconfig.
   * Default {@link SERVICE_ACCOUNT_DIR}.
   */
  appServiceAccountDir?: string;
  listenHost: "127.0.0.1";
  listenPort: number;
  writeKubeconfig: boolean;
  /** How often to look for a rotated token or cluster CA. Default 1000 ms. */
  pollIntervalMs?: number;
  logger: Logger;
  signal: AbortSignal;
}

export interface InjectedMode {
  /** Serving certificate for 127.0.0.1 and localhost, signed by the pod CA. */
  readonly tls: TlsMaterial;
  /** PEM of the pod-local CA (also the first certificate of `ca.crt`). */
  readonly caCert: string;
  /**
   * True once token, namespace and ca.crt (and kubeconfig, when asked for)
   * are in `sharedDir` with the current content. Stays false while the real
   * service-account files are missing.
   */
  readonly ready: boolean;
  /** Stops polling; waits for a sync in progress. Files are left in place for the app. Safe to call twice. */
  close(): Promise<void>;
}

// The pod CA and its one certificate live as long as the pod, which has no
// upper bound; ten years is "longer than any pod". The CA's key never leaves
// the first sidecar process and the serving key never leaves the pod's
// memory-backed emptyDir, so a long life costs nothing.
const POD_CA_VALIDITY_MS = 10 * 365 * 24 * 3600_000;

/**
 * Generates the pod CA and serving certificate, writes the files once (if
 * the real ones are there), and starts polling. Resolves when the
 * certificate exists; check `ready` for the files. Rejects only if the
 * certificate cannot be generated.
 */
export async function startInjectedMode(opts: InjectedModeOptions): Promise<InjectedMode> {
  const realDir = opts.realServiceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const appDir = opts.appServiceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const pollMs = opts.pollIntervalMs ?? 1000;
  const { logger } = opts;

  // Kept in the shared emptyDir across sidecar restarts (pod-tls.ts): the
  // apps' clients loaded ca.crt once and must keep verifying the proxy.
  const { tls, caCert } = await loadOrCreatePodTls(opts.sharedDir, opts.listenHost, POD_CA_VALIDITY_MS, new Date(), logger);

  let ready = false;
  let warnedMissing = false;
  let tmpCounter = 0;
  // Unique per process, so two sidecar restarts never share a temporary name.
  const tmpPrefix = randomBytes(6).toString("hex");

  const desired = async (): Promise<Map<string, string> | undefined> => {
    const [token, namespace, clusterCa] = await Promise.all(["token", "namespace", "ca.crt"].map((f) => readOptional(join(realDir, f))));
    if (token === undefined || namespace === undefined || clusterCa === undefined) {
      if (!warnedMissing) {
        const missing = ["token", "namespace", "ca.crt"].filter((_, i) => [token, namespace, clusterCa][i] === undefined);
        logger.warn({ dir: realDir, missing }, "real service-account files missing; not ready until they appear");
        warnedMissing = true;
      }
      return undefined;
    }
    const files = new Map<string, string>([
      ["token", token],
      ["namespace", namespace],
      ["ca.crt", `${ensureNewline(caCert)}${ensureNewline(clusterCa)}`],
    ]);
    if (opts.writeKubeconfig) files.set("kubeconfig", kubeconfig(`https://${opts.listenHost}:${opts.listenPort}`, appDir, namespace.trim()));
    return files;
  };

  const writeAtomically = async (name: string, content: string): Promise<void> => {
    const final = join(opts.sharedDir, name);
    const tmp = join(opts.sharedDir, `.${name}.${tmpPrefix}.${++tmpCounter}.tmp`);
    try {
      // 0644: the app runs as another user than the sidecar; this matches the
      // kubelet's own default mode for projected service-account files.
      await writeFile(tmp, content, { mode: 0o644 });
      // rename(2) within one directory is atomic: a reader sees the old file
      // or the new one, never a prefix of the new token.
      await rename(tmp, final);
    } catch (e) {
      await unlink(tmp).catch(() => {});
      throw e;
    }
  };

  const sync = async (): Promise<void> => {
    const files = await desired();
    if (files === undefined) return;
    if (warnedMissing) {
      logger.info({ dir: realDir }, "real service-account files present");
      warnedMissing = false;
    }
    for (const [name, content] of files) {
      // Compare with what is on disk, not with what was last written, so a
      // file deleted or edited under us is put back.
      if ((await readOptional(join(opts.sharedDir, name))) === content) continue;
      await writeAtomically(name, content);
      logger.info({ file: name }, ready ? "service-account file refreshed" : "service-account file written");
    }
    if (!ready) logger.info({ dir: opts.sharedDir }, "service-account files ready");
    ready = true;
  };

  let inFlight: Promise<void> = Promise.resolve();
  const runSync = (): Promise<void> => {
    inFlight = sync().catch((e: unknown) => logger.error({ err: e, dir: opts.sharedDir }, "writing service-account files failed"));
    return inFlight;
  };

  await runSync();

  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const schedule = (): void => {
    if (closed) return;
    // A chain of timeouts rather than setInterval: a slow sync never overlaps the next.
    timer = setTimeout(() => void runSync().then(schedule), pollMs);
    timer.unref();
  };
  schedule();

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      closed = true;
      clearTimeout(timer);
      opts.signal.removeEventListener("abort", onAbort);
      await inFlight;
    })();
    return closing;
  };
  const onAbort = (): void => void close();
  if (opts.signal.aborted) await close();
  else opts.signal.addEventListener("abort", onAbort, { once: true });

  return {
    tls,
    caCert,
    get ready() {
      return ready;
    },
    close,
  };
}

function ensureNewline(pem: string): string {
  return pem.endsWith("\n") ? pem : `${pem}\n`;
}

/**
 * A kubeconfig for the proxy. `tokenFile` (not an inline token) so that
 * client-go re-reads the rotated token, as it does for in-cluster config.
 */
function kubeconfig(server: string, dir: string, namespace: string): string {
  const q = (s: string): string => JSON.stringify(s);
  return `apiVersion: v1
kind: Config
clusters:
- name: shardcar
  cluster:
    server: ${q(server)}
    certificate-authority: ${q(`${dir}/ca.crt`)}
users:
- name: shardcar
  user:
    tokenFile: ${q(`${dir}/token`)}
contexts:
- name: shardcar
  context:
    cluster: shardcar
    user: shardcar
    namespace: ${q(namespace)}
current-context: shardcar
`;
}
