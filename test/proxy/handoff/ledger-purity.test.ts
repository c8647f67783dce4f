/** The handoff ledger (src/proxy/handoff/ledger/) stays pure: no clock, no timer, no randomness, no I/O, read from its source. */
import t from "tap";
import { readdirSync, readFileSync } from "node:fs";

// The handoff ledger takes the time as a parameter and does no I/O, so every
// row of its table and every random interleaving is reproducible. The shell
// (src/proxy/handoff/ledger-driver.ts, server.ts) is where clocks and sockets live.
const DIR = new URL("../../../src/proxy/handoff/ledger/", import.meta.url);
const FORBIDDEN: Array<[RegExp, string]> = [
  [/^\s*(?:import|export)\b[^;]*?\bfrom\s+["']node:/m, "a node: import"],
  [/^\s*(?:import|export)\b[^;]*?\bfrom\s+["'](?!\.\.?\/)/m, "a package import"],
  [/^\s*(?:import|export)\b[^;]*?\bfrom\s+["'](?!\.\.\/\.\.\/\.\.\/shard\/)\.\.\//m, "an import from the proxy's shell (only ../../../shard/ is pure)"],
  [/\bimport\s*\(/, "a dynamic import"],
  [/\bsetTimeout\b|\bsetInterval\b|\bsetImmediate\b|\bqueueMicrotask\b/, "a timer"],
  [/\bDate\.now\b|\bperformance\.now\b|new Date\(/, "a clock read"],
  [/\bMath\.random\b/, "randomness"],
  [/\bprocess\./, "the process"],
  [/\bconsole\./, "output"],
];

const files = readdirSync(DIR).filter((f) => f.endsWith(".ts"));

t.test("the ledger has files to check", async (t) => {
  t.ok(files.includes("ledger.ts"), `found: ${files.join(", ")}`);
});

for (const file of files) {
  t.test(`src/proxy/handoff/ledger/${file} reads no clock, draws no random number and does no I/O`, async (t) => {
    const text = readFileSync(new URL(file, DIR), "utf8");
    for (const [re, what] of FORBIDDEN) t.notMatch(text, re, `no ${what}`);
  });
}

t.test("the purity check catches each kind of impurity (it can fail)", async (t) => {
  const samples = ['import { readFileSync } from "node:fs";', 'import pino from "pino";', 'import { LedgerShell } from "../ledger-driver.ts";', 'await import("node:fs")', "setTimeout(f, 1);", "const now = Date.now();", "Math.random()", "process.exit(1)", "console.log(1)"];
  samples.forEach((s, i) => t.match(s, FORBIDDEN[i]?.[0] ?? /$^/, `caught: ${s}`));
  t.notMatch('import { equal } from "../../../shard/range.ts";', FORBIDDEN[2]?.[0] ?? /$^/, "the pure core may be imported");
});
