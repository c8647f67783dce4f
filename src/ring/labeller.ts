/**
 * The manager's side of label slots, as thin shells around the pure files:
 *
 * - {@link watchLabelSlotConfig}: every manager replica watches the
 *   ShardRings and keeps the labels-mode config ({@link labelSlotConfig})
 *   for its stamping webhook;
 * - {@link Labeller}: on the leader only (a {@link LeaderTask} of the
 *   coordinator), a metadata-only list+watch of each labelled resource fed
 *   into `labelling.ts`'s `step`, whose PATCHes it sends, whose wake-ups it
 *   schedules, and whose counts it exports as metrics and, through the
 *   coordinator's status write, as each ring's `Labelled` condition and
 *   `status.labelling`.
 */
import { Counter, Gauge, Histogram, type Registry } from "../prom.ts";
import type { ApiClient } from "../kube/client.ts";
import { childLogger, silentLogger, type Logger } from "../log.ts";
import { SLOT_LABEL_PREFIX } from "../shard/slots.ts";
import { systemClock, type Clock } from "./clock.ts";
import { decodeRing, describe, EventSink, httpStatus, isConflict, isNotFound, RingApi, watchObjects, type RingObject } from "./kube.ts";
import { labelSlotConfig, type LabelSlotConfig } from "./label-slots.ts";
import { achievedRate, rateBounds } from "./label-rate.ts";
import { initialLabelling, labelledResources, labelledVerdict, labellingStatus, progress, step, type LabellingEffect, type LabellingEvent, type LabellingPolicy, type LabellingState, type LabelRateNow, type ObjectMeta, type PatchResult, type RingProgress } from "./labelling.ts";
import type { LeaderTask, RingStatusExtra } from "./coordinator.ts";
import type { RingCondition } from "./table.ts";
import { isRecord } from "../is-record.ts";
import type { RingShellOptions } from "./shell-options.ts";

export interface LabelSlotSource {
  /** `undefined` until the first ShardRing list. */
  current(): LabelSlotConfig | undefined;
  /** Calls `fn` after every change; returns an unsubscribe function. */
  subscribe(fn: () => void): () => void;
}

