/**
 * Profiles a real `shardcar manager` while the apiserver kit's admission
 * plugin calls its stamping webhook: S3's rig (bench/lib/write-path-rig.ts)
 * with one manager under `--cpu-prof`, `--seconds` of ConfigMap CREATEs at
 * `--rate` (open loop, bench/children/loadgen.ts), then the manager is stopped
 * so that V8 writes the profile, and the functions with the most self and
 * inclusive time are printed (as bench/tools/profile-proxy.ts does for the
 * proxy). Also prints the CPU each process spent per write, from /proc.
 *
 *   node bench/tools/profile-webhook.ts [--rate 200] [--seconds 10]
 *       [--top 30] [--keep DIR] [--no-webhook]
 *
 * `--no-webhook` runs the same writes without the webhook configuration: what
 * the manager spends anyway (its labeller's watch of every ConfigMap).
 */
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { RateResult } from "../children/loadgen.ts";
import { ask, forkTs, stopAll } from "../lib/proc.ts";
import { summarize } from "./profile-proxy.ts";
import { configMapBody, configMapUrl, WritePathRig } from "../lib/write-path-rig.ts";

if (import.meta.main) {
  const { values } = parseArgs({ options: { rate: { type: "string" }, seconds: { type: "string" }, top: { type: "string" }, keep: { type: "string" }, "no-webhook": { type: "boolean" } } });
  const rate = Number(values.rate ?? "200");
  const seconds = Number(values.seconds ?? "10");
  const top = Number(values.top ?? "30");
  const dir = values.keep ?? mkdtempSync(join(tmpdir(), "shardcar-prof-webhook-"));
  const rig = await WritePathRig.start({ replicas: 1, labelRate: 1, managerNodeArgs: ["--cpu-prof", "--cpu-prof-dir", dir] });
  const gen = forkTs("loadgen", new URL("../children/loadgen.ts", import.meta.url), []);
  try {
    await ask(gen, { type: "" }, "ready", 20_000);
    rig.use(1);
    await rig.setWebhook(values["no-webhook"] !== true);
    const c0 = rig.cpu();
    const r = await ask<RateResult>(gen, { type: "rate", rate, durationMs: seconds * 1000, warmupMs: 1000, token: rig.api.token, ca: rig.api.caPem, url: configMapUrl(rig.api), method: "POST", body: configMapBody("prof") }, "result", seconds * 1000 + 60_000);
    const c1 = rig.cpu();
    const per = (a: number, b: number): string => `${((b - a) / Math.max(1, r.sent)).toFixed(3)} ms`;
    console.log(`${r.sent} CREATEs at ${rate}/s (achieved ${Math.round(r.achievedRps)}/s): p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, statuses ${JSON.stringify(r.statuses)}`);
    console.log(`CPU per write: apiserver ${per(c0.apiserver, c1.apiserver)}, etcd ${per(c0.etcd, c1.etcd)}, manager ${per(c0.managers[0] ?? 0, c1.managers[0] ?? 0)}, balancer ${per(c0.bench, c1.bench)}; balancer connections ${JSON.stringify(rig.balancer.stats().connections)}`);
    const manager = rig.managers[0];
    if (manager === undefined) throw new Error("no manager");
    await manager.child.stop(10_000);
    const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
    if (file === undefined) throw new Error(`no .cpuprofile in ${dir}`);
    const prof = JSON.parse(readFileSync(join(dir, file), "utf8")) as Parameters<typeof summarize>[0];
    const s = summarize(prof, new URL("../../", import.meta.url).pathname);
    console.log(`${prof.samples.length} samples; profile: ${join(dir, file)}\n`);
    console.log("self %   function");
    for (const [name, v] of s.self.slice(0, top)) console.log(`${v.toFixed(1).padStart(6)}   ${name}`);
    console.log("\ntotal %  function");
    for (const [name, v] of s.total.slice(0, top)) console.log(`${v.toFixed(1).padStart(6)}   ${name}`);
  } finally {
    gen.proc.send({ type: "exit" });
    await rig.stop().catch(() => {});
    await stopAll();
  }
}
