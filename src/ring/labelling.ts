/**
 * The labeller's decisions as a pure state machine: `step(state, event,
 * now) → { state, effects }`, the shape of `handoff.ts`. The shell
 * (`labeller.ts`) lists and watches each labelled resource metadata-only,
 * feeds what it sees in, and executes the effects (PATCH one object's slot
 * labels; wake at a time).
 *
 * What it decides:
 * - which stored objects lack a slot label or carry a wrong one, for every
 *   labels-mode ring that labels their resource (`label-slots.ts`), and
 *   keeps a count per ring and resource;
 * - which of them to patch next: first seen, first patched; one PATCH sets
 *   the labels of every ring that labels the resource;
 * - when: a token bucket (`burst`) filled at a target rate that adapts to
 *   the apiserver's answers between `minRatePerSecond` and
 *   `maxRatePerSecond`, never more than `maxRatePerSecond` PATCHes begun in
 *   any one second (`label-rate.ts`), and at most `maxInFlight` PATCHes at
 *   once, because a backfill of a large cluster is a stream of writes that
 *   the apiserver and etcd must absorb beside the controllers' own;
 * - what a failed PATCH means: 409 (the object changed: the watch brings the
 *   new version, which is judged afresh, or it is retried after a backoff),
 *   404 (gone: the watch brings the DELETE), anything else (retried with a
 *   doubling backoff, and reported).
 *
 * Nothing here is lost on a restart: the labels in the cluster are the whole
 * truth, so a new leader lists, finds what is still wrong, and goes on.
 *
 * The state is updated in place (a backfill may track 100,000 objects, and
 * copying them per watch event would be quadratic); `step` returns it.
 *
 * Pure: no clock, no timers, no I/O.
 */
import type { KeyMetadata } from "../shard/slots.ts";
import { ACHIEVED_WINDOW_MS, adaptRate, initialRate, recordSend, sendAllowedAt, type RatePolicy, type RateState } from "./label-rate.ts";
import { labelState, slotResourceName, type LabelSlotConfig, type LabelSlotRing, type LabelState, type SlotResource } from "./label-slots.ts";

/** The metadata the labeller keeps of an object (what `PartialObjectMetadata` carries that matters). */
export interface ObjectMeta extends KeyMetadata {
  readonly namespace: string;
  readonly name: string;
  readonly resourceVersion: string;
  /** Only the slot labels (`shard.shardcar.io/*`); others are never needed. */
  readonly labels: Readonly<Record<string, string>>;
}

export interface LabellingPolicy extends RatePolicy {
  /** Tokens the bucket holds: PATCHes that may go at once after a quiet spell. */
  readonly burst: number;
  readonly maxInFlight: number;
  /** First retry after a failed PATCH; doubles per failure of the same object. */
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
}

interface Tracked {
  meta: ObjectMeta;
  /** When it was first seen wrong (for the labelling delay); undefined while right. */
  wrongSince: number | undefined;
}


export interface ResourceState {
  readonly id: string;
  /** The first list arrived (and the watch since has not been lost for good). */
  synced: boolean;
  /** Why the last list or watch failed, while it keeps failing. */
  listError: string | undefined;
  readonly objects: Map<string, Tracked>;
  /** Keys of objects wrong for at least one ring. */
  readonly wrong: Set<string>;
}

export interface LabellingState {
  config: LabelSlotConfig;
  policy: LabellingPolicy;
  readonly resources: Map<string, ResourceState>;
  /** `resource key` of objects waiting for a PATCH, oldest first (a Set keeps insertion order). */
  readonly queue: Set<string>;
  /** The resourceVersion each in-flight PATCH was made against. */
  readonly inFlight: Map<string, string>;
  /** When each failed PATCH is due again. */
  readonly retries: Map<string, number>;
  /** Consecutive failures per object, for the backoff; cleared when it is right or gone. */
  readonly failures: Map<string, number>;
  /** The last PATCH error per resource, while PATCHes of it fail. */
  readonly patchErrors: Map<string, string>;
  tokens: number;
  refilledAt: number;
  /** The PATCH rate: its target now, adapted to the apiserver's answers, the ceiling's window, and what was achieved. */
  readonly rate: RateState;
}

