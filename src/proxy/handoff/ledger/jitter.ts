/**
 * Relist jitter from a small seeded generator (mulberry32), not the global
 * one, with its state in the ledger: a step stays a pure function of its
 * inputs and a seeded run replays exactly. The shell seeds it once.
 */

/** A uniform draw in [0, 1) and the generator's next state. */
export function draw(seed: number): { readonly value: number; readonly seed: number } {
  const next = (seed + 0x6d2b79f5) | 0;
  let r = Math.imul(next ^ (next >>> 15), 1 | next);
  r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
  return { value: ((r ^ (r >>> 14)) >>> 0) / 4294967296, seed: next };
}

/** A delay in [0, windowMs) and the next state; 0 without drawing when there is no window. */
export function jitterDelay(seed: number, windowMs: number): { readonly delayMs: number; readonly seed: number } {
  if (windowMs <= 0) return { delayMs: 0, seed };
  const d = draw(seed);
  return { delayMs: Math.floor(d.value * windowMs), seed: d.seed };
}
