/** Resume points (src/proxy/handoff/ledger/resume.ts): which cache a resume continues, and under which epoch. */
import t from "tap";
import { consume, MAX_POINTS_PER_RV, MAX_RESUME_RVS, narrowAt, remember, watchEndAt, type ResumeBook } from "../../../src/proxy/handoff/ledger/resume.ts";

const point = (id: number, rv: string, epoch: number) => ({ id, rv, epoch, used: false });

t.test("a resume uses up the oldest unused point at its resourceVersion, then the newest used, else the fallback", async (t) => {
  let book: ResumeBook = remember(remember([], point(1, "10", 1)), point(2, "10", 2));
  let c = consume(book, "10", 7);
  t.same([c.epoch, c.point?.id], [1, 1], "the informer's own (older) LIST first: a one-off LIST of the same query must not stand in for it");
  book = c.book;
  c = consume(book, "10", 7);
  t.same([c.epoch, c.point?.id], [2, 2], "then the next");
  c = consume(c.book, "10", 7);
  t.same([c.epoch, c.point?.id], [2, 2], "all used: the newest (the same cache resuming again)");
  c = consume(c.book, "99", 7);
  t.same([c.epoch, c.point], [7, undefined], "another resourceVersion: the fallback, and no point");
});

t.test("a narrowing moves the watch's own point when no event came since, else records one; a watch end makes it the cache's place again", async (t) => {
  let book: ResumeBook = remember([], point(1, "10", 1));
  book = consume(book, "10", undefined).book;
  const moved = narrowAt(book, "10", 2, 1, 5);
  t.same([moved.point.id, moved.point.epoch, moved.point.used], [1, 2, true], "moved in place");
  const fresh = narrowAt(moved.book, "11", 3, 1, 6);
  t.same([fresh.point.id, fresh.point.rv, fresh.point.epoch], [6, "11", 3], "an event came since: a new point");
  const ended = watchEndAt(fresh.book, "11", 3, 6, 7);
  t.same(consume(ended, "11", undefined).point?.id, 6, "reused, and unused again");
  const elsewhere = watchEndAt(ended, "12", 3, 6, 8);
  t.same(consume(elsewhere, "12", undefined).point?.id, 8, "at another resourceVersion: a new point");
});

t.test("the book is bounded: resourceVersions and points per resourceVersion", async (t) => {
  let book: ResumeBook = [];
  for (let i = 0; i < MAX_RESUME_RVS + 5; i++) book = remember(book, point(i, String(i), 1));
  t.equal(book.length, MAX_RESUME_RVS);
  t.equal(consume(book, "0", undefined).point, undefined, "the oldest resourceVersions go first");
  for (let i = 0; i < MAX_POINTS_PER_RV + 3; i++) book = remember(book, point(100 + i, "x", 1));
  t.equal(book.at(-1)?.length, MAX_POINTS_PER_RV);
});