/** Watches every ShardRing in `namespace` (all when undefined) and keeps the labels-mode config. */
export function watchLabelSlotConfig(api: ApiClient, namespace: string | undefined, clock: Clock, log: Logger): LabelSlotSource & { stop(): void; synced: Promise<void> } {
  let config: LabelSlotConfig | undefined;
  const listeners = new Set<() => void>();
  const rings = new RingApi(api);
  const w = watchObjects<RingObject>({
    api,
    path: RingApi.path(namespace),
    list: () => rings.list(namespace),
    decode: decodeRing,
    clock,
    log,
    onChange: (objs) => {
      config = labelSlotConfig(objs.values());
      for (const fn of listeners) fn();
    },
  });
  return {
    current: () => config,
    subscribe(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    stop: w.stop,
    synced: w.synced,
  };
}

// A backfill is a stream of writes beside the controllers' own.
// `--label-rate` is the ceiling, the most PATCHes begun in any one second:
// the flag a user lowers to be gentle must bound what the apiserver sees.
// Its default, 500/s, labels 200,000 objects in about seven minutes
// (docs/performance.md, S2); at a fixed 20/s (kube-controller-manager's
// default client rate) that would take nearly three hours. Under the
// ceiling the target adapts (label-rate.ts): it starts at 20/s (the
// ceiling if lower), doubles each second while PATCHes come back fast until
// the apiserver first pushes back, then climbs by the floor; a PATCH slower
// than 250 ms, or a 429 from API Priority and Fairness, halves it, not below
// the floor (`--label-rate-min`, by default a tenth of the ceiling, at most
// 20/s).
export const DEFAULT_LABEL_RATE = 500;
export const DEFAULT_LABEL_BURST = 20;
const DEFAULT_SLOW_PATCH_MS = 250;
// Enough for the ceiling at the slow bound's fraction of a PATCH's time:
// 500/s at 16 ms each is 8 at once.
const DEFAULT_MAX_IN_FLIGHT = 8;
const DEFAULT_POLICY: LabellingPolicy = { maxRatePerSecond: DEFAULT_LABEL_RATE, slowPatchMs: DEFAULT_SLOW_PATCH_MS, burst: DEFAULT_LABEL_BURST, maxInFlight: DEFAULT_MAX_IN_FLIGHT, retryMinMs: 500, retryMaxMs: 30_000 };
// Counts in status are at most this old; the condition's verdict (True,
// False, its reason) is written at once. Every count change would otherwise
// be a status write, one per PATCH.
const DEFAULT_REPORT_MS = 5_000;
const METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
const METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const CALL_TIMEOUT_MS = 30_000;
const DISCOVERY_RETRY_MS = 5_000;

export interface LabellerOptions extends RingShellOptions {
  readonly api: ApiClient;
  readonly source: LabelSlotSource;
  readonly policy?: Partial<LabellingPolicy> | undefined;
  readonly reportIntervalMs?: number | undefined;
}

interface LabellerMetrics {
  readonly unlabelled: Gauge<"namespace" | "ring" | "resource">;
  readonly patches: Counter<"resource" | "outcome">;
  readonly listErrors: Counter<"resource">;
  readonly delay: Histogram<"resource">;
  readonly rate: Gauge;
  readonly target: Gauge;
  readonly backoffs: Counter;
}

function metricsOf(registry: Registry): LabellerMetrics {
  const get = <T>(name: string, make: () => T): T => (registry.getSingleMetric(name) as T | undefined) ?? make();
  return {
    unlabelled: get("shardcar_ring_unlabelled_objects", () => new Gauge({ name: "shardcar_ring_unlabelled_objects", help: "Objects of a labels-mode ring's resource without the right slot label (absent or wrong): each is in no proxy's cache until labelled.", labelNames: ["namespace", "ring", "resource"], registers: [registry] })),
    patches: get("shardcar_labeller_patches_total", () => new Counter({ name: "shardcar_labeller_patches_total", help: "Slot-label PATCHes by outcome: labelled, conflict (the object changed; judged again), gone (deleted), error.", labelNames: ["resource", "outcome"], registers: [registry] })),
    listErrors: get("shardcar_labeller_list_errors_total", () => new Counter({ name: "shardcar_labeller_list_errors_total", help: "Failed metadata lists or watches of a labelled resource (retried).", labelNames: ["resource"], registers: [registry] })),
    rate: get("shardcar_labeller_rate", () => new Gauge({ name: "shardcar_labeller_rate", help: "The slot-label PATCH rate achieved: PATCHes answered over the last 10 s, per second. At most --label-rate; with 8 PATCHes in flight, at most 8 ÷ their latency.", registers: [registry] })),
    target: get("shardcar_labeller_rate_target", () => new Gauge({ name: "shardcar_labeller_rate_target", help: "The slot-label PATCH rate allowed now, per second: between --label-rate-min and --label-rate, halved on a 429 or a slow PATCH.", registers: [registry] })),
    backoffs: get("shardcar_labeller_rate_backoffs_total", () => new Counter({ name: "shardcar_labeller_rate_backoffs_total", help: "Times the labeller halved its PATCH rate because the apiserver answered 429 or slowly.", registers: [registry] })),
    delay: get("shardcar_labeller_delay_seconds", () => new Histogram({ name: "shardcar_labeller_delay_seconds", help: "From the labeller first seeing an object without its right slot label to its PATCH succeeding; add the watch's own delay for the time it was in no cache.", labelNames: ["resource"], buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800], registers: [registry] })),
  };
}

/** The few fields of a PartialObjectMetadata the labeller keeps (slot labels only; the controller reference only). */
export function compactMeta(raw: unknown): ObjectMeta | undefined {
  const m = isRecord(raw) && isRecord(raw["metadata"]) ? raw["metadata"] : undefined;
  if (m === undefined || typeof m["name"] !== "string") return undefined;
  const labels: Record<string, string> = {};
  if (isRecord(m["labels"])) for (const [k, v] of Object.entries(m["labels"])) if (k.startsWith(SLOT_LABEL_PREFIX) && typeof v === "string") labels[k] = v;
  const refs = Array.isArray(m["ownerReferences"]) ? m["ownerReferences"] : [];
  const controller = refs.find((r): r is Record<string, unknown> => isRecord(r) && r["controller"] === true && typeof r["uid"] === "string");
  return {
    namespace: typeof m["namespace"] === "string" ? m["namespace"] : "",
    name: m["name"],
    resourceVersion: typeof m["resourceVersion"] === "string" ? m["resourceVersion"] : "",
    labels,
    ...(typeof m["uid"] === "string" ? { uid: m["uid"] } : {}),
    ...(controller === undefined ? {} : { ownerReferences: [{ uid: controller["uid"], controller: true }] }),
  };
}