export type LabellingEvent =
  | { readonly type: "config"; readonly config: LabelSlotConfig }
  /** A complete list: replaces what was known of the resource. */
  | { readonly type: "listed"; readonly resource: string; readonly objects: readonly ObjectMeta[] }
  | { readonly type: "upserted"; readonly resource: string; readonly object: ObjectMeta }
  | { readonly type: "deleted"; readonly resource: string; readonly namespace: string; readonly name: string }
  /** The list or watch failed; the shell relists. Objects are kept (they are still the best knowledge). */
  | { readonly type: "listFailed"; readonly resource: string; readonly error: string }
  /** A PATCH's answer, `latencyMs` after it was sent (the rate adapts to it). */
  | { readonly type: "patched"; readonly resource: string; readonly namespace: string; readonly name: string; readonly result: PatchResult; readonly error?: string; readonly latencyMs?: number }
  /** Time passed: refill tokens, start retries that are due. */
  | { readonly type: "tick" };

/** `throttled`: HTTP 429, the apiserver's priority and fairness turning the PATCH away; retried like an error, and the rate halves. */
export type PatchResult = "ok" | "conflict" | "gone" | "throttled" | "error";

export type LabellingEffect =
  /** JSON merge patch `{metadata: {resourceVersion, labels}}`: only slot labels, guarded by the version they were computed from. */
  | { readonly type: "patch"; readonly resource: string; readonly namespace: string; readonly name: string; readonly resourceVersion: string; readonly labels: Readonly<Record<string, string>> }
  /** An object was labelled `delayMs` after the labeller first saw it wrong. */
  | { readonly type: "labelled"; readonly resource: string; readonly delayMs: number }
  /** Call `step` with `tick` at this time. */
  | { readonly type: "wake"; readonly at: number };

/** The resources the config labels, by id (`widgets.example.com`), with their group and plural. */
export function labelledResources(config: LabelSlotConfig): Map<string, { readonly group: string; readonly resource: string }> {
  const out = new Map<string, { group: string; resource: string }>();
  for (const ring of config.rings) for (const r of ring.resources) out.set(slotResourceName(r), { group: r.group, resource: r.resource });
  return out;
}

export function initialLabelling(config: LabelSlotConfig, policy: LabellingPolicy, now: number): LabellingState {
  const state: LabellingState = {
    config,
    policy,
    resources: new Map(),
    queue: new Set(),
    inFlight: new Map(),
    retries: new Map(),
    failures: new Map(),
    patchErrors: new Map(),
    tokens: policy.burst,
    refilledAt: now,
    rate: initialRate(policy, now),
  };
  syncResources(state);
  return state;
}

const objectKey = (namespace: string, name: string): string => (namespace === "" ? name : `${namespace}/${name}`);
const workKey = (resource: string, key: string): string => `${resource} ${key}`;

/** The rings (and keys) that label `resource`. */
function labellers(config: LabelSlotConfig, resource: string): { ring: LabelSlotRing; key: SlotResource["key"] }[] {
  const out: { ring: LabelSlotRing; key: SlotResource["key"] }[] = [];
  for (const ring of config.rings) {
    const r = ring.resources.find((x) => slotResourceName(x) === resource);
    if (r !== undefined) out.push({ ring, key: r.key });
  }
  return out;
}

/** The slot labels `meta` must have that it does not have; empty when it is right for every ring. */
export function missingLabels(config: LabelSlotConfig, resource: string, meta: ObjectMeta): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { ring, key } of labellers(config, resource)) {
    const s = labelState(ring, key, meta, meta.labels);
    if (s.state !== "labelled" && s.want !== undefined) out[ring.label] = s.want;
  }
  return out;
}

function syncResources(state: LabellingState): void {
  const want = labelledResources(state.config);
  for (const id of [...state.resources.keys()]) {
    if (want.has(id)) continue;
    state.resources.delete(id);
    for (const k of [...state.queue]) if (k.startsWith(`${id} `)) state.queue.delete(k);
    for (const k of [...state.retries.keys()]) if (k.startsWith(`${id} `)) state.retries.delete(k);
    for (const k of [...state.failures.keys()]) if (k.startsWith(`${id} `)) state.failures.delete(k);
    state.patchErrors.delete(id);
  }
  for (const id of want.keys()) {
    if (!state.resources.has(id)) state.resources.set(id, { id, synced: false, listError: undefined, objects: new Map(), wrong: new Set() });
  }
}

/** Re-judges one object; queues it when it needs a PATCH. */
function judge(state: LabellingState, res: ResourceState, key: string, now: number): void {
  const t = res.objects.get(key);
  const wk = workKey(res.id, key);
  if (t === undefined) {
    res.wrong.delete(key);
    forget(state, wk);
    return;
  }
  const missing = missingLabels(state.config, res.id, t.meta);
  if (Object.keys(missing).length === 0) {
    res.wrong.delete(key);
    t.wrongSince = undefined;
    forget(state, wk);
    return;
  }
  res.wrong.add(key);
  t.wrongSince ??= now;
  if (!state.inFlight.has(wk) && !state.retries.has(wk)) state.queue.add(wk);
}

