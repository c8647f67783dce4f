/**
 * Profiles a real `shardcar proxy` process under load: starts devapi and the
 * proxy (with `--cpu-prof`) as P1 does, drives `--seconds` of closed-loop
 * load at one path through it, stops the proxy so that V8 writes the
 * profile, and prints the functions with the most self time and the most
 * inclusive time (by URL and line), so a change to the hot path can be
 * judged before and after from one command.
 *
 *   node bench/tools/profile-proxy.ts [--path /api/v1/namespaces/ns-0/pods]
 *       [--seconds 5] [--connections 32] [--top 30] [--keep DIR]
 *
 * The .cpuprofile is kept in --keep (default: a temp dir, printed) for
 * Chrome DevTools or speedscope.
 */
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { MaxResult } from "../children/loadgen.ts";
import { ask, CLI, forkTs, start, stopAll } from "../lib/proc.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function frameName(n: ProfileNode, root: string): string {
  const f = n.callFrame;
  const url = f.url.replace(/^file:\/\//, "").replace(root, "").replace(/^.*node_modules\//, "~/");
  return `${f.functionName || "(anonymous)"} ${url === "" ? "" : `${url}:${f.lineNumber + 1}`}`.trim();
}

/** Self and inclusive sample counts per frame name, in % of all samples. */
export function summarize(p: Profile, root: string): { self: Array<[string, number]>; total: Array<[string, number]> } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  for (const id of p.samples) {
    const n = byId.get(id);
    if (n === undefined) continue;
    const name = frameName(n, root);
    self.set(name, (self.get(name) ?? 0) + 1);
    // Inclusive: every distinct frame on the stack once.
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const node = byId.get(cur);
      if (node === undefined) break;
      const nm = frameName(node, root);
      if (seen.has(nm)) continue;
      seen.add(nm);
      total.set(nm, (total.get(nm) ?? 0) + 1);
    }
  }
  const pct = (m: Map<string, number>): Array<[string, number]> => [...m].map(([k, v]): [string, number] => [k, (100 * v) / p.samples.length]).sort((a, b) => b[1] - a[1]);
  return { self: pct(self), total: pct(total) };
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: { path: { type: "string" }, seconds: { type: "string" }, connections: { type: "string" }, top: { type: "string" }, keep: { type: "string" } },
  });
  const path = values.path ?? "/api/v1/namespaces/ns-0/pods";
  const seconds = Number(values.seconds ?? "5");
  const top = Number(values.top ?? "30");
  const dir = values.keep ?? mkdtempSync(join(tmpdir(), "shardcar-prof-"));
  try {
    const devapi = start("devapi", process.execPath, [CLI, "devapi", "--port", "0", "--gate", "on", "--seed-pods", "60", "--namespaces", "6", "--log-level", "warn"]);
    const direct = (await devapi.waitLine(/^(http:\/\/\S+)$/, 20_000))[1] ?? "";
    const proxy = start("proxy", process.execPath, ["--cpu-prof", "--cpu-prof-dir", dir, CLI, "proxy", "--server", direct, "--resources", "pods", "--shards", "0/1", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--log-level", "warn"]);
    const proxied = (await proxy.waitLine(/listening on (http:\/\/\S+)/, 20_000))[1] ?? "";
    const gen = forkTs("loadgen", new URL("../children/loadgen.ts", import.meta.url), []);
    await ask(gen, { type: "" }, "ready", 20_000);
    const r = await ask<MaxResult>(gen, { type: "max", url: proxied + path, connections: Number(values.connections ?? "32"), durationMs: seconds * 1000 }, "result", seconds * 1000 + 30_000);
    gen.proc.send({ type: "exit" });
    await proxy.stop(10_000);
    const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
    if (file === undefined) throw new Error(`no .cpuprofile in ${dir}`);
    const prof = JSON.parse(readFileSync(join(dir, file), "utf8")) as Profile;
    const root = new URL("../../", import.meta.url).pathname;
    const s = summarize(prof, root);
    console.log(`${path}: ${Math.round(r.rps)} req/s through the proxy (${r.errors} errors), ${prof.samples.length} samples; profile: ${join(dir, file)}\n`);
    console.log("self %   function");
    for (const [name, v] of s.self.slice(0, top)) console.log(`${v.toFixed(1).padStart(6)}   ${name}`);
    console.log("\ntotal %  function");
    for (const [name, v] of s.total.slice(0, top)) console.log(`${v.toFixed(1).padStart(6)}   ${name}`);
  } finally {
    await stopAll();
  }
}
