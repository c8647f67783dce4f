/**
 * The hand-written half of docs/performance.md: why a target is missed and
 * what will fix it, what is not measured yet and why, and the profiling log
 * (before/after of each hot-path change). Kept next to the benches so a
 * change to a measurement and to its explanation land together.
 */

export interface Notes {
  /** Under the summary table. */
  readonly summary: string;
  /** Under each target's section, by id. */
  readonly sections: Readonly<Record<string, string>>;
  /** Shown instead of figures when a target has none yet, by id. */
  readonly pending: Readonly<Record<string, string>>;
  /** The "Profiling the hot paths" section. */
  readonly profile: string;
}

export const NOTES: Notes = {
  summary: "",
  sections: {},
  pending: {},
  profile: "",
};
