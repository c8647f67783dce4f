/**
 * Tracks, per ownership generation, which sharded resources still have to
 * relist before the controller's caches reflect the new ranges. The ring
 * member may report a generation ready only after that (design.md, handoff).
 */

export class RelistTracker {
  readonly #pending = new Map<number, Set<string>>();
  readonly #onApplied: (generation: number) => void;

  constructor(onApplied: (generation: number) => void) {
    this.#onApplied = onApplied;
  }

  /**
   * A new generation is enforced; `watched` are the resources that had open
   * watches, each of which must now relist. With none, it is applied at once.
   */
  begin(generation: number, watched: Iterable<string>): void {
    // Older generations are superseded: their relists can no longer complete them.
    for (const g of this.#pending.keys()) if (g < generation) this.#pending.delete(g);
    const set = new Set(watched);
    if (set.size === 0) {
      this.#onApplied(generation);
      return;
    }
    this.#pending.set(generation, set);
  }

  /** `resource` completed a full list (or watch-list initial sync) under `generation`. */
  relisted(resource: string, generation: number): void {
    for (const [g, set] of this.#pending) {
      if (g > generation) continue;
      set.delete(resource);
      if (set.size === 0) {
        this.#pending.delete(g);
        this.#onApplied(g);
      }
    }
  }

  pendingFor(generation: number): readonly string[] {
    return [...(this.#pending.get(generation) ?? [])];
  }
}
