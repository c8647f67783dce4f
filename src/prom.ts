/**
 * The prom-client classes shardcar uses, loaded from their own files
 * instead of the package's index.
 *
 * prom-client's index also loads its default metrics, and one of them
 * (processCpuTotal) loads `@opentelemetry/api` for exemplars: together
 * ~8 MB of resident memory in every sidecar, ~7 of them OpenTelemetry,
 * for code shardcar never runs (measured: docs/dependencies.md). These are
 * the same modules the index re-exports, so a `Registry` from either is
 * one class.
 */
import { createRequire } from "node:module";
import type * as Prom from "prom-client";

const require = createRequire(import.meta.url);

export const Registry = require("prom-client/lib/registry") as typeof Prom.Registry;
export type Registry = Prom.Registry;
export const Counter = require("prom-client/lib/counter") as typeof Prom.Counter;
export type Counter<T extends string = string> = Prom.Counter<T>;
export const Gauge = require("prom-client/lib/gauge") as typeof Prom.Gauge;
export type Gauge<T extends string = string> = Prom.Gauge<T>;
export const Histogram = require("prom-client/lib/histogram") as typeof Prom.Histogram;
export type Histogram<T extends string = string> = Prom.Histogram<T>;
