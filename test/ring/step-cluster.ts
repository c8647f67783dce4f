/**
 * A leader and its members in one process, stepped on a simulated clock the
 * way the coordinator steps `step` (src/ring/handoff.ts): every member
 * reports at once what it follows. For the tests of many members at once
 * (cold-start.test.ts, rolling-update.test.ts).
 */
import { initialState, Phase, step, follow, tablesOf, type HandoffPolicy, type MemberObservation, type RingState } from "../../src/ring/handoff.ts";
import { MemberState } from "../../src/ring/state.ts";
import { HandoffMode } from "../../src/ring/table.ts";
import { publishedBy } from "./table-diff.ts";

export const T0 = 1_000_000;
export const QUIET = 3_000;
export const MAX = 10_000;
export const POLICY: HandoffPolicy = { timeoutMs: 60_000, backoffMs: 1_000, maxBackoffMs: 60_000, relistBudget: 1, settleQuietMs: QUIET, settleMaxMs: MAX };

export interface Member {
  state: MemberState;
  applied: number;
}

/** A leader and its members, stepped every `tickMs`; members report what they follow at once. */
export class Cluster {
  state: RingState;
  now = T0;
  readonly pool = new Map<string, Member>();
  /** Every table published, with what it was planned against. */
  readonly published: ReturnType<typeof publishedBy> = [];
  /** When each of them was published. */
  readonly publishedAt: number[] = [];
  /** For each member, the most slots it was ever asked to enforce. */
  readonly peak = new Map<string, number>();

  readonly mode: HandoffMode;

  constructor(slotCount: number, mode: HandoffMode, policy: HandoffPolicy = POLICY) {
    this.mode = mode;
    this.state = initialState({ slotCount, policy });
  }

  observations(): MemberObservation[] {
    return [...this.pool].map(([name, m]) => ({ name, state: m.state, applied: m.applied }));
  }

  step(): void {
    const before = this.state;
    const res = step(this.state, { type: "observe", members: this.observations() }, this.now, this.mode);
    this.state = res.state;
    for (const p of publishedBy(before, this.state, res.effects)) {
      this.published.push(p);
      this.publishedAt.push(this.now);
    }
    const tables = tablesOf(this.state);
    for (const [name, m] of this.pool) {
      const target = follow({ generation: 0, slots: [] }, tables, name);
      this.peak.set(name, Math.max(this.peak.get(name) ?? 0, target.slots.length));
      m.applied = Math.max(m.applied, target.generation);
    }
  }

  /** Steps until `ms` passed, every `tickMs`. */
  run(ms: number, tickMs = 100): void {
    for (const end = this.now + ms; this.now < end; this.now += tickMs) this.step();
  }

  stable(): boolean {
    const ready = [...this.pool].filter(([, m]) => m.state === MemberState.Ready).map(([n]) => n);
    return this.state.pending === undefined && this.state.phase === Phase.Stable && ready.every((n) => this.state.committed.owners.includes(n)) && this.state.committed.owners.every((o) => o !== undefined && ready.includes(o));
  }
}

