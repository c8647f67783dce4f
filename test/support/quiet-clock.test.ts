import t from "tap";
import { QuietClock, TICK_MS } from "./quiet-clock.ts";

// The clock is driven by hand here: its real time and the process's CPU time
// are variables, and every turn of the loop is a call to tick(). (Its own
// ticker also runs, but with both held still it adds nothing.)
function handDriven(): { clock: QuietClock; pass: (ms: number, cpuMs?: number) => void; idle: (ms: number) => void } {
  let real = 1_000_000;
  let cpu = 0;
  const clock = new QuietClock(
    () => real,
    () => cpu,
  );
  t.teardown(() => clock.stop());
  /** `ms` of wall time go by between two turns, `cpuMs` of them spent running this process. */
  const pass = (ms: number, cpuMs = 0): void => {
    real += ms;
    cpu += cpuMs;
    clock.tick();
  };
  /** `ms` of an idle machine: the ticker turns every TICK_MS. */
  const idle = (ms: number): void => {
    for (let i = 0; i < ms / TICK_MS; i++) pass(TICK_MS);
  };
  return { clock, pass, idle };
}

t.test("while the loop turns often, time keeps pace with the wall clock", async (t) => {
  const { clock, idle } = handDriven();
  const start = clock.now();
  idle(1000);
  t.equal(clock.now() - start, 1000);
});

t.test("waiting for a core does not count; the process's own work does", async (t) => {
  const { clock, pass } = handDriven();
  const start = clock.now();
  pass(5_000, 3);
  t.equal(clock.now() - start, TICK_MS + 3, "5 s kept from running count as one tick and the 3 ms it ran");
  pass(800, 800);
  t.equal(clock.now() - start, TICK_MS + 3 + 800, "a turn that computed for 800 ms counts in full");
  pass(10);
  t.equal(clock.now() - start, TICK_MS + 3 + 800 + 10, "and it keeps pace with the wall clock from there");
});

t.test("timers fire in the order they are due, once their time has passed, and not once cancelled", async (t) => {
  const { clock, pass, idle } = handDriven();
  const fired: string[] = [];
  clock.timer(30, () => fired.push("b"));
  clock.timer(20, () => fired.push("a"));
  const cancel = clock.timer(25, () => fired.push("cancelled"));
  cancel();
  idle(10);
  t.same(fired, [], "nothing is due yet");
  pass(30, 30); // one busy turn: both are due at once
  t.same(fired, ["a", "b"]);
});

t.test("a renew deadline survives a stall that outlasts it on the wall clock, and still expires when time really passes", async (t) => {
  const { clock, pass, idle } = handDriven();
  let expired = false;
  clock.timer(1_200, () => (expired = true));
  pass(3_000); // the whole process was kept from running
  t.notOk(expired, "3 s without a core are one tick");
  idle(1_200);
  t.ok(expired, "1.2 s of turning loop later it has expired");
});

t.test("sleep resolves when due, or at once when its signal aborts; every() repeats until stopped", async (t) => {
  const { clock, idle } = handDriven();
  let slept = false;
  const sleeping = clock.sleep(100).then(() => (slept = true));
  idle(50);
  await Promise.resolve();
  t.notOk(slept);
  idle(50);
  await sleeping;
  t.ok(slept);
  const abort = new AbortController();
  const aborted = clock.sleep(60_000, abort.signal);
  abort.abort();
  await aborted;
  t.pass("an aborted sleep resolved without time passing");
  let n = 0;
  const stop = clock.every(10, () => n++);
  idle(50);
  stop();
  idle(50);
  t.equal(n, 5);
});
