/**
 * Waiting for a condition, the one way tests wait: poll until it holds.
 *
 * The deadline is a hang guard that names what never happened; it is not a
 * bound the test asserts, and it is measured on {@link clusterClock}, so a
 * loaded machine's stalls do not use it up (see QuietClock). A test that must
 * show something happens within a time asserts that separately, on the
 * clock of the code it tests.
 */
import { QuietClock } from "./quiet-clock.ts";

/** The time of the one simulated cluster in this test process; the ring tests hand it to every member and leader. */
export const clusterClock = new QuietClock();

/** Polls `cond` every `everyMs` until it holds; throws naming `what` after `withinMs` of {@link clusterClock} time. */
export async function until(what: string, cond: () => boolean | Promise<boolean>, withinMs = 30_000, everyMs = 25): Promise<void> {
  if (!(await eventually(cond, withinMs, everyMs))) throw new Error(`timed out after ${withinMs} ms waiting for ${what}`);
}

/** Polls `cond` until it holds or `withinMs` of {@link clusterClock} time pass; returns whether it held. */
export async function eventually(cond: () => boolean | Promise<boolean>, withinMs = 30_000, everyMs = 50): Promise<boolean> {
  const end = clusterClock.now() + withinMs;
  while (clusterClock.now() < end) {
    if (await cond()) return true;
    await clusterClock.sleep(everyMs);
  }
  return cond();
}
