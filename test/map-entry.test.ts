import t from "tap";
import { entryOf } from "../src/map-entry.ts";

t.test("a map's entry is made once, on first ask, from its key, and kept", async (t) => {
  const map = new Map<string, { key: string }>();
  let made = 0;
  const make = (key: string): { key: string } => {
    made++;
    return { key };
  };
  const first = entryOf(map, "a", make);
  t.same(first, { key: "a" });
  t.equal(entryOf(map, "a", make), first, "the same entry the second time");
  t.equal(made, 1, "made once");
  t.equal(map.get("a"), first, "stored in the map");
  t.not(entryOf(map, "b", make), first, "each key its own");
});
