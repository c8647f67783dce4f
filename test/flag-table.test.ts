import t from "tap";
import { parseArgs } from "node:util";
import { switchFlags, valueFlags } from "../src/flag-table.ts";

t.test("a flag table declares each name once, with its kind", async (t) => {
  t.same({ ...valueFlags("a", "b-c"), ...switchFlags("d") }, { a: { type: "string" }, "b-c": { type: "string" }, d: { type: "boolean" } });
  t.same(valueFlags(), {});
});

t.test("parseArgs reads a value flag's value and a switch's presence from the table", async (t) => {
  const options = { ...valueFlags("name"), ...switchFlags("on") };
  t.same(parseArgs({ args: ["--name", "x", "--on"], options, strict: true }).values, { name: "x", on: true });
  t.throws(() => parseArgs({ args: ["--on=1"], options, strict: true }), /--on/, "a switch takes no value");
});