interface Watched {
  readonly metadata: { name: string; namespace: string };
  readonly meta: ObjectMeta;
}

/** `/api/v1` or `/apis/<group>/<preferred version>`, once the resource is served there. */
async function resourceBase(api: ApiClient, group: string, resource: string): Promise<string> {
  let base = "/api/v1";
  if (group !== "") {
    const g = await api.request("GET", `/apis/${group}`, { timeoutMs: CALL_TIMEOUT_MS });
    const pv = isRecord(g) && isRecord(g["preferredVersion"]) ? g["preferredVersion"]["version"] : undefined;
    if (typeof pv !== "string") throw new Error(`API group ${group} has no preferred version`);
    base = `/apis/${group}/${pv}`;
  }
  const d = await api.request("GET", base, { timeoutMs: CALL_TIMEOUT_MS });
  const served = isRecord(d) && Array.isArray(d["resources"]) && d["resources"].some((r) => isRecord(r) && r["name"] === resource);
  if (!served) throw new Error(`${resource} is not served by ${base}`);
  return base;
}

/**
 * The leader's labeller. {@link run} works until aborted; {@link status}
 * answers for the coordinator's status writes.
 */
export class Labeller implements LeaderTask {
  readonly #o: LabellerOptions;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #policy: LabellingPolicy;
  readonly #metrics: LabellerMetrics | undefined;
  readonly #events: EventSink;
  #state: LabellingState | undefined;
  #progress = new Map<string, RingProgress>();
  readonly #conditions = new Map<string, RingCondition>();
  readonly #warned = new Map<string, string>();
  /** Halvings of the current run's state already counted in the metric. */
  #backoffsExported = 0;

  constructor(o: LabellerOptions) {
    this.#o = o;
    this.#clock = o.clock ?? systemClock;
    this.#log = childLogger(o.log ?? silentLogger(), { component: "labeller" });
    this.#policy = { ...DEFAULT_POLICY, ...o.policy };
    this.#metrics = o.registry === undefined ? undefined : metricsOf(o.registry);
    this.#events = new EventSink(o.api, "shardcar-manager", this.#log);
  }

