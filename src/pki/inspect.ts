/**
 * Reading certificates, with `node:crypto`'s X509Certificate only: what the
 * webhook's renewal, the sidecar's pod-local CA and the operator checks need
 * to know about a PEM, without loading the library that makes them
 * (`ca.ts`), so a pure check that inspects a certificate stays light.
 */
import { X509Certificate, createPrivateKey, createPublicKey } from "node:crypto";

/** What the webhook needs to know about a certificate, read with node:crypto. */
export interface CertificateFacts {
  readonly notBefore: Date;
  readonly notAfter: Date;
  readonly isCa: boolean;
  readonly dnsNames: readonly string[];
  readonly ips: readonly string[];
  readonly fingerprint: string;
}

/** Facts of the first certificate in `pem`; `undefined` when it does not parse. */
export function inspectCertificate(pem: string): CertificateFacts | undefined {
  try {
    const c = new X509Certificate(pem);
    const sans = (c.subjectAltName ?? "").split(", ").filter((s) => s !== "");
    return {
      notBefore: new Date(c.validFrom),
      notAfter: new Date(c.validTo),
      isCa: c.ca,
      dnsNames: sans.filter((s) => s.startsWith("DNS:")).map((s) => s.slice(4)),
      ips: sans.filter((s) => s.startsWith("IP Address:")).map((s) => s.slice(11)),
      fingerprint: c.fingerprint256,
    };
  } catch {
    return undefined;
  }
}

/** Splits a PEM bundle into its certificates, in order. */
export function splitPemBundle(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g)?.map((p) => `${p}\n`) ?? [];
}

/** Whether `certPem` was signed by the key of `caPem` (and names it as issuer). */
export function isSignedBy(certPem: string, caPem: string): boolean {
  try {
    const cert = new X509Certificate(certPem);
    const ca = new X509Certificate(caPem);
    return cert.checkIssued(ca) && cert.verify(ca.publicKey);
  } catch {
    return false;
  }
}

/** Whether `keyPem` is the private key of `certPem`. */
export function keyMatchesCertificate(keyPem: string, certPem: string): boolean {
  try {
    const fromKey = createPublicKey(createPrivateKey(keyPem)).export({ type: "spki", format: "der" });
    const fromCert = new X509Certificate(certPem).publicKey.export({ type: "spki", format: "der" });
    return fromKey.equals(fromCert);
  } catch {
    return false;
  }
}
