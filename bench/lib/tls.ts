/**
 * One throwaway local CA per bench run and a loopback serving certificate,
 * written to a temporary directory so that child processes (devapi, the
 * proxy CLI, controllers) can read them by path. {@link BenchTls.remove}
 * deletes the directory.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalCa } from "../../src/pki/ca.ts";

export interface BenchTls {
  readonly dir: string;
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
  readonly caPem: string;
  remove(): void;
}

export async function benchTls(name: string): Promise<BenchTls> {
  const now = new Date();
  const day = 24 * 3600_000;
  const ca = await createLocalCa(`shardcar-bench-${name}`, now, day);
  const leaf = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1", "localhost"], now, validityMs: day });
  const dir = mkdtempSync(join(tmpdir(), `shardcar-bench-${name}-`));
  const caFile = join(dir, "ca.pem");
  const certFile = join(dir, "tls.crt");
  const keyFile = join(dir, "tls.key");
  writeFileSync(caFile, ca.certPem);
  writeFileSync(certFile, leaf.cert);
  writeFileSync(keyFile, leaf.key, { mode: 0o600 });
  return { dir, caFile, certFile, keyFile, caPem: ca.certPem, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
