/**
 * The sidecar's runtime settings (src/sidecar-runtime.ts) are real and in
 * force everywhere the sidecar runs: Node accepts the NODE_OPTIONS, V8 knows
 * every runtime flag (a misspelt one would be ignored without a word), the
 * image's Dockerfile carries the same values, the webhook's injected
 * container gets them (test/webhook/inject.test.ts), and a proxy started
 * without them adds them itself.
 */
import t from "tap";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { SIDECAR_ENV, SIDECAR_NODE_OPTIONS, SIDECAR_V8_FLAGS, sidecarEnvToAdd, sidecarProcessEnv } from "../src/sidecar-runtime.ts";

t.test("Node accepts the sidecar's NODE_OPTIONS and applies them", (t) => {
  const r = spawnSync(process.execPath, ["-p", "require('node:v8').getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size"], {
    env: { ...process.env, NODE_OPTIONS: SIDECAR_NODE_OPTIONS },
    encoding: "utf8",
  });
  t.equal(r.status, 0, `node started with NODE_OPTIONS=${JSON.stringify(SIDECAR_NODE_OPTIONS)}: ${r.stderr}`);
  const semi = /--max-semi-space-size=(\d+)/.exec(SIDECAR_NODE_OPTIONS)?.[1];
  if (semi !== undefined) t.ok(Number(r.stdout) <= 3 * Number(semi) * 1024 * 1024, `the young generation is bounded by the semi-space flag (${r.stdout.trim()} bytes)`);
  t.end();
});

t.test("every runtime V8 flag of the sidecar is one this V8 knows", (t) => {
  const known = execFileSync(process.execPath, ["--v8-options"], { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 });
  for (const flag of SIDECAR_V8_FLAGS) {
    const name = /^--([a-z0-9-]+)/.exec(flag)?.[1] ?? "";
    t.ok(known.includes(`  --${name} `), `V8 lists ${flag.split("=")[0]}`);
  }
  t.end();
});

t.test("the image's Dockerfile sets the same sidecar environment", (t) => {
  const dockerfile = readFileSync(fileURLToPath(new URL("../Dockerfile", import.meta.url)), "utf8");
  // ENV lines, continuations joined: NAME=value or NAME="value" pairs.
  const env = new Map<string, string>();
  for (const m of dockerfile.replace(/\\\n/g, " ").matchAll(/^ENV\s+(.*)$/gm)) {
    for (const kv of (m[1] ?? "").matchAll(/([A-Z_][A-Z0-9_]*)=("([^"]*)"|\S*)/g)) env.set(kv[1] ?? "", kv[3] ?? kv[2] ?? "");
  }
  for (const e of SIDECAR_ENV) t.equal(env.get(e.name), e.value, `ENV ${e.name}`);
  t.end();
});

t.test("the sidecar's settings are added to an environment that lacks them, and what the user set is kept", (t) => {
  t.equal(sidecarEnvToAdd(sidecarProcessEnv({})), undefined, "nothing to add where every setting is in force");
  const bare = sidecarEnvToAdd({ PATH: "/bin" });
  t.same(bare, { PATH: "/bin", ...Object.fromEntries(SIDECAR_ENV.map((e) => [e.name, e.value])) }, "all of them where none is");
  t.equal(sidecarEnvToAdd({ NODE_OPTIONS: '--require "/a b/x.cjs"', MALLOC_ARENA_MAX: "4" })?.["NODE_OPTIONS"], `--require "/a b/x.cjs" ${SIDECAR_NODE_OPTIONS}`, "appended to the user's NODE_OPTIONS, whose quoting stays theirs");
  t.equal(sidecarEnvToAdd({ NODE_OPTIONS: "--max-semi-space-size=8", MALLOC_ARENA_MAX: "4" }), undefined, "the user's own semi-space size and arena count win");
  t.end();
});

t.test("a proxy started without the sidecar's settings runs with them, in the same process", { skip: process.platform !== "linux" && "reads /proc" }, async (t) => {
  const bin = fileURLToPath(new URL("../src/cli/bin.ts", import.meta.url));
  const env = { ...process.env };
  for (const e of SIDECAR_ENV) delete env[e.name];
  const child = spawn(process.execPath, [bin, "proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/2", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--log-level", "info"], { env, stdio: ["ignore", "pipe", "pipe"] });
  t.teardown(() => child.kill("SIGKILL"));
  let stderr = "";
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString("utf8")));
  const ready = await new Promise<boolean>((resolve) => {
    createInterface({ input: child.stdout }).on("line", (l) => l.includes('"msg":"proxy ready"') && resolve(true));
    child.once("exit", () => resolve(false));
  });
  t.ok(ready, `the proxy became ready: ${stderr}`);
  // The environment the process runs with now, under the pid it was started as.
  const running = new Map(
    readFileSync(`/proc/${child.pid}/environ`, "utf8")
      .split("\0")
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)] as const),
  );
  // The test runner's own NODE_OPTIONS, if any, come first.
  t.ok(running.get("NODE_OPTIONS")?.endsWith(SIDECAR_NODE_OPTIONS), `NODE_OPTIONS in force: ${running.get("NODE_OPTIONS")}`);
  for (const e of SIDECAR_ENV.filter((x) => x.name !== "NODE_OPTIONS")) t.equal(running.get(e.name), e.value, `${e.name} in force`);
  child.kill("SIGTERM");
});
