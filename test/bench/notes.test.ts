/**
 * The report's notes (bench/notes/*.md, read by bench/lib/notes.ts) are
 * wrapped for reading; the report joins them back, so docs/performance.md
 * does not change when a note is rewrapped.
 */
import t from "tap";
import { NOTES, unwrap } from "../../bench/lib/notes.ts";

t.test("a paragraph's and a list item's line breaks become spaces", async (t) => {
  t.equal(unwrap("one two\nthree\n"), "one two three");
  t.equal(unwrap("- an item\n  that goes on\n- another\n"), "- an item that goes on\n- another");
  t.equal(unwrap("**Lead:**\n- item\n"), "**Lead:**\n- item");
});

t.test("blank lines and table rows keep their place, and a row is never joined to", async (t) => {
  t.equal(unwrap("para\n\nnext para\n"), "para\n\nnext para");
  t.equal(unwrap("intro:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nafter\n"), "intro:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nafter");
  t.equal(unwrap("| a |\ntext\n"), "| a |\ntext");
});

t.test("every note is read, each paragraph and list item on one line", async (t) => {
  const all = [NOTES.summary, NOTES.memory, NOTES.profile, ...Object.values(NOTES.sections), ...Object.values(NOTES.pending)];
  for (const text of all) {
    t.ok(text.length > 0 && text === text.trim());
    t.equal(unwrap(text), text, "unwrapping twice changes nothing");
  }
});
