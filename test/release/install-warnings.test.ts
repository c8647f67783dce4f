/**
 * The README's word on `npm install` under another Node stays true: every
 * package npm warns EBADENGINE about on the machine's own Node is named in
 * it, so a newcomer reads the warnings as explained, not as errors. Runs
 * npm on the system Node (not the pinned Node 24 the scripts use), offline
 * and as a dry run in a copy of package.json and the lockfile.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SYSTEM_NODE = "/usr/bin/node";
const SYSTEM_NPM = "/usr/bin/npm";
const version = existsSync(SYSTEM_NODE) ? spawnSync(SYSTEM_NODE, ["--version"], { encoding: "utf8" }).stdout.trim() : "";
const skip = !existsSync(SYSTEM_NPM) || version === "" ? "no system node and npm" : version.startsWith("v24.") ? `the system Node is ${version}: npm has nothing to warn about` : false;

t.test(`npm install on the system Node (${version || "none"}) warns only about packages the README explains`, { skip }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "shardcar-npm-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const f of ["package.json", "package-lock.json"]) copyFileSync(join(ROOT, f), join(dir, f));
  const r = spawnSync(SYSTEM_NPM, ["install", "--dry-run", "--offline", "--ignore-scripts", "--no-audit", "--no-fund"], {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, PATH: `/usr/bin:${process.env["PATH"] ?? ""}`, npm_config_loglevel: "warn" },
    timeout: 120_000,
  });
  if (r.status !== 0) {
    // Counted as skipped, never as passed: there was nothing to check.
    t.plan(0, `npm could not run offline here (${r.status ?? r.signal}): ${(r.stderr || r.stdout).split("\n").slice(-3).join(" ")}`);
    return;
  }
  const warned = [...`${r.stdout}\n${r.stderr}`.matchAll(/EBADENGINE\s+package: '(@?[^@']+)@/g)].map((m) => m[1] ?? "");
  t.ok(warned.includes("shardcar"), `npm warns about shardcar itself on ${version} (it needs Node 24): ${warned.join(", ")}`);
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const said = /`npm install` itself runs on the machine's Node:[\s\S]*?\n\n/.exec(readme)?.[0] ?? "";
  t.match(said, /EBADENGINE/, "the README names the warning");
  for (const name of warned.filter((n) => n !== "shardcar")) t.match(said, new RegExp(`\\b${name.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}\\b`), `the README names ${name}`);
});