function forget(state: LabellingState, wk: string): void {
  state.queue.delete(wk);
  state.retries.delete(wk);
  state.failures.delete(wk);
}

function rejudgeAll(state: LabellingState, now: number): void {
  for (const res of state.resources.values()) for (const key of res.objects.keys()) judge(state, res, key, now);
}

function refill(state: LabellingState, now: number): void {
  const p = state.policy;
  if (now > state.refilledAt) {
    state.tokens = Math.min(p.burst, state.tokens + ((now - state.refilledAt) / 1000) * state.rate.target);
  }
  state.refilledAt = Math.max(state.refilledAt, now);
}

/** Issues PATCHes while tokens and in-flight slots last; returns them and when to wake. */
function dispatch(state: LabellingState, now: number): LabellingEffect[] {
  const effects: LabellingEffect[] = [];
  for (const [wk, at] of state.retries) {
    if (at > now) continue;
    state.retries.delete(wk);
    // Re-judged on the way back in: the object may have been fixed meanwhile.
    const [resource = "", key = ""] = splitWork(wk);
    const res = state.resources.get(resource);
    if (res !== undefined) judge(state, res, key, now);
  }
  refill(state, now);
  for (const wk of state.queue) {
    if (state.inFlight.size >= state.policy.maxInFlight || state.tokens < 1 || sendAllowedAt(state.rate, state.policy, now) > now) break;
    state.queue.delete(wk);
    const [resource = "", key = ""] = splitWork(wk);
    const t = state.resources.get(resource)?.objects.get(key);
    if (t === undefined) continue;
    const labels = missingLabels(state.config, resource, t.meta);
    if (Object.keys(labels).length === 0) continue;
    state.tokens -= 1;
    recordSend(state.rate, now);
    state.inFlight.set(wk, t.meta.resourceVersion);
    effects.push({ type: "patch", resource, namespace: t.meta.namespace, name: t.meta.name, resourceVersion: t.meta.resourceVersion, labels });
  }
  const wake = nextWake(state, now);
  if (wake !== undefined) effects.push({ type: "wake", at: wake });
  return effects;
}

function nextWake(state: LabellingState, now: number): number | undefined {
  let at: number | undefined;
  if (state.queue.size > 0 && state.inFlight.size < state.policy.maxInFlight) {
    // The next token, and the ceiling's window: whichever is later.
    const token = state.tokens < 1 ? now + Math.ceil(((1 - state.tokens) / state.rate.target) * 1000) : now;
    const due = Math.max(token, Math.ceil(sendAllowedAt(state.rate, state.policy, now)));
    if (due > now) at = due;
  }
  for (const r of state.retries.values()) at = Math.min(at ?? r, r);
  return at;
}

function splitWork(wk: string): [string, string] {
  const i = wk.indexOf(" ");
  return [wk.slice(0, i), wk.slice(i + 1)];
}

function track(meta: ObjectMeta, prev: Tracked | undefined): Tracked {
  return { meta, wrongSince: prev?.wrongSince };
}

