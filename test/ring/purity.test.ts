import t from "tap";
import { readFileSync } from "node:fs";

// The decision files of the ring take the time as a parameter and do no I/O,
// so every row of the handoff table is reproducible. The shell files
// (coordinator, election, ring-controller, member, labeller, kube) are where
// clocks and the API live.
const PURE = ["state.ts", "times.ts", "table.ts", "handoff.ts", "names.ts", "label-slots.ts", "labelling.ts"];
const FORBIDDEN: Array<[RegExp, string]> = [
  [/from\s+["']node:/, "a node: import"],
  [/from\s+["']@kubernetes\//, "the Kubernetes client"],
  [/\bsetTimeout\b|\bsetInterval\b|\bsetImmediate\b/, "a timer"],
  [/\bDate\.now\b|\bperformance\.now\b|new Date\(\)/, "a clock read"],
  [/\bMath\.random\b/, "randomness"],
  [/\bprocess\./, "the process"],
];

for (const file of PURE) {
  t.test(`src/ring/${file} reads no clock and does no I/O`, async (t) => {
    const text = readFileSync(new URL(`../../src/ring/${file}`, import.meta.url), "utf8");
    for (const [re, what] of FORBIDDEN) t.notMatch(text, re, `no ${what}`);
  });
}

t.test("the purity check catches a clock read (it can fail)", async (t) => {
  t.match("const now = Date.now();", FORBIDDEN[3]?.[0] ?? /$^/);
});
