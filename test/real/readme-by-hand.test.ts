/**
 * The README's "Run the proxy by hand" against a real cluster, as written:
 * its commands are read from README.md and run against the real apiserver
 * (the proxy takes the cluster from $KUBECONFIG, kubectl sends a token), with
 * only the port and the CA file moved to free ones. kubectl must list
 * exactly the proxy's shard, which it does only if it sent its token, which
 * it does only over the proxy's TLS.
 */
import t from "tap";
import { execFile, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { shardRange } from "../../src/shard/range.ts";
import { eventually, inShard, listAll, realApiEnv, type KubeObject } from "./support/realapi.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const KUBECTL = spawnSync("sh", ["-c", "command -v kubectl"]).stdout.toString().trim();
const env = realApiEnv();

/** The README's commands for a real cluster: the second sh block of "Run the proxy by hand", continuations joined. */
function readmeCommands(): { proxy: string; kubectl: string; port: string; caFile: string } {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const section = readme.split("## Run the proxy by hand")[1]?.split("\n## ")[0] ?? "";
  const block = [...section.matchAll(/```sh\n([\s\S]*?)```/g)][1]?.[1] ?? "";
  const lines = block.replace(/\\\n\s*/g, "").split("\n").map((l) => l.replace(/\s+#.*$/, "").trim());
  const proxy = lines.find((l) => l.startsWith("node dist/cli/bin.js proxy")) ?? "";
  const kubectl = lines.find((l) => l.startsWith("kubectl ")) ?? "";
  const port = /--listen 127\.0\.0\.1:(\d+)/.exec(proxy)?.[1] ?? "";
  const caFile = /--write-ca (\S+)/.exec(proxy)?.[1] ?? "";
  if (proxy === "" || kubectl === "" || port === "" || caFile === "") throw new Error(`README.md's by-hand commands for a real cluster are not where this test looks:\n${block}`);
  return { proxy, kubectl, port, caFile };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => resolve(typeof a === "object" && a !== null ? a.port : 0));
    });
  });
}

t.test(`gate ${env.gate}: the README's by-hand proxy and kubectl with a token list exactly shard 0 of 3 of the real server`, { skip: KUBECTL === "" ? "kubectl not installed" : false }, async (t) => {
  const cmd = readmeCommands();
  t.match(cmd.proxy, /--tls\b/, "the README serves TLS to kubectl");
  t.match(cmd.kubectl, /--token "\$TOKEN"/, "and kubectl authenticates with a token");
  const dir = mkdtempSync(join(tmpdir(), "shardcar-readme-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const port = String(await freePort());
  const caFile = join(dir, "ca.crt");
  const moved = (c: string): string => c.replaceAll(`127.0.0.1:${cmd.port}`, `127.0.0.1:${port}`).replaceAll(cmd.caFile, caFile);
  // As a shell runs it, from the checkout, with the cluster in $KUBECONFIG.
  const proxy = spawn("sh", ["-c", `exec ${moved(cmd.proxy).replace(/\s*&$/, "")}`], { cwd: ROOT, env: { ...process.env, KUBECONFIG: env.kubeconfig }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  for (const s of [proxy.stdout, proxy.stderr]) s.on("data", (b: Buffer) => (output += b.toString()));
  t.teardown(() => {
    proxy.kill("SIGTERM");
  });
  if (!t.ok(await eventually(() => existsSync(caFile) && output.includes("listening on https://"), 30_000), "the proxy serves TLS and wrote its CA")) t.comment(output);

  const r = await promisify(execFile)("sh", ["-c", moved(cmd.kubectl) + " --no-headers"], { cwd: ROOT, env: { ...process.env, TOKEN: env.token }, encoding: "utf8", maxBuffer: 64 << 20 });
  const shown = r.stdout.trim().split("\n").filter((l) => l.trim() !== "").map((l) => l.trim().split(/\s+/).slice(0, 2).join("/")).sort();
  const { items } = await listAll({ url: env.url, caPem: env.caPem, token: env.token }, "/api/v1/pods");
  const name = (o: KubeObject): string => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;
  const expected = items.filter((o) => inShard(o, [shardRange(0, 3)], "uid")).map(name).sort();
  t.same(shown, expected, `${expected.length} of ${items.length} pods: exactly shard 0 of 3`);
  t.ok(expected.length > 0 && expected.length < items.length, "the shard is a proper, non-empty subset");
});
