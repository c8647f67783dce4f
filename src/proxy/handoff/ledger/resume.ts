/**
 * Resume points: where this proxy left a cache of a lineage, and under which
 * range epoch. A WATCH resumes from a resourceVersion; the point recorded at
 * that resourceVersion says which ranges the cache it continues was built
 * with (docs/rings.md, "What the proxy must do"). Pure data and functions.
 *
 * Points are recorded when a LIST answers (its resourceVersion), when a
 * watch is narrowed in place (the resourceVersion its synthetic DELETEDs
 * carried), and when a watch ends other than by the proxy's 410 (the
 * client's newest resourceVersion). Several caches may sit at one
 * resourceVersion on a quiet resource (the informer's LIST and a one-off
 * LIST of the same query), so each resume uses up the oldest point not yet
 * used: a one-off LIST must not stand in for the informer's own.
 */

export interface ResumePoint {
  /** Identity, so a watch can refer to the point it resumed from. */
  readonly id: number;
  readonly rv: string;
  readonly epoch: number;
  readonly used: boolean;
}

/** Points grouped by resourceVersion, least recently recorded group first; each group oldest first. */
export type ResumeBook = readonly (readonly ResumePoint[])[];

/** resourceVersions remembered per lineage; a resume comes right after its LIST. */
export const MAX_RESUME_RVS = 32;
/** Points per resourceVersion (caches at the same one). */
export const MAX_POINTS_PER_RV = 8;

function groupOf(book: ResumeBook, rv: string): number {
  return book.findIndex((g) => g[0]?.rv === rv);
}

/** Records `point` as the newest at its resourceVersion, moving that group to the newest end. */
export function remember(book: ResumeBook, point: ResumePoint): ResumeBook {
  const i = groupOf(book, point.rv);
  const group = [...(i < 0 ? [] : (book[i] ?? [])), point].slice(-MAX_POINTS_PER_RV);
  const rest = i < 0 ? book : [...book.slice(0, i), ...book.slice(i + 1)];
  return [...rest, group].slice(-MAX_RESUME_RVS);
}

/** The point with this id, if still remembered. */
export function findPoint(book: ResumeBook, id: number | undefined): ResumePoint | undefined {
  if (id === undefined) return undefined;
  for (const g of book) for (const p of g) if (p.id === id) return p;
  return undefined;
}

function replace(book: ResumeBook, next: ResumePoint): ResumeBook {
  return book.map((g) => (g.some((p) => p.id === next.id) ? g.map((p) => (p.id === next.id ? next : p)) : g));
}

/**
 * The range epoch of the cache a watch resuming from `rv` continues, and the
 * book with that point used up: the oldest unused point at `rv`, else the
 * newest used one (the same cache resuming again), else `fallback` (the
 * lineage's newest epoch: a resume from an event's resourceVersion
 * continues the lineage's last watch) with no point.
 */
export function consume(book: ResumeBook, rv: string, fallback: number | undefined): { epoch: number | undefined; point: ResumePoint | undefined; book: ResumeBook } {
  const g = book[groupOf(book, rv)];
  if (g === undefined || g.length === 0) return { epoch: fallback, point: undefined, book };
  const unused = g.find((p) => !p.used);
  if (unused === undefined) {
    const newest = g[g.length - 1] as ResumePoint;
    return { epoch: newest.epoch, point: newest, book };
  }
  const used = { ...unused, used: true };
  return { epoch: used.epoch, point: used, book: replace(book, used) };
}

/**
 * A watch that resumed from point `own` (if any) is narrowed in place while
 * its client is at `rv`: from now on that cache is of `epoch`. The watch's
 * own point is moved when it is at the same resourceVersion (no event came
 * since), so a re-watch from there is placed; otherwise a new point is
 * recorded. Returns the book and the watch's point from now on.
 */
export function narrowAt(book: ResumeBook, rv: string, epoch: number, own: number | undefined, nextId: number): { book: ResumeBook; point: ResumePoint } {
  const p = findPoint(book, own);
  if (p !== undefined && p.rv === rv) {
    const moved = { ...p, epoch };
    return { book: replace(book, moved), point: moved };
  }
  const point = { id: nextId, rv, epoch, used: false };
  return { book: remember(book, point), point };
}

/**
 * A watch ended (not by the proxy's 410) with its client at `rv`, its cache
 * of `epoch`: the re-watch resumes from there. The watch's own point is
 * reused when it is at the same resourceVersion (repeated watches of a quiet
 * resource must not pile points up), and made unused again: it is the
 * cache's one place to resume from.
 */
export function watchEndAt(book: ResumeBook, rv: string, epoch: number, own: number | undefined, nextId: number): ResumeBook {
  const p = findPoint(book, own);
  if (p !== undefined && p.rv === rv) return replace(book, { ...p, epoch, used: false });
  return remember(book, { id: nextId, rv, epoch, used: false });
}
