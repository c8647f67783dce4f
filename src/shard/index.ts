/**
 * Pure shard maths: FNV-1a 64, half-open ranges on `[0, 2^64)`, KEP-5866
 * selectors, and the parsing of sharding configuration.
 *
 * Never does I/O, never reads a clock or the environment. Everything here is
 * a function of its arguments, so it is tested with vectors and properties.
 *
 * @packageDocumentation
 */
export * from "./hash.ts";
export * from "./range.ts";
export * from "./selector.ts";
export * from "./slots.ts";
export * from "./spec.ts";
export * from "./table.ts";
