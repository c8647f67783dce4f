/**
 * The pod-local CA and the proxy's serving certificate, kept for the life of
 * the pod rather than of one sidecar process.
 *
 * An app container's client loads `ca.crt` once: client-go reads its CA file
 * when it builds its transport and never again. A sidecar that made a new CA
 * on every start would, after a crash or an OOM kill, serve a certificate
 * that every such client refuses (`x509: certificate signed by unknown
 * authority`) until the pod is deleted. So the first sidecar of a pod stores
 * the CA certificate and the serving key and certificate in the emptyDir it
 * shares with the apps (memory-backed: gone with the pod, never on the
 * node's disk), in a directory only its own user can enter, and each restart
 * serves them again. The CA's private key is still never stored: it signs
 * that one certificate and is dropped.
 *
 * The serving key is readable only by the sidecar's uid; an app running as
 * the same uid could read it, but it is good only for 127.0.0.1 and only to
 * clients of this pod's `ca.crt`, that is to the app itself.
 */
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../../log.ts";
import { createLocalCa, type TlsMaterial } from "../../pki/ca.ts";
import { inspectCertificate, isSignedBy, keyMatchesCertificate } from "../../pki/inspect.ts";

/** The directory, inside the shared emptyDir, that holds the pod's TLS state. */
export const POD_TLS_DIR = ".shardcar-proxy";

export interface PodTls {
  readonly tls: TlsMaterial;
  readonly caCert: string;
}

/** Whether stored state can be served again at `now`, or why not. Pure. */
export function reusablePodTls(stored: { ca?: string; cert?: string; key?: string }, names: readonly string[], now: Date): { readonly ok: true; readonly pod: PodTls } | { readonly ok: false; readonly reason: string } {
  const { ca, cert, key } = stored;
  if (ca === undefined || cert === undefined || key === undefined) return { ok: false, reason: "no stored pod CA" };
  if (!keyMatchesCertificate(key, cert)) return { ok: false, reason: "the stored key is not the certificate's" };
  if (!isSignedBy(cert, ca)) return { ok: false, reason: "the stored certificate is not signed by the stored CA" };
  const facts = inspectCertificate(cert);
  if (facts === undefined || facts.notAfter.getTime() <= now.getTime()) return { ok: false, reason: "the stored certificate has expired" };
  const missing = names.filter((n) => !facts.ips.includes(n) && !facts.dnsNames.includes(n));
  if (missing.length > 0) return { ok: false, reason: `the stored certificate lacks ${missing.join(", ")}` };
  return { ok: true, pod: { tls: { key, cert }, caCert: ca } };
}

/** The file's text, or undefined when it (or its directory) does not exist. */
export async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (e) {
    if (e instanceof Error && "code" in e && (e.code === "ENOENT" || e.code === "ENOTDIR")) return undefined;
    throw e;
  }
}

/**
 * The pod's TLS state from `sharedDir`, or a new CA and certificate (stored
 * there for the next start) when there is none that can be served.
 */
export async function loadOrCreatePodTls(sharedDir: string, host: string, validityMs: number, now: Date, logger: Logger): Promise<PodTls> {
  const dir = join(sharedDir, POD_TLS_DIR);
  const names = ["127.0.0.1", "localhost"];
  const [ca, cert, key] = await Promise.all(["ca.crt", "tls.crt", "tls.key"].map((f) => readOptional(join(dir, f))));
  const reuse = reusablePodTls({ ...(ca === undefined ? {} : { ca }), ...(cert === undefined ? {} : { cert }), ...(key === undefined ? {} : { key }) }, names, now);
  if (reuse.ok) {
    logger.info({ dir }, "serving the pod-local CA of an earlier start of this sidecar, which the app containers already trust");
    return reuse.pod;
  }
  const fresh = await createLocalCa("shardcar pod-local CA", now, validityMs);
  const tls = await fresh.issue({ commonName: host, names, now, validityMs });
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // Each file by rename, the key first: a start that dies half-way leaves a
  // set that does not verify, and the next start makes a new one.
  for (const [file, content, mode] of [["tls.key", tls.key, 0o600], ["tls.crt", tls.cert, 0o644], ["ca.crt", fresh.certPem, 0o644]] as const) {
    const tmp = join(dir, `.${file}.${process.pid}.tmp`);
    await writeFile(tmp, content, { mode });
    await rename(tmp, join(dir, file));
  }
  if (ca !== undefined || cert !== undefined || key !== undefined) logger.warn({ dir, reason: reuse.reason }, "replaced the stored pod-local CA; app containers that loaded the old ca.crt will fail TLS until they restart");
  return { tls, caCert: fresh.certPem };
}
