/**
 * `shardcar manager`'s label-rate flags, and how they combine:
 *
 * - `--label-rate N`: the ceiling, the most slot-label PATCHes begun in any
 *   one second (default {@link DEFAULT_LABEL_RATE}). The flag a user lowers
 *   to be gentle, so it bounds what the apiserver sees; under it the rate
 *   adapts (`src/ring/label-rate.ts`).
 * - `--label-rate-min N`: the floor, where the rate starts and what it never
 *   halves below; rarely set (default a tenth of the ceiling, at most 20/s).
 *   Above the ceiling it is refused.
 * - `--label-rate-max N`: the ceiling's former name (when `--label-rate` was
 *   the floor), kept so that a deployment that sets it alone keeps its
 *   ceiling. Beside `--label-rate` the two must agree: `--label-rate 20
 *   --label-rate-max 500` meant "from 20 up to 500" and now reads as two
 *   different ceilings, so it is refused with the spelling of the old meaning
 *   rather than guessed.
 */
import { DEFAULT_LABEL_RATE } from "../ring/labeller.ts";
import { intFlag, UsageError } from "./flags.ts";

const MAX = 10_000;

export interface LabelRateFlagValues {
  readonly "label-rate"?: string | undefined;
  readonly "label-rate-min"?: string | undefined;
  readonly "label-rate-max"?: string | undefined;
}

export interface LabelRates {
  /** The ceiling, per second. */
  readonly maxRatePerSecond: number;
  /** The floor, per second; undefined for the default. */
  readonly minRatePerSecond: number | undefined;
  /** Said once at start-up: the flags used a deprecated name. */
  readonly warning: string | undefined;
}

export function labelRateFlags(values: LabelRateFlagValues): LabelRates {
  const rate = values["label-rate"] === undefined ? undefined : intFlag("--label-rate", values["label-rate"], DEFAULT_LABEL_RATE, 1, MAX);
  const legacy = values["label-rate-max"] === undefined ? undefined : intFlag("--label-rate-max", values["label-rate-max"], DEFAULT_LABEL_RATE, 1, MAX);
  if (rate !== undefined && legacy !== undefined && rate !== legacy) {
    const former = rate < legacy ? `; for what they used to mean (start at ${rate}/s, climb to at most ${legacy}/s) set --label-rate ${legacy} --label-rate-min ${rate}` : "";
    throw new UsageError("--label-rate-max", `--label-rate ${rate} and --label-rate-max ${legacy} disagree: --label-rate is the most PATCHes per second and --label-rate-max its former name, so give one${former}`);
  }
  const ceiling = rate ?? legacy ?? DEFAULT_LABEL_RATE;
  const ceilingFlag = rate === undefined && legacy !== undefined ? "--label-rate-max" : "--label-rate";
  const floor = values["label-rate-min"] === undefined ? undefined : intFlag("--label-rate-min", values["label-rate-min"], 1, 1, MAX);
  if (floor !== undefined && floor > ceiling) {
    throw new UsageError("--label-rate-min", `invalid --label-rate-min ${floor}: above ${ceilingFlag} ${ceiling}, the most PATCHes per second`);
  }
  return {
    maxRatePerSecond: ceiling,
    minRatePerSecond: floor,
    warning: legacy === undefined ? undefined : `--label-rate-max is deprecated: it is --label-rate now (the most PATCHes per second); use --label-rate ${ceiling}`,
  };
}
