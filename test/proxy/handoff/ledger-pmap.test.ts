/** The ledger's persistent map (src/proxy/handoff/ledger/pmap.ts): what a plain Map would hold, and never changed once made. */
import t from "tap";
import { PMap } from "../../../src/proxy/handoff/ledger/pmap.ts";
import { rng } from "../../support/rng.ts";

const content = (m: Iterable<[number, string]>): Array<[number, string]> => [...m].sort((a, b) => a[0] - b[0]);

t.test("random edits hold what a Map would, through compactions, and every earlier map stays as it was", async (t) => {
  const rand = rng(20261201);
  let p = PMap.of<number, string>();
  const m = new Map<number, string>();
  const history: Array<{ map: PMap<number, string>; want: Array<[number, string]> }> = [];
  for (let stepNo = 0; stepNo < 3000; stepNo++) {
    const d = p.edit();
    for (let k = 0; k < 1 + Math.floor(rand() * 4); k++) {
      const key = Math.floor(rand() * 300);
      if (rand() < 0.3) t.equal(d.delete(key), m.delete(key), "delete reports what a Map does");
      else {
        const v = `v${stepNo}-${k}`;
        d.set(key, v);
        m.set(key, v);
      }
      if (d.get(key) !== m.get(key) || d.has(key) !== m.has(key) || d.size !== m.size) t.fail(`the draft reads like the Map at step ${stepNo}`);
    }
    p = d.done();
    if (p.size !== m.size) t.fail(`size at step ${stepNo}`);
    if (stepNo % 100 === 0) history.push({ map: p, want: content(m) });
  }
  t.same(content(p), content(m), "the final map holds what the Map holds");
  t.same([...p.keys()].sort((a, b) => a - b), [...m.keys()].sort((a, b) => a - b), "keys");
  for (const h of history) t.same(content(h.map), h.want, "an earlier map is unchanged by later edits");
});

t.test("iteration: the base's order, then new keys in the order they were set", async (t) => {
  const p = PMap.of([
    [1, "a"],
    [2, "b"],
    [3, "c"],
  ]);
  const d = p.edit();
  d.set(9, "z").set(2, "B");
  d.delete(1);
  d.set(5, "e");
  t.same([...d.done()], [
    [2, "B"],
    [3, "c"],
    [9, "z"],
    [5, "e"],
  ]);
  t.same([...p], [
    [1, "a"],
    [2, "b"],
    [3, "c"],
  ], "the map it was drafted from is untouched");
});
