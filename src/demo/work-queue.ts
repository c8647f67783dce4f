/**
 * client-go's work queue, as controllers use it: a key is queued at most
 * once however often it is added, is never handed to two workers at once,
 * and a key added while a worker holds it is handed out again once that
 * worker is done (so the latest state is always reconciled). Failed keys come
 * back after a doubling delay. For the demo's controller and the test
 * controllers.
 */
export class WorkQueue {
  readonly #queue: string[] = [];
  readonly #dirty = new Set<string>();
  readonly #processing = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Set<NodeJS.Timeout>();
  #waiters: Array<(key: string | undefined) => void> = [];
  #shutDown = false;

  add(key: string): void {
    if (this.#shutDown || this.#dirty.has(key)) return;
    this.#dirty.add(key);
    if (this.#processing.has(key)) return;
    this.#hand(key);
  }

  /** Re-adds `key` after a delay that doubles with each failure (5 ms to 1 s, as client-go's default item limiter). */
  addRateLimited(key: string): void {
    const n = this.#failures.get(key) ?? 0;
    this.#failures.set(key, n + 1);
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      this.add(key);
    }, Math.min(5 * 2 ** n, 1_000));
    this.#timers.add(timer);
  }

  /** The key reconciled cleanly: its failure count starts over. */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  /** The next key, once there is one; `undefined` after {@link shutDown}. */
  get(): Promise<string | undefined> {
    const key = this.#queue.shift();
    if (key !== undefined) return Promise.resolve(this.#take(key));
    if (this.#shutDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.#waiters.push((k) => resolve(k === undefined ? undefined : this.#take(k))));
  }

  /** The worker is done with `key`; if it was added meanwhile, it is queued again. */
  done(key: string): void {
    this.#processing.delete(key);
    if (this.#dirty.has(key)) this.#hand(key);
  }

  get length(): number {
    return this.#queue.length;
  }

  shutDown(): void {
    this.#shutDown = true;
    for (const timer of this.#timers) clearTimeout(timer);
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w(undefined);
  }

  #hand(key: string): void {
    const waiter = this.#waiters.shift();
    if (waiter !== undefined) waiter(key);
    else this.#queue.push(key);
  }

  #take(key: string): string {
    this.#dirty.delete(key);
    this.#processing.add(key);
    return key;
  }
}
