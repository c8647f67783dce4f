/**
 * The ring's shell files read and sleep with the process-wide clock
 * abstraction (`src/clock.ts`); re-exported here so ring code keeps one
 * import path.
 */
export { systemClock, type Clock } from "../clock.ts";
