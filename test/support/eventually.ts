/**
 * Waiting for a condition instead of a fixed delay. Its own module, so that a
 * test can wait without importing cluster.ts (and client-node with it).
 */

/** Polls `cond` until it holds or `timeoutMs` passes; returns whether it held. */
export async function eventually(cond: () => boolean, timeoutMs: number, everyMs = 50): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return cond();
}
