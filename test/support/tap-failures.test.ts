import t from "tap";
import { failedTests, tapSummary } from "./tap-failures.ts";

// Shaped like tap 21's output for two files run with --jobs=2: nested
// subtests, a `#` in a name, diagnostics that quote "not ok" source lines,
// a TODO, a timeout and a crashed file.
const OUTPUT = `TAP version 14
1..3
# Subtest: test/a.test.ts
    # Subtest: outer \\# with hash
        not ok 1 - inner fails
          ---
          source: |
            t.test("x", async (t) => {
                not ok 7 - quoted from the source, not a result
            })
          ...

        # Subtest: deeper
            not ok 1 - deep fail
              ---
              at:
                lineNumber: 2
              ...
            ok 2 - passes
            1..2
        not ok 2 - deeper # time=6.124ms
          ---
          ...
        ok 3 - fine
        1..3
    not ok 1 - outer \\# with hash # time=31.645ms
      ---
      ...
    not ok 2 - todo one # TODO later
    ok 3 - skipped one # SKIP not here
    # Subtest: hangs
        ok 1 - started
    not ok 4 - hangs # time=180000ms
    not ok 5 - timeout!
    1..5
not ok 1 - test/a.test.ts # time=46.717ms
  ---
  exitCode: 1
  ...
# Subtest: test/b.test.ts
    ok 1 - fine
    1..1
ok 2 - test/b.test.ts # time=10ms
# Subtest: test/c.test.ts
    1..0 # no tests found
not ok 3 - test/c.test.ts # time=1759.557ms
  ---
  exitCode: 1
  ...

# { total: 9, pass: 3, fail: 5, skip: 1, todo: 1 }
# time=2000ms
`;

t.test("every failed test is named by its path from the file down, once, at its deepest failing point", async (t) => {
  t.same(failedTests(OUTPUT), [
    ["test/a.test.ts", "outer # with hash", "inner fails"],
    ["test/a.test.ts", "outer # with hash", "deeper", "deep fail"],
    ["test/a.test.ts", "hangs"],
    ["test/a.test.ts", "timeout!"],
    ["test/c.test.ts"],
  ]);
});

t.test("a run with no failure names none, TODO and SKIP included", async (t) => {
  t.same(failedTests("TAP version 14\n# Subtest: f\n    ok 1 - a\n    not ok 2 - b # TODO soon\n    ok 3 - c # SKIP\n    1..3\nok 1 - f # time=1ms\n"), []);
});

t.test("the closing summary is read field by field; a run cut short has none", async (t) => {
  t.same(tapSummary(OUTPUT), { total: 9, pass: 3, fail: 5, skip: 1, todo: 1 });
  t.same(tapSummary("# { total: 4, pass: 4 }\n"), { total: 4, pass: 4, fail: 0, skip: 0, todo: 0 });
  t.equal(tapSummary(OUTPUT.slice(0, OUTPUT.indexOf("# { total"))), undefined);
});
