/**
 * The handoff ledger's step is a function of its inputs: stepping the same
 * (ledger, event, now) twice gives the same result, and the ledger passed
 * in is left as it was (the shell, the handoff view and the property test's
 * probe all read ledgers a later step was taken from). The purity test reads
 * the source for clocks and I/O; this one runs it, over random sequences.
 */
import t from "tap";
import { step } from "../../../src/proxy/handoff/ledger/ledger.ts";
import type { Ledger } from "../../../src/proxy/handoff/ledger/types.ts";
import { rng } from "../../support/rng.ts";
import { Drive, FULL, HIGH, LOW, QUARTER, RING } from "../support/ledger-driver.ts";

function serialize(x: unknown): string {
  return JSON.stringify(x, (_k, v: unknown) => {
    if (typeof v === "bigint") return `${v}n`;
    if (v instanceof Set) return { set: [...(v as Set<unknown>)] };
    if (v !== null && typeof v === "object" && typeof (v as { entries?: unknown }).entries === "function" && !Array.isArray(v)) return { map: [...(v as ReadonlyMap<unknown, unknown>).entries()] };
    return v;
  });
}

function randomRun(seed: number, stepFn: typeof step): void {
  const rand = rng(seed);
  const d = new Drive({ ...RING, relistJitterMs: rand() < 0.5 ? 500 : 0 }, rand() < 0.3 ? { generation: 0, ranges: [], waitForRangesMs: 5000 } : { generation: 1, ranges: FULL }, stepFn);
  const sets = [FULL, LOW, HIGH, QUARTER, []];
  let rid = 1;
  let rv = 100;
  let generation = 1;
  const lineages = ["A", "B"];
  for (let i = 0; i < 120; i++) {
    const r = rand();
    const lineage = lineages[Math.floor(rand() * lineages.length)] ?? "A";
    const open = [...d.ledger.requests.values()];
    const pickRid = (): number | undefined => open[Math.floor(rand() * open.length)]?.rid;
    if (r < 0.08) d.ranges(++generation, sets[Math.floor(rand() * sets.length)] ?? FULL, { stuck: rand() < 0.2 ? open.map((x) => x.rid) : [] });
    else if (r < 0.2) d.list(rid++, lineage);
    else if (r < 0.32) d.watch(rid++, lineage, rand() < 0.7 ? { from: String(rv - Math.floor(rand() * 3)) } : { watchList: true });
    else if (r < 0.45) {
      const x = pickRid();
      if (x !== undefined) d.listed(x, String(rv++));
    } else if (r < 0.55) {
      const x = pickRid();
      if (x !== undefined) d.served(x);
    } else if (r < 0.62) {
      const x = pickRid();
      if (x !== undefined) d.initialEnd(x, String(rv++));
    } else if (r < 0.7) {
      const x = pickRid();
      if (x !== undefined) d.event(x, String(rv++));
    } else if (r < 0.8) {
      const x = pickRid();
      if (x !== undefined) d.ended(x, { byProxy: rand() < 0.5 });
    } else if (r < 0.87) {
      const x = pickRid();
      if (x !== undefined) d.closed(x);
    } else if (r < 0.92) {
      const x = pickRid();
      if (x !== undefined) d.cut(x);
    } else d.advance(Math.floor(rand() * 80_000));
  }
}

t.test("a step leaves the ledger it was given as it was, and gives the same result for the same inputs", async (t) => {
  const problems: string[] = [];
  const checked: typeof step = (l: Ledger, e, now, p) => {
    const before = serialize(l);
    const a = step(l, e, now, p);
    if (serialize(l) !== before) problems.push(`${e.type}: the input ledger changed`);
    const b = step(l, e, now, p);
    if (serialize(a) !== serialize(b)) problems.push(`${e.type}: two steps of the same inputs differ`);
    return a;
  };
  for (let seed = 1; seed <= 200 && problems.length === 0; seed++) randomRun(seed * 7919, checked);
  t.same(problems.slice(0, 3), []);
});
