/**
 * What each of the ring's shells (coordinator.ts, member.ts, labeller.ts)
 * takes from its process. All optional, so a test gives only what it reads.
 */
import type { Registry } from "prom-client";
import type { Logger } from "../log.ts";
import type { Clock } from "./clock.ts";

export interface RingShellOptions {
  /** Where its metrics register; none without it. */
  readonly registry?: Registry | undefined;
  /** Default: the system clock. */
  readonly clock?: Clock | undefined;
  /** Default: silent. */
  readonly log?: Logger | undefined;
}
