import t from "tap";
import { BookmarkPacer, compareResourceVersions, type DroppedObject } from "../../../src/proxy/scan/bookmark-pacer.ts";

const obj = (rv: string): DroppedObject => ({ resourceVersion: rv, kind: "Pod", apiVersion: "v1" });

t.test("resourceVersions compare numerically when both are decimal, and not at all otherwise", async (t) => {
  const rows: Array<[string, string, number | undefined]> = [
    ["9", "10", -1],
    ["10", "9", 1],
    ["100", "100", 0],
    ["0100", "100", 0],
    ["18446744073709551616", "18446744073709551615", 1],
    ["abc", "10", undefined],
    ["10", "", undefined],
    ["1e3", "10", undefined],
  ];
  for (const [a, b, want] of rows) {
    const got = compareResourceVersions(a, b);
    t.equal(got === undefined ? undefined : Math.sign(got), want, `${a} vs ${b}`);
  }
});

type Step =
  | { at: number; passed: string; initialEnd?: boolean }
  | { at: number; dropped: string | undefined; want?: string }
  | { at: number; flush: true; want?: string };

interface Row {
  name: string;
  allowBookmarks?: boolean;
  initialEvents?: boolean;
  intervalMs?: number;
  steps: Step[];
}

// Each step's `want` is the RV of the synthetic bookmark expected right then (none if absent).
const ROWS: Row[] = [
  { name: "the first drop is due at once", steps: [{ at: 0, dropped: "5", want: "5" }] },
  { name: "nothing without allowWatchBookmarks", allowBookmarks: false, steps: [{ at: 0, dropped: "5" }, { at: 5000, dropped: "6" }, { at: 9000, flush: true }] },
  {
    name: "inside the interval a drop waits; the latest one wins at the next due drop",
    steps: [{ at: 0, dropped: "5", want: "5" }, { at: 10, dropped: "6" }, { at: 20, dropped: "7" }, { at: 1000, dropped: "8", want: "8" }],
  },
  { name: "a remembered drop goes out at a clean end once due", steps: [{ at: 0, dropped: "5", want: "5" }, { at: 10, dropped: "6" }, { at: 1010, flush: true, want: "6" }] },
  { name: "...but not before it is due", steps: [{ at: 0, dropped: "5", want: "5" }, { at: 10, dropped: "6" }, { at: 500, flush: true }] },
  // Opaque RVs, so only supersession (not RV order) can hold the drop back.
  { name: "a passed event supersedes a remembered drop", steps: [{ at: 0, dropped: "a", want: "a" }, { at: 10, dropped: "b" }, { at: 20, passed: "c" }, { at: 2000, flush: true }] },
  { name: "never older than what passed", steps: [{ at: 0, passed: "100" }, { at: 10, dropped: "90" }, { at: 5000, dropped: "99" }, { at: 9000, dropped: "101", want: "101" }] },
  { name: "never the same RV as what passed", steps: [{ at: 0, passed: "100" }, { at: 10, dropped: "100" }] },
  { name: "opaque RVs rely on stream order", steps: [{ at: 0, passed: "b" }, { at: 10, dropped: "a", want: "a" }] },
  { name: "a drop without an RV only gives a remembered one its chance", steps: [{ at: 0, dropped: "5", want: "5" }, { at: 10, dropped: "6" }, { at: 2000, dropped: undefined, want: "6" }] },
  {
    name: "with initial events, nothing until the initial-events-end bookmark has passed",
    initialEvents: true,
    steps: [{ at: 0, dropped: "50" }, { at: 5000, passed: "20" }, { at: 9000, dropped: "70" }, { at: 9500, flush: true }, { at: 10_000, passed: "80", initialEnd: true }, { at: 10_001, dropped: "81", want: "81" }],
  },
  {
    name: "drops from the initial phase are not remembered past its end",
    initialEvents: true,
    steps: [{ at: 0, dropped: "50" }, { at: 10, passed: "80", initialEnd: true }, { at: 5000, flush: true }],
  },
  { name: "a custom interval", intervalMs: 100, steps: [{ at: 0, dropped: "5", want: "5" }, { at: 50, dropped: "6" }, { at: 100, dropped: "7", want: "7" }] },
];

t.test("synthetic bookmark pacing, row by row", async (t) => {
  for (const row of ROWS) {
    const pacer = new BookmarkPacer({ allowBookmarks: row.allowBookmarks ?? true, initialEvents: row.initialEvents ?? false, intervalMs: row.intervalMs ?? 1000 });
    row.steps.forEach((step, i) => {
      if ("passed" in step) {
        pacer.passed(step.passed, step.initialEnd === true);
        return;
      }
      const got = "flush" in step ? pacer.flush(step.at) : pacer.dropped(step.dropped === undefined ? undefined : obj(step.dropped), step.at);
      t.equal(got?.resourceVersion, step.want, `${row.name}: step ${i}`);
    });
  }
});

t.test("initialEventsDone reports the phase", async (t) => {
  const pacer = new BookmarkPacer({ allowBookmarks: true, initialEvents: true, intervalMs: 1000 });
  t.notOk(pacer.initialEventsDone);
  pacer.passed("1", false);
  t.notOk(pacer.initialEventsDone, "an ordinary event does not end it");
  pacer.passed("2", true);
  t.ok(pacer.initialEventsDone);
  t.ok(new BookmarkPacer({ allowBookmarks: true, initialEvents: false, intervalMs: 1 }).initialEventsDone, "no initial events: done from the start");
});
