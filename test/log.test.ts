/**
 * A component that names itself in its logger (src/log.ts childLogger)
 * never prints a key twice, whatever its caller already bound.
 */
import t from "tap";
import { childLogger, createLogger } from "../src/log.ts";
import { duplicateKeys } from "./support/log-lines.ts";

function capture(): { lines: string[]; destination: { write(s: string): void } } {
  const lines: string[] = [];
  return { lines, destination: { write: (s: string) => void lines.push(s.trim()) } };
}

t.test("a child binding a key its parent bound already keeps the parent's, once", async (t) => {
  const out = capture();
  const root = createLogger({ name: "test", destination: out.destination });
  childLogger(childLogger(root.child({ component: "manager" }), { component: "ring-coordinator", identity: "m-0" }), { ring: "ns/web" }).info("one line");
  t.equal(out.lines.length, 1);
  t.same(duplicateKeys(out.lines[0] ?? ""), [], out.lines[0] ?? "");
  t.match(JSON.parse(out.lines[0] ?? "{}"), { component: "manager", identity: "m-0", ring: "ns/web" }, "the caller's name wins; the new keys are added");
  // What pino does without it: the check above can fail.
  root.child({ component: "a" }).child({ component: "b" }).info("two");
  t.same(duplicateKeys(out.lines[1] ?? ""), ["component"], "pino's own child repeats the key");
});
