/**
 * The seam between "who owns what" (static flags, or the lease ring) and the
 * proxy that enforces it. The proxy only ever asks for the current ranges and
 * listens for changes; it never knows where they came from.
 *
 * It lives in the pure core, not in proxy/, because both sides implement or
 * consume it: the ring member (ring/) provides it and the proxy reads it, and
 * neither folder may import the other for a type.
 */
import type { Range } from "./range.ts";

export interface Ownership {
  /** Table generation these ranges belong to; 0 for static modes. */
  readonly generation: number;
  /** Normalised ranges this replica must deliver. Empty means "own nothing". */
  readonly ranges: readonly Range[];
}

export interface OwnershipSource {
  /** The ranges to enforce right now. Never blocks. */
  current(): Ownership;
  /**
   * Calls `listener` after every change, with the new and previous value.
   * Returns an unsubscribe function. Listeners must not throw.
   */
  subscribe(listener: (next: Ownership, prev: Ownership) => void): () => void;
  /**
   * Called by the proxy once every sharded resource the controller was
   * watching has relisted under `generation`'s ranges (so its cache holds the
   * new shard). Ring members report this on their Lease; static sources
   * ignore it. May be called more than once per generation.
   */
  markApplied?(generation: number): void;
}

/** Fixed ranges for the life of the process (`i/N`, `ordinal/N`, a selector). */
export class StaticOwnership implements OwnershipSource {
  readonly #value: Ownership;
  constructor(ranges: readonly Range[]) {
    this.#value = Object.freeze({ generation: 0, ranges });
  }
  current(): Ownership {
    return this.#value;
  }
  subscribe(): () => void {
    return () => {};
  }
}

/**
 * Ownership that tests, the demo and the ring member set by hand. Changes are
 * delivered synchronously, in subscription order.
 */
export class MutableOwnership implements OwnershipSource {
  #value: Ownership;
  readonly #listeners = new Set<(next: Ownership, prev: Ownership) => void>();
  readonly applied: number[] = [];
  constructor(initial: Ownership) {
    this.#value = initial;
  }
  current(): Ownership {
    return this.#value;
  }
  set(next: Ownership): void {
    const prev = this.#value;
    this.#value = next;
    for (const l of this.#listeners) l(next, prev);
  }
  subscribe(listener: (next: Ownership, prev: Ownership) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
  markApplied(generation: number): void {
    this.applied.push(generation);
  }
}
