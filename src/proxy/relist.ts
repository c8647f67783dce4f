/**
 * Tracks which sharded resources still have to relist before the
 * controller's caches reflect the ranges of a generation. The ring member may
 * report a generation applied only after that (design.md, handoff).
 *
 * Two clocks: the ring's *generation* (what the member reports) and the
 * proxy's range *epoch*, which moves only when the enforced ranges change. A
 * generation that keeps the ranges needs no relist, and a relist done under
 * an epoch counts for every generation of that epoch.
 */

interface Pending {
  readonly generation: number;
  readonly epoch: number;
  readonly resources: Set<string>;
}

export class RelistTracker {
  #pending: Pending[] = [];
  readonly #onApplied: (generation: number) => void;

  constructor(onApplied: (generation: number) => void) {
    this.#onApplied = onApplied;
  }

  /**
   * Generation `generation` is now enforced, under range epoch `epoch`;
   * `watched` must relist under that epoch. Resources still owing a relist
   * for an older generation owe it for this one too (they may have no open
   * watch to end right now). With nothing owed, it is applied at once.
   */
  begin(generation: number, epoch: number, watched: Iterable<string>): void {
    const owed = new Set(watched);
    for (const p of this.#pending) for (const r of p.resources) owed.add(r);
    this.#pending = [];
    if (owed.size === 0) {
      this.#onApplied(generation);
      return;
    }
    this.#pending.push({ generation, epoch, resources: owed });
  }

  /** `resource` completed a relist under range epoch `epoch`. */
  relisted(resource: string, epoch: number): void {
    const still: Pending[] = [];
    for (const p of this.#pending) {
      if (p.epoch <= epoch) p.resources.delete(resource);
      if (p.resources.size === 0) this.#onApplied(p.generation);
      else still.push(p);
    }
    this.#pending = still;
  }

  /** Resources still owing a relist for the newest generation. */
  pending(): readonly string[] {
    return [...(this.#pending[0]?.resources ?? [])];
  }
}
