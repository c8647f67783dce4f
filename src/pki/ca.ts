/**
 * A small CA, shared by the webhook's self-managed certificates, the
 * sidecar's pod-local CA and the tests: make a CA and issue TLS server
 * certificates from it (reading certificates is `inspect.ts`).
 *
 * Generation uses `@peculiar/x509` over WebCrypto (ECDSA P-256, SHA-256). A CA's private key is
 * generated non-extractable and lives only in memory: it signs while the
 * process runs and can never be written anywhere, so a leaf certificate is
 * the only thing that can ever chain to it.
 */
import "./reflect-metadata.ts";
import * as x509 from "@peculiar/x509";
import { randomBytes } from "node:crypto";
import { isIP } from "node:net";

/** A PEM private key and the PEM certificate it belongs to. */
export interface TlsMaterial {
  /** PEM (PKCS#8) private key. */
  readonly key: string;
  /** PEM certificate, leaf first. */
  readonly cert: string;
}

export interface IssueOptions {
  readonly commonName: string;
  /** DNS names and IP addresses for the subjectAltName; IPs are recognised by shape. */
  readonly names: readonly string[];
  readonly now: Date;
  readonly validityMs: number;
}

/** A CA whose key exists only in this object. */
export interface LocalCa {
  /** PEM of the CA certificate, to hand to clients as a trust anchor. */
  readonly certPem: string;
  /** Issues a server certificate signed by this CA. May be called many times. */
  issue(opts: IssueOptions): Promise<TlsMaterial>;
}

// Node 24 exposes WebCrypto as globalThis.crypto; passing it explicitly keeps
// this module independent of @peculiar/x509's global provider registry.
const crypto = globalThis.crypto;
const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
// Certificates start slightly in the past so that a verifier whose clock is
// a little behind ours (another node, the apiserver) accepts them at once.
const BACKDATE_MS = 5 * 60_000;

/** Creates a self-signed CA, valid from `now` for `validityMs`. */
export async function createLocalCa(commonName: string, now: Date, validityMs: number): Promise<LocalCa> {
  // Private key not extractable: see the module comment.
  const keys = await crypto.subtle.generateKey(ALG, false, ["sign", "verify"]);
  const caCert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: serial(),
      name: `CN=${escapeDn(commonName)}`,
      notBefore: new Date(now.getTime() - BACKDATE_MS),
      notAfter: new Date(now.getTime() + validityMs),
      signingAlgorithm: ALG,
      keys,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      ],
    },
    crypto,
  );
  const certPem = pemText(caCert.toString("pem"));
  return {
    certPem,
    async issue(opts) {
      const leafKeys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
      const notAfter = Math.min(now.getTime() + validityMs, opts.now.getTime() + opts.validityMs);
      const leaf = await x509.X509CertificateGenerator.create(
        {
          serialNumber: serial(),
          subject: `CN=${escapeDn(opts.commonName)}`,
          issuer: caCert.subject,
          notBefore: new Date(opts.now.getTime() - BACKDATE_MS),
          // Never outlive the CA: a chain is only as valid as its shortest link.
          notAfter: new Date(notAfter),
          signingAlgorithm: ALG,
          publicKey: leafKeys.publicKey,
          signingKey: keys.privateKey,
          extensions: [
            new x509.BasicConstraintsExtension(false, undefined, true),
            new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
            new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
            new x509.SubjectAlternativeNameExtension(
              opts.names.map((n) => (isIP(n) === 0 ? { type: "dns" as const, value: n } : { type: "ip" as const, value: n })),
              false,
            ),
            await x509.AuthorityKeyIdentifierExtension.create(caCert, false, crypto),
            await x509.SubjectKeyIdentifierExtension.create(leafKeys.publicKey, false, crypto),
          ],
        },
        crypto,
      );
      const pkcs8 = await crypto.subtle.exportKey("pkcs8", leafKeys.privateKey);
      return { key: pemText(x509.PemConverter.encode(pkcs8, "PRIVATE KEY")), cert: pemText(leaf.toString("pem")) };
    },
  };
}

/**
 * PEM as files hold it: ending in a newline. @peculiar/x509 ends on the
 * `-----END ...-----` line itself, so two of its certificates concatenated
 * into a bundle put END and BEGIN on one line, which Go's encoding/pem
 * refuses: the apiserver then cannot load a caBundle made that way ("unable
 * to parse bytes as PEM block") and fails every call to the webhook.
 */
function pemText(pem: string): string {
  return pem.endsWith("\n") ? pem : `${pem}\n`;
}

/** A positive 128-bit serial (RFC 5280 §4.1.2.2 allows up to 20 octets). */
function serial(): string {
  const b = randomBytes(16);
  b[0] = ((b[0] ?? 0) & 0x7f) | 0x01;
  return b.toString("hex");
}

function escapeDn(value: string): string {
  return value.replace(/([,+"\\<>;=])/g, "\\$1");
}