  status(namespace: string, name: string): RingStatusExtra | undefined {
    const config = this.#o.source.current();
    if (config === undefined) return undefined;
    const k = `${namespace}/${name}`;
    const problems = config.problems.filter((p) => p.namespace === namespace && p.name === name);
    const p = this.#progress.get(k);
    if (p === undefined && problems.length === 0) return undefined;
    const verdict = labelledVerdict(p, problems, this.#rateNow());
    const prev = this.#conditions.get(k);
    const cond: RingCondition =
      prev !== undefined && prev.status === verdict.status && prev.reason === verdict.reason
        ? { ...prev, message: verdict.message }
        : { type: "Labelled", ...verdict, lastTransitionTime: new Date(this.#clock.now()).toISOString() };
    this.#conditions.set(k, cond);
    return { fields: p === undefined ? {} : { labelling: labellingStatus(p) }, conditions: [cond] };
  }

  async run(signal: AbortSignal, changed: (namespace: string, name: string) => void): Promise<void> {
    const source = this.#o.source;
    const state = initialLabelling(source.current() ?? { rings: [], problems: [] }, this.#policy, this.#clock.now());
    this.#state = state;
    this.#backoffsExported = 0;
    const watches = new Map<string, () => void>();
    const inFlight = new Set<Promise<void>>();
    let cancelWake: () => void = () => {};
    let lastReport = Number.NEGATIVE_INFINITY;
    let reportTimer: (() => void) | undefined;
    let reported = new Map<string, string>();

    const report = (): void => {
      reportTimer = undefined;
      lastReport = this.#clock.now();
      this.#progress = new Map(progress(state).map((p) => [`${p.namespace}/${p.name}`, p]));
      this.#exportMetrics();
      const next = new Map<string, string>();
      const config = source.current();
      for (const [k, p] of this.#progress) next.set(k, JSON.stringify(p));
      for (const prob of config?.problems ?? []) next.set(`${prob.namespace}/${prob.name}`, `${next.get(`${prob.namespace}/${prob.name}`) ?? ""}|${prob.message}`);
      for (const k of new Set([...next.keys(), ...reported.keys()])) {
        if (next.get(k) === reported.get(k)) continue;
        const [ns = "", name = ""] = k.split("/");
        changed(ns, name);
      }
      reported = next;
      this.#warnProblems(config);
      // The achieved rate falls as its window empties with no event to
      // report it: keep reporting until it reads 0.
      if (!signal.aborted && this.#rateNow().achieved > 0) scheduleReport();
    };
    /** At most every report interval: counting walks every wrong object, too much to do per watch event. */
    const scheduleReport = (): void => {
      if (reportTimer !== undefined) return;
      const interval = this.#o.reportIntervalMs ?? DEFAULT_REPORT_MS;
      reportTimer = this.#clock.timer(Math.max(0, lastReport + interval - this.#clock.now()), report);
    };

    const apply = (event: LabellingEvent): void => {
      if (signal.aborted) return;
      const firstList = event.type === "listed" && state.resources.get(event.resource)?.synced === false;
      const { effects } = step(state, event, this.#clock.now());
      for (const e of effects) this.#execute(e, state, apply, inFlight, (at) => {
        cancelWake();
        cancelWake = this.#clock.timer(Math.max(0, at - this.#clock.now()), () => apply({ type: "tick" }));
      });
      // A resource's first list turns Listing into a count: say it at once.
      if (firstList) {
        reportTimer?.();
        report();
      } else scheduleReport();
    };

    const syncWatches = (): void => {
      const want = labelledResources(state.config);
      for (const [id, stop] of watches) {
        if (want.has(id)) continue;
        stop();
        watches.delete(id);
      }
      for (const [id, r] of want) if (!watches.has(id)) watches.set(id, this.#watch(id, r.group, r.resource, apply, signal));
    };

    const unsubscribe = source.subscribe(() => {
      const config = source.current();
      if (config === undefined) return;
      apply({ type: "config", config });
      syncWatches();
    });
    syncWatches();
    report();
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener("abort", () => resolve(), { once: true });
    });
    unsubscribe();
    cancelWake();
    reportTimer?.();
    for (const stop of watches.values()) stop();
    await Promise.all(inFlight);
    this.#state = undefined;
  }

  /** The achieved rate and the target now (the start before a run). */
  #rateNow(): LabelRateNow {
    const s = this.#state?.rate;
    return s === undefined ? { achieved: 0, target: rateBounds(this.#policy).start } : { achieved: achievedRate(s, this.#clock.now()), target: s.target };
  }

  #exportMetrics(): void {
    const m = this.#metrics;
    if (m === undefined) return;
    if (this.#state !== undefined) {
      const rate = this.#rateNow();
      m.rate.set(rate.achieved);
      m.target.set(rate.target);
      m.backoffs.inc(this.#state.rate.backoffs - this.#backoffsExported);
      this.#backoffsExported = this.#state.rate.backoffs;
    }
    m.unlabelled.reset();
    for (const p of this.#progress.values()) for (const r of p.resources) m.unlabelled.set({ namespace: p.namespace, ring: p.name, resource: r.resource }, r.unlabelled + r.mislabelled);
  }

  #execute(e: LabellingEffect, state: LabellingState, apply: (ev: LabellingEvent) => void, inFlight: Set<Promise<void>>, wake: (at: number) => void): void {
    switch (e.type) {
      case "wake":
        wake(e.at);
        return;
      case "labelled":
        this.#metrics?.delay.observe({ resource: e.resource }, e.delayMs / 1000);
        return;
      case "patch": {
        const sentAt = this.#clock.now();
        const p = this.#patch(e).then((r) => {
          inFlight.delete(p);
          this.#metrics?.patches.inc({ resource: e.resource, outcome: r.result === "ok" ? "labelled" : r.result });
          if (r.result === "error") this.#log.warn({ resource: e.resource, object: `${e.namespace}/${e.name}`, err: r.error }, "slot-label PATCH failed; retrying");
          if (this.#state === state) apply({ type: "patched", resource: e.resource, namespace: e.namespace, name: e.name, result: r.result, latencyMs: this.#clock.now() - sentAt, ...(r.error === undefined ? {} : { error: r.error }) });
        });
        inFlight.add(p);
      }
    }
  }

  readonly #bases = new Map<string, string>();

  async #patch(e: Extract<LabellingEffect, { type: "patch" }>): Promise<{ result: PatchResult; error?: string }> {
    const base = this.#bases.get(e.resource);
    if (base === undefined) return { result: "error", error: "the resource's API version is not known yet" };
    const plural = e.resource.split(".")[0] ?? "";
    const path = `${base}${e.namespace === "" ? "" : `/namespaces/${encodeURIComponent(e.namespace)}`}/${plural}/${encodeURIComponent(e.name)}`;
    try {
      // A merge patch of the slot labels alone, with the resourceVersion the
      // labels were computed from as a precondition: a 409 means the object
      // changed, and it is judged again from the newer version.
      await this.#o.api.request("PATCH", path, {
        body: { metadata: { resourceVersion: e.resourceVersion, labels: e.labels } },
        contentType: "application/merge-patch+json",
        accept: METADATA,
        timeoutMs: CALL_TIMEOUT_MS,
      });
      return { result: "ok" };
    } catch (err) {
      if (isConflict(err)) return { result: "conflict" };
      if (isNotFound(err)) return { result: "gone" };
      if (httpStatus(err) === 429) return { result: "throttled" };
      return { result: "error", error: describe(err) };
    }
  }

  /** Discovers the resource's version, then list+watches it metadata-only until stopped. */
  #watch(id: string, group: string, resource: string, apply: (ev: LabellingEvent) => void, signal: AbortSignal): () => void {
    const stopper = new AbortController();
    const stopped = AbortSignal.any([signal, stopper.signal]);
    let stopWatch: () => void = () => {};
    void (async () => {
      let base: string | undefined;
      while (!stopped.aborted && base === undefined) {
        try {
          base = await resourceBase(this.#o.api, group, resource);
        } catch (e) {
          this.#metrics?.listErrors.inc({ resource: id });
          apply({ type: "listFailed", resource: id, error: describe(e) });
          await this.#clock.sleep(DISCOVERY_RETRY_MS, stopped);
        }
      }
      if (stopped.aborted || base === undefined) return;
      this.#bases.set(id, base);
      const path = `${base}/${resource}`;
      const w = watchObjects<Watched>({
        api: this.#o.api,
        path,
        accept: METADATA,
        list: () => this.#listMetadata(path),
        decode: (raw) => {
          const meta = compactMeta(raw);
          return meta === undefined ? undefined : { metadata: { name: meta.name, namespace: meta.namespace }, meta };
        },
        clock: this.#clock,
        log: this.#log,
        onList: (objs) => apply({ type: "listed", resource: id, objects: [...objs.values()].map((o) => o.meta) }),
        onEvent: (type, o) => apply(type === "DELETED" ? { type: "deleted", resource: id, namespace: o.meta.namespace, name: o.meta.name } : { type: "upserted", resource: id, object: o.meta }),
        onError: (message) => {
          this.#metrics?.listErrors.inc({ resource: id });
          apply({ type: "listFailed", resource: id, error: message });
        },
      });
      stopWatch = w.stop;
      if (stopped.aborted) w.stop();
    })();
    return () => {
      stopper.abort();
      stopWatch();
    };
  }

  /** Every page of a metadata-only list (500 at a time, as client-go pages). */
  async #listMetadata(path: string): Promise<{ items: Watched[]; resourceVersion: string }> {
    const items: Watched[] = [];
    let cont: string | undefined;
    let resourceVersion = "";
    do {
      const page = await this.#o.api.request("GET", path, { query: { limit: 500, continue: cont }, accept: METADATA_LIST, timeoutMs: 120_000 });
      const meta = isRecord(page) && isRecord(page["metadata"]) ? page["metadata"] : {};
      if (resourceVersion === "" && typeof meta["resourceVersion"] === "string") resourceVersion = meta["resourceVersion"];
      for (const raw of isRecord(page) && Array.isArray(page["items"]) ? page["items"] : []) {
        const m = compactMeta(raw);
        if (m !== undefined) items.push({ metadata: { name: m.name, namespace: m.namespace }, meta: m });
      }
      cont = typeof meta["continue"] === "string" && meta["continue"] !== "" ? meta["continue"] : undefined;
    } while (cont !== undefined);
    return { items, resourceVersion };
  }

  /** A Warning Event once per new problem (a refused spec, a label conflict), as the coordinator does for its refusals. */
  #warnProblems(config: LabelSlotConfig | undefined): void {
    for (const p of config?.problems ?? []) {
      const k = `${p.namespace}/${p.name}`;
      if (this.#warned.get(k) === p.message) continue;
      this.#warned.set(k, p.message);
      this.#log.warn({ ring: k, reason: p.reason, message: p.message }, "ShardRing cannot be labelled");
      void this.#events.warn({ metadata: { namespace: p.namespace, name: p.name } }, p.reason, p.message, this.#clock.now());
    }
  }
}
