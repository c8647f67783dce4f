import t from "tap";
import { readFileSync } from "node:fs";

// devapi's decisions are pure functions of their inputs; only server.ts,
// http-io.ts, admission-client.ts, watch.ts and index.ts touch sockets and
// timers. The store keeps its clock and uid source injectable (crypto is
// only its default uid/name source).
const PURE = ["admission.ts", "reviews.ts", "gate.ts", "list.ts", "selectors.ts", "request.ts", "negotiate.ts", "table.ts", "patch.ts", "continue.ts", "json.ts", "discovery.ts", "builtins.ts", "types.ts", "selection.ts", "list-encoding.ts"];
const STORE = ["store.ts", "seed.ts"];
const FORBIDDEN: Array<[RegExp, string]> = [
  [/from\s+["']node:(?!crypto)/, "a node: import other than crypto"],
  [/\bsetTimeout\b|\bsetInterval\b|\bsetImmediate\b/, "a timer"],
  [/\bperformance\.now\b|new Date\(\)/, "a clock read"],
  [/\bMath\.random\b/, "randomness"],
  [/\bprocess\.[A-Za-z]/, "the process"],
];

for (const file of [...PURE, ...STORE]) {
  t.test(`src/devapi/${file} does no I/O and starts no timer`, async (t) => {
    const text = readFileSync(new URL(`../../src/devapi/${file}`, import.meta.url), "utf8");
    for (const [re, what] of FORBIDDEN) t.notMatch(text, re, `no ${what}`);
    if (PURE.includes(file)) {
      t.notMatch(text, /from\s+["']node:/, "no node: import at all");
      t.notMatch(text, /\bDate\.now\b/, "no clock");
    }
  });
}

t.test("the purity check can fail", async (t) => {
  t.match('import { createServer } from "node:http";', FORBIDDEN[0]?.[0] ?? /$^/);
  t.match("setTimeout(f, 1)", FORBIDDEN[1]?.[0] ?? /$^/);
});