/** Applies one event. */
export function step(state: LabellingState, event: LabellingEvent, now: number): { state: LabellingState; effects: LabellingEffect[] } {
  const effects: LabellingEffect[] = [];
  switch (event.type) {
    case "config":
      state.config = event.config;
      syncResources(state);
      rejudgeAll(state, now);
      break;
    case "listed": {
      const res = state.resources.get(event.resource);
      if (res === undefined) break;
      const fresh = new Map<string, Tracked>();
      for (const o of event.objects) {
        const k = objectKey(o.namespace, o.name);
        fresh.set(k, track(o, res.objects.get(k)));
      }
      const gone = [...res.objects.keys()].filter((k) => !fresh.has(k));
      res.objects.clear();
      for (const [k, v] of fresh) res.objects.set(k, v);
      res.synced = true;
      res.listError = undefined;
      for (const k of gone) judge(state, res, k, now);
      for (const k of res.objects.keys()) judge(state, res, k, now);
      break;
    }
    case "upserted": {
      const res = state.resources.get(event.resource);
      if (res === undefined) break;
      const k = objectKey(event.object.namespace, event.object.name);
      res.objects.set(k, track(event.object, res.objects.get(k)));
      judge(state, res, k, now);
      break;
    }
    case "deleted": {
      const res = state.resources.get(event.resource);
      if (res === undefined) break;
      const k = objectKey(event.namespace, event.name);
      res.objects.delete(k);
      judge(state, res, k, now);
      break;
    }
    case "listFailed": {
      const res = state.resources.get(event.resource);
      if (res !== undefined) res.listError = event.error;
      break;
    }
    case "patched": {
      const key = objectKey(event.namespace, event.name);
      const wk = workKey(event.resource, key);
      const patchedAt = state.inFlight.get(wk);
      // Every slot taken: the PATCHes' latency, not the rate, held work back.
      const slotsFull = state.inFlight.size >= state.policy.maxInFlight;
      state.inFlight.delete(wk);
      // Tokens earned so far at the old rate, before the rate changes.
      refill(state, now);
      adaptRate(state.rate, state.policy, event.result === "throttled" ? { type: "throttled" } : { type: "answered", latencyMs: event.latencyMs ?? 0, rateBound: state.queue.size > 0 && !slotsFull }, now);
      const res = state.resources.get(event.resource);
      const t = res?.objects.get(key);
      if (event.result === "ok") {
        state.patchErrors.delete(event.resource);
        state.retries.delete(wk);
        state.failures.delete(wk);
        if (t?.wrongSince !== undefined) effects.push({ type: "labelled", resource: event.resource, delayMs: Math.max(0, now - t.wrongSince) });
        // Counted as right at once; the watch event that follows confirms it
        // (and re-judges it, should another write have raced the PATCH).
        if (res !== undefined && t !== undefined) {
          const labels = { ...t.meta.labels, ...missingLabels(state.config, event.resource, t.meta) };
          t.meta = { ...t.meta, labels };
          judge(state, res, key, now);
        }
        break;
      }
      if (event.result === "gone") {
        // The watch brings the DELETE; until then it is not worth a PATCH.
        state.retries.delete(wk);
        state.failures.delete(wk);
        break;
      }
      if (event.result === "error") state.patchErrors.set(event.resource, event.error ?? "PATCH failed");
      // conflict: the object changed after we read it. If the watch has
      // already brought a newer version, judge that; otherwise wait for it,
      // with a retry as the backstop should the watch lag.
      const attempts = (state.failures.get(wk) ?? 0) + 1;
      state.failures.set(wk, attempts);
      const delay = Math.min(state.policy.retryMaxMs, state.policy.retryMinMs * 2 ** (attempts - 1));
      if (event.result === "conflict" && res !== undefined && t !== undefined && t.meta.resourceVersion !== patchedAt) {
        judge(state, res, key, now);
      } else if (res !== undefined && t !== undefined) {
        state.queue.delete(wk);
        state.retries.set(wk, now + delay);
      }
      break;
    }
    case "tick":
      break;
  }
  effects.push(...dispatch(state, now));
  return { state, effects };
}

/** One resource of a ring, as its `Labelled` condition and `status.labelling` report it. */
export interface ResourceProgress {
  /** `widgets.example.com`. */
  readonly resource: string;
  readonly key: SlotResource["key"];
  readonly synced: boolean;
  readonly objects: number;
  readonly labelled: number;
  readonly unlabelled: number;
  readonly mislabelled: number;
  /** Why listing or watching fails, while it does. */
  readonly listError?: string;
  /** Why PATCHes fail, while they do. */
  readonly patchError?: string;
}

export interface RingProgress {
  readonly namespace: string;
  readonly name: string;
  readonly label: string;
  readonly resources: readonly ResourceProgress[];
}

/** Per-ring counts, for every labels-mode ring of the config. */
export function progress(state: LabellingState): RingProgress[] {
  return state.config.rings.map((ring) => ({
    namespace: ring.namespace,
    name: ring.name,
    label: ring.label,
    resources: ring.resources.map((r) => {
      const id = slotResourceName(r);
      const res = state.resources.get(id);
      const count: Record<LabelState, number> = { labelled: 0, unlabelled: 0, mislabelled: 0 };
      for (const k of res?.wrong ?? []) {
        const t = res?.objects.get(k);
        if (t !== undefined) count[labelState(ring, r.key, t.meta, t.meta.labels).state]++;
      }
      const objects = res?.objects.size ?? 0;
      const listError = res?.listError;
      const patchError = state.patchErrors.get(id);
      return {
        resource: id,
        key: r.key,
        synced: res?.synced ?? false,
        objects,
        labelled: objects - count.unlabelled - count.mislabelled,
        unlabelled: count.unlabelled,
        mislabelled: count.mislabelled,
        ...(listError === undefined ? {} : { listError }),
        ...(patchError === undefined ? {} : { patchError }),
      };
    }),
  }));
}

