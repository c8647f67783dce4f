/**
 * The operator tools' decision files do no I/O and read no clock (the shell
 * passes `now`), so every verdict is reproducible from its observations.
 * Checked on the files themselves and on everything they import, relative
 * path by relative path: a pure file must not reach the network or the
 * disk through a helper either.
 */
import t from "tap";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../../src");
const PURE = ["ops/checks.ts", "ops/audit.ts", "ops/label-audit.ts", "ops/owners.ts", "ops/canary.ts", "ops/resource.ts", "demo/report.ts"];
// Direct: the decision file itself.
const DIRECT: Array<[RegExp, string]> = [
  [/\bsetTimeout\b|\bsetInterval\b|\bsetImmediate\b/, "a timer"],
  [/\bDate\.now\b|\bperformance\.now\b|new Date\(\)/, "a clock read"],
  [/\bMath\.random\b/, "randomness"],
  [/\bprocess\./, "the process"],
];
// Transitive: anything it imports (node:crypto is allowed: certificate parsing).
const IO = /from\s+["'](node:(?:http|https|net|tls|fs|fs\/promises|child_process|dgram|dns)|@kubernetes\/client-node)["']/;

function closure(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file)) return seen;
  seen.add(file);
  const text = readFileSync(file, "utf8");
  for (const m of text.matchAll(/^(?:import|export)\s+(?!type\b)[^;]*?from\s+["'](\.{1,2}\/[^"']+)["']/gm)) closure(resolve(dirname(file), m[1] ?? ""), seen);
  return seen;
}

for (const f of PURE) {
  t.test(`src/${f} reads no clock and does no I/O, nor does anything it imports`, async (t) => {
    const path = resolve(SRC, f);
    const text = readFileSync(path, "utf8");
    for (const [re, what] of DIRECT) t.notMatch(text, re, `no ${what}`);
    for (const dep of closure(path)) t.notMatch(readFileSync(dep, "utf8"), IO, `${dep.slice(SRC.length + 1)}: no network, disk or API client import`);
  });
}

t.test("the checks can fail: an I/O import and a clock read are caught", async (t) => {
  t.match('import { request } from "node:http";', IO);
  t.match("const now = Date.now();", DIRECT[1]?.[0] ?? /$^/);
  t.ok([...closure(resolve(SRC, "cli/kube-flags.ts"))].some((d) => IO.test(readFileSync(d, "utf8"))), "the tools' client does reach the API (through src/kube/client.ts)");
});
