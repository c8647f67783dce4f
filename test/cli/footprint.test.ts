/**
 * What an idle `shardcar proxy` process loads (P6: idle RSS ≤ 64 MB, of
 * which a bare Node process with the same listeners is ~56). Code that
 * idle never runs must not be loaded: Node's bundled undici (an ES import
 * of node:http pulls it in, 13 MB; src/node-builtins.ts), prom-client's
 * index and the OpenTelemetry API it loads (src/prom.ts), client-node, and
 * @peculiar/x509 with its ASN.1 stack (~15 MB idle), which only a sidecar
 * that makes its own certificate needs (src/cli/serving-tls.ts).
 *
 * The process is the real CLI (src/cli/bin.ts) with TLS to its client, as
 * an injected sidecar serves; a preloaded script records, as it exits, the
 * builtins Node loaded and every CommonJS file required.
 */
import t from "tap";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { createLocalCa } from "../../src/pki/ca.ts";

const BIN = fileURLToPath(new URL("../../src/cli/bin.ts", import.meta.url));

interface Loaded {
  readonly builtins: string[];
  readonly required: string[];
}

async function idleProxy(dir: string): Promise<Loaded> {
  const ca = await createLocalCa("footprint-test", new Date(), 3600_000);
  const leaf = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1"], now: new Date(), validityMs: 3600_000 });
  writeFileSync(join(dir, "tls.crt"), leaf.cert);
  writeFileSync(join(dir, "tls.key"), leaf.key);
  const out = join(dir, "loaded.json");
  const preload = join(dir, "record.cjs");
  writeFileSync(
    preload,
    `process.on("exit", () => require("node:fs").writeFileSync(${JSON.stringify(out)}, JSON.stringify({ builtins: process.moduleLoadList.filter((m) => m.startsWith("NativeModule ")).map((m) => m.slice(13)), required: Object.keys(require.cache) })));\n`,
  );
  const child = spawn(
    process.execPath,
    ["--require", preload, BIN, "proxy", "--server", "http://127.0.0.1:9", "--shards", "0/2", "--resources", "pods,configmaps=namespace", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--tls-cert", join(dir, "tls.crt"), "--tls-key", join(dir, "tls.key")],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const ready = await new Promise<boolean>((resolve) => {
    createInterface({ input: child.stdout }).on("line", (l) => {
      if (l.includes('"msg":"proxy ready"')) resolve(true);
    });
    void exited.then(() => resolve(false));
  });
  if (!ready) throw new Error(`the proxy exited before it was ready: ${stderr}`);
  child.kill("SIGTERM");
  const code = await exited;
  if (code !== 0) throw new Error(`the proxy exited with ${code}: ${stderr}`);
  return JSON.parse(readFileSync(out, "utf8")) as Loaded;
}

t.test("an idle static-shard sidecar given its certificate loads neither undici, nor prom-client's index and OpenTelemetry, nor client-node, nor the X.509 toolkit", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "shardcar-footprint-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const loaded = await idleProxy(dir);
  t.ok(loaded.builtins.includes("tls") && loaded.required.some((f) => f.includes("/prom-client/lib/registry.js")), "the record is of a proxy that served TLS and registered metrics");
  t.notOk(loaded.builtins.includes("internal/deps/undici/undici"), "Node's bundled undici is not loaded");
  t.same(
    loaded.required.filter((f) => /\/prom-client\/index\.js$|\/@opentelemetry\/|\/@kubernetes\/client-node\/|\/@peculiar\/|\/reflect-metadata\//.test(f)),
    [],
    "neither prom-client's index, nor @opentelemetry, nor @kubernetes/client-node, nor @peculiar/x509 and reflect-metadata",
  );
});