/** `status.labelling` of a labels-mode ShardRing (the CRD's schema mirrors it). */
export interface LabellingStatusJson {
  label: string;
  /** Objects without the right slot label (absent or wrong), over every resource: each is in no cache. */
  unlabelled: number;
  resources: Array<{ resource: string; key: string; synced: boolean; objects: number; labelled: number; unlabelled: number; mislabelled: number }>;
}

export function labellingStatus(p: RingProgress): LabellingStatusJson {
  return {
    label: p.label,
    unlabelled: p.resources.reduce((n, r) => n + r.unlabelled + r.mislabelled, 0),
    resources: p.resources.map((r) => ({ resource: r.resource, key: r.key, synced: r.synced, objects: r.objects, labelled: r.labelled, unlabelled: r.unlabelled, mislabelled: r.mislabelled })),
  };
}

/** The labeller's PATCH rates now, per second, for the `Labelled` condition. */
export interface LabelRateNow {
  /** PATCHes answered over the last {@link ACHIEVED_WINDOW_MS} (`achievedRate`). */
  readonly achieved: number;
  /** The adapted target, at most the ceiling. */
  readonly target: number;
}

/** `500`, `12`, `2.5`, `0.1`: whole above 10, one decimal below. */
function perSecond(x: number): string {
  return x >= 10 ? String(Math.round(x)) : String(Math.round(x * 10) / 10);
}

/** The `Labelled` condition without its transition time (the shell stamps that). */
export interface LabelledVerdict {
  readonly status: "True" | "False" | "Unknown";
  readonly reason: "AllLabelled" | "Backfilling" | "PatchFailing" | "Listing" | "ListFailed" | "SpecInvalid" | "LabelConflict";
  readonly message: string;
}

/**
 * What a ring's `Labelled` condition says: a refused spec or a label
 * conflict first, then listing, then how many objects are in no cache and
 * the labeller's PATCH rate: the achieved one (what the apiserver
 * answered), beside the target it may go up to.
 */
export function labelledVerdict(p: RingProgress | undefined, problems: readonly { readonly reason: string; readonly message: string }[], rate: LabelRateNow): LabelledVerdict {
  const problem = problems[0];
  if (problem !== undefined) {
    const reason = problem.reason === "LabelConflict" ? "LabelConflict" : "SpecInvalid";
    return { status: "False", reason, message: problems.map((x) => x.message).join("; ") };
  }
  if (p === undefined) return { status: "Unknown", reason: "Listing", message: "the labeller has not read this ring yet" };
  const failing = p.resources.filter((r) => r.listError !== undefined);
  if (failing.length > 0) {
    return { status: "False", reason: "ListFailed", message: `cannot list or watch ${failing.map((r) => `${r.resource} (${r.listError ?? ""})`).join(", ")}; new objects of ${failing.length === 1 ? "it" : "them"} are neither counted nor labelled` };
  }
  const wrong = p.resources.filter((r) => r.unlabelled + r.mislabelled > 0);
  const total = p.resources.reduce((n, r) => n + r.objects, 0);
  const missing = wrong.reduce((n, r) => n + r.unlabelled + r.mislabelled, 0);
  const detail = wrong.map((r) => `${r.resource} ${r.unlabelled} unlabelled${r.mislabelled > 0 ? `, ${r.mislabelled} mislabelled` : ""}`).join("; ");
  const errors = p.resources.filter((r) => r.patchError !== undefined);
  if (errors.length > 0) {
    return { status: "False", reason: "PatchFailing", message: `${missing} of ${total} objects lack the right ${p.label} and are in no cache (${detail || "none counted yet"}); labelling fails: ${errors.map((r) => `${r.resource}: ${r.patchError ?? ""}`).join("; ")}` };
  }
  const listing = p.resources.filter((r) => !r.synced);
  if (listing.length > 0) return { status: "Unknown", reason: "Listing", message: `listing ${listing.map((r) => r.resource).join(", ")} (metadata only)` };
  if (wrong.length === 0) {
    return { status: "True", reason: "AllLabelled", message: `every object carries the right ${p.label}: ${p.resources.map((r) => `${r.resource} ${r.objects}`).join(", ")}` };
  }
  return { status: "False", reason: "Backfilling", message: `${missing} of ${total} objects lack the right ${p.label} and are in no cache until labelled (${detail}); labelling at ${perSecond(rate.achieved)}/s over the last ${ACHIEVED_WINDOW_MS / 1000} s (target ${perSecond(rate.target)}/s)` };
}
