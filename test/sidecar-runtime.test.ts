/**
 * The sidecar's runtime settings (src/sidecar-runtime.ts) are real and in
 * force everywhere the sidecar runs: Node accepts the NODE_OPTIONS, V8 knows
 * every runtime flag (a misspelt one would be ignored without a word), the
 * image's Dockerfile carries the same values, and the webhook's injected
 * container gets them (test/webhook/inject.test.ts).
 */
import t from "tap";
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { SIDECAR_ENV, SIDECAR_NODE_OPTIONS, SIDECAR_V8_FLAGS } from "../src/sidecar-runtime.ts";

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
