/**
 * The certificates shardcar's own listeners serve when no one gives it one.
 *
 * TLS on the proxy's loopback listener for a proxy run by hand. kubectl and
 * client-go send a bearer token only over https: to an `http://` proxy they
 * send no Authorization header at all, and a real apiserver answers every
 * request 401. `--tls` serves the given certificate (`--tls-cert`,
 * `--tls-key`), or one it makes at start for 127.0.0.1 and localhost,
 * signed by a CA whose key never leaves memory; `--write-ca` writes that CA's
 * certificate (public) where the client can be told to trust it.
 * (`--injected` has its own pod-local CA: src/proxy/injected/pod-tls.ts.)
 */
import { fs } from "../node-builtins.ts";
import type { TlsMaterial } from "../pki/ca.ts";
import { UsageError } from "./flags.ts";

// Made at every start and kept nowhere: long enough for any session by hand.
const VALIDITY_MS = 90 * 24 * 3600_000;

export interface LoopbackTlsOptions {
  readonly tls: boolean;
  readonly certFile: string | undefined;
  readonly keyFile: string | undefined;
  readonly writeCa: string | undefined;
  readonly now?: Date;
}

/** What the listener serves, or undefined for plain HTTP. */
export async function loopbackTls(o: LoopbackTlsOptions): Promise<TlsMaterial | undefined> {
  if ((o.certFile === undefined) !== (o.keyFile === undefined)) throw new UsageError("--tls-cert", "--tls-cert and --tls-key go together");
  if (o.certFile !== undefined && o.keyFile !== undefined) {
    if (o.writeCa !== undefined) throw new UsageError("--write-ca", "--write-ca writes the CA of the certificate --tls makes; with --tls-cert the CA is yours");
    return { cert: read("--tls-cert", o.certFile), key: read("--tls-key", o.keyFile) };
  }
  if (!o.tls) {
    if (o.writeCa !== undefined) throw new UsageError("--write-ca", "--write-ca needs --tls");
    return undefined;
  }
  const { tls, caPem } = await selfSignedTls("shardcar proxy loopback CA", ["127.0.0.1", "localhost"], o.now);
  if (o.writeCa !== undefined) {
    // By rename, so a client that waits for the file never reads half of it.
    const tmp = `${o.writeCa}.${process.pid}.tmp`;
    try {
      fs.writeFileSync(tmp, caPem, { mode: 0o644 });
      fs.renameSync(tmp, o.writeCa);
    } catch (e) {
      throw new UsageError("--write-ca", `cannot write --write-ca ${JSON.stringify(o.writeCa)}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  }
  return tls;
}

/**
 * A certificate for `names`, made now and kept nowhere, signed by a CA
 * whose key never leaves memory: the by-hand loopback listener's, and the
 * admin listeners' under `--metrics-auth` (scrapers and the kubelet do not
 * verify it, as with controller-runtime's self-signed metrics certificate).
 */
export async function selfSignedTls(caName: string, names: readonly string[], now = new Date()): Promise<{ readonly tls: TlsMaterial; readonly caPem: string }> {
  // Loaded only here: @peculiar/x509 and its ASN.1 stack cost a sidecar
  // started with --tls-cert or without TLS ~15 MB it would never use
  // (P5m, P6: docs/performance.md).
  const { createLocalCa } = await import("../pki/ca.ts");
  const ca = await createLocalCa(caName, now, VALIDITY_MS);
  const [commonName = "localhost"] = names;
  return { tls: await ca.issue({ commonName, names, now, validityMs: VALIDITY_MS }), caPem: ca.certPem };
}

function read(flag: string, path: string): string {
  try {
    return fs.readFileSync(path, "utf8");
  } catch (e) {
    throw new UsageError(flag, `cannot read ${flag} ${JSON.stringify(path)}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}
