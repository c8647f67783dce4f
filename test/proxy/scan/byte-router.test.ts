import t from "tap";
import { ByteRouter, EMIT, HOLD, SKIP } from "../../../src/proxy/scan/byte-router.ts";

const text = (bufs: readonly Buffer[]): string => Buffer.concat(bufs).toString();
const tooLarge = (pos: number): Error => new Error(`too large at ${pos}`);

t.test("each byte goes where the mode in force at it says, across chunks", async (t) => {
  const r = new ByteRouter(EMIT, 100, tooLarge);
  r.begin(Buffer.from("ab[cd"), 0);
  r.switchTo(SKIP, 2); // "ab" out
  r.switchTo(HOLD, 3); // "[" skipped
  r.switchTo(r.mode, 5); // end of chunk: "cd" held
  t.equal(text(r.take()), "ab");
  r.begin(Buffer.from("ef]gh"), 5);
  r.switchTo(EMIT, 7); // "ef" held too
  t.equal(text(r.held), "cdef", "a held range spans chunks");
  t.equal(r.heldStart, 3, "heldStart is the absolute offset of the first held byte");
  r.releaseHeld();
  r.switchTo(r.mode, 10);
  t.equal(text(r.take()), "cdef]gh", "released bytes come before what is emitted after them");
  t.same(r.take(), [], "take empties the output");
});

t.test("holding more than the limit throws the filter's own error at the switch position", async (t) => {
  const r = new ByteRouter(HOLD, 4, tooLarge);
  r.begin(Buffer.from("abcdef"), 10);
  r.switchTo(HOLD, 14);
  t.equal(text(r.held), "abcd", "exactly the limit is accepted");
  t.throws(() => r.switchTo(EMIT, 15), /too large at 15/);
});

t.test("restart forgets the held bytes and does not route the bytes before it", async (t) => {
  const r = new ByteRouter(HOLD, 100, tooLarge);
  r.begin(Buffer.from("event\n"), 0);
  r.switchTo(HOLD, 3);
  r.restart(SKIP, 5);
  t.same(r.held, []);
  t.equal(r.mode, SKIP);
  r.switchTo(EMIT, 5);
  r.switchTo(EMIT, 6);
  t.equal(text(r.take()), "\n", "only what follows the restart position is routed");
});

t.test("a leading held byte is dropped only when it is the one named", async (t) => {
  const r = new ByteRouter(HOLD, 100, tooLarge);
  r.begin(Buffer.from(",{}"), 0);
  r.switchTo(HOLD, 1);
  r.switchTo(HOLD, 3);
  t.notOk(r.dropLeadingHeld(0x7b), "not a '{'");
  t.ok(r.dropLeadingHeld(0x2c), "the comma");
  t.equal(text(r.held), "{}");
  t.equal(r.heldStart, 1);
  t.notOk(r.dropLeadingHeld(0x2c), "no second comma");
});

t.test("replaced held bytes are what goes out, and count against the limit", async (t) => {
  const r = new ByteRouter(HOLD, 10, tooLarge);
  r.begin(Buffer.from('{"a":1,"b":2}'), 0);
  r.switchTo(HOLD, 7);
  r.replaceHeld([Buffer.from("{"), Buffer.from("")]);
  t.equal(text(r.takeHeld()), "{");
  t.same(r.held, [], "takeHeld empties what is held");
  r.replaceHeld([Buffer.from("123456789")]);
  t.throws(() => r.switchTo(HOLD, 9), /too large at 9/, "9 replaced bytes plus 2 new exceed 10");
});

t.test("dropping, releasing or taking what is held starts the limit again", async (t) => {
  for (const clear of ["dropHeld", "releaseHeld", "takeHeld"] as const) {
    const r = new ByteRouter(HOLD, 4, tooLarge);
    r.begin(Buffer.from("abcdefgh"), 0);
    r.switchTo(HOLD, 4);
    r[clear]();
    t.doesNotThrow(() => r.switchTo(HOLD, 8), `${clear}: four new bytes fit a limit of four`);
  }
});

t.test("restart does not hold the bytes before it, so they never count against the limit", async (t) => {
  const r = new ByteRouter(HOLD, 4, tooLarge);
  r.begin(Buffer.from("0123456789"), 0);
  r.restart(HOLD, 8);
  t.doesNotThrow(() => r.switchTo(EMIT, 10));
  t.equal(text(r.held), "89");
});
