import t from "tap";
import type { LabelSlotConfig, LabelSlotRing } from "../../src/ring/label-slots.ts";
import { achievedRate } from "../../src/ring/label-rate.ts";
import { initialLabelling, labelledVerdict, labellingStatus, progress, step, type LabellingEffect, type LabellingPolicy, type LabellingState, type ObjectMeta } from "../../src/ring/labelling.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, shardRange } from "../../src/shard/range.ts";

const WEB: LabelSlotRing = {
  namespace: "shop",
  name: "web",
  label: "shard.shardcar.io/web",
  slotCount: 64,
  resources: [
    { resource: "gadgets", group: "example.com", key: "uid" },
    { resource: "widgets", group: "example.com", key: "owner" },
  ],
};
const AUDIT: LabelSlotRing = { namespace: "shop", name: "audit", label: "shard.shardcar.io/audit", slotCount: 256, resources: [{ resource: "gadgets", group: "example.com", key: "uid" }] };
const CONFIG: LabelSlotConfig = { rings: [WEB], problems: [] };
// A target of 20/s (where it starts) under a ceiling that never binds here (the ceiling has tests of its own).
const POLICY: LabellingPolicy = { maxRatePerSecond: 1_000, minRatePerSecond: 20, slowPatchMs: 250, burst: 100, maxInFlight: 100, retryMinMs: 100, retryMaxMs: 1_000 };
const G = "gadgets.example.com";
const W = "widgets.example.com";
const RATE = { achieved: 0, target: 20 };

/** The slot holding the hash of `value`, by scanning the slot ranges. */
function slotOf(value: string, slotCount: number): string {
  const h = fnv1a64(value);
  for (let s = 0; s < slotCount; s++) if (contains([shardRange(s, slotCount)], h)) return String(s);
  throw new Error("unreachable");
}

function obj(name: string, uid: string, labels: Record<string, string> = {}, extra: Partial<ObjectMeta> = {}): ObjectMeta {
  return { namespace: "ns", name, uid, resourceVersion: "1", labels, ...extra };
}

const patches = (effects: readonly LabellingEffect[]): Extract<LabellingEffect, { type: "patch" }>[] => effects.filter((e): e is Extract<LabellingEffect, { type: "patch" }> => e.type === "patch");

function listed(state: LabellingState, resource: string, objects: ObjectMeta[], now = 0): LabellingEffect[] {
  return step(state, { type: "listed", resource, objects }, now).effects;
}

t.test("an object without its slot label is patched with exactly the slot of its key; a child gets its parent's slot", async (t) => {
  const s = initialLabelling(CONFIG, POLICY, 0);
  const parent = obj("p", "7c9e6679-7425-40de-944b-e07fc1f90ae7");
  const child = obj("c", "0b7e2c1a-52d4-4d40-9d51-3c3f1c0c9a11", {}, { ownerReferences: [{ uid: parent.uid, controller: true }] });
  const root = obj("r", "d3b07384-d113-4ec6-a8b4-0b7f8e1c2f90", {}, { ownerReferences: [{ uid: parent.uid }] });
  const a = patches(listed(s, G, [parent]));
  const b = patches(listed(s, W, [child, root]));
  t.same(a, [{ type: "patch", resource: G, namespace: "ns", name: "p", resourceVersion: "1", labels: { "shard.shardcar.io/web": slotOf(parent.uid ?? "", 64) } }]);
  t.same(
    b.map((p) => [p.name, p.labels]),
    [
      ["c", { "shard.shardcar.io/web": slotOf(parent.uid ?? "", 64) }],
      ["r", { "shard.shardcar.io/web": slotOf(root.uid ?? "", 64) }],
    ],
    "the child follows its controller; an owner reference without controller: true does not count",
  );
  t.equal(a[0]?.labels["shard.shardcar.io/web"], b[0]?.labels["shard.shardcar.io/web"], "parent and child share a slot");
});

t.test("objects that carry the right label are left alone; a wrong or non-canonical one is corrected", async (t) => {
  const s = initialLabelling(CONFIG, POLICY, 0);
  const uid = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
  const right = slotOf(uid, 64);
  const other = String((Number(right) + 1) % 64);
  const effects = patches(listed(s, G, [obj("ok", uid, { "shard.shardcar.io/web": right }), obj("wrong", uid, { "shard.shardcar.io/web": other }), obj("padded", uid, { "shard.shardcar.io/web": `0${right}` })]));
  t.same(effects.map((p) => p.name), ["wrong", "padded"]);
  const [ring] = progress(s);
  t.match(ring?.resources.find((r) => r.resource === G), { objects: 3, labelled: 1, unlabelled: 0, mislabelled: 2, synced: true });
});

t.test("one PATCH sets the labels of every ring that labels the resource", async (t) => {
  const s = initialLabelling({ rings: [WEB, AUDIT], problems: [] }, POLICY, 0);
  const uid = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
  const [p, more] = patches(listed(s, G, [obj("g", uid, { "shard.shardcar.io/audit": slotOf(uid, 256) })]));
  t.equal(more, undefined, "one PATCH");
  t.same(p?.labels, { "shard.shardcar.io/web": slotOf(uid, 64) }, "only what is missing");
  const rows = progress(s).map((r) => [r.name, r.resources.find((x) => x.resource === G)?.unlabelled]);
  t.same(rows, [["web", 1], ["audit", 0]], "counted per ring");
});

t.test("the token bucket: a burst, then the steady rate, and a wake-up when the next token is due", async (t) => {
  const s = initialLabelling(CONFIG, { ...POLICY, burst: 3 }, 0);
  const objects = Array.from({ length: 10 }, (_, i) => obj(`o${i}`, `uid-${i}`));
  const first = listed(s, G, objects, 0);
  t.equal(patches(first).length, 3, "the burst goes at once");
  t.same(first.filter((e) => e.type === "wake"), [{ type: "wake", at: 50 }], "the next token comes at 20/s");
  t.equal(patches(step(s, { type: "tick" }, 49).effects).length, 0, "not before it is due");
  t.equal(patches(step(s, { type: "tick" }, 50).effects).length, 1);
  t.equal(patches(step(s, { type: "tick" }, 250).effects).length, 3, "tokens refill over time, capped by the burst");
  let sent = 7;
  for (let now = 300; sent < 10 && now < 10_000; now += 50) sent += patches(step(s, { type: "tick" }, now).effects).length;
  t.equal(sent, 10, "everything is patched in the end");
  t.same(step(s, { type: "tick" }, 100_000).effects, [], "nothing left to do, nothing to wake for");
});

t.test("at most maxInFlight PATCHes at once; an answer frees the slot", async (t) => {
  const s = initialLabelling(CONFIG, { ...POLICY, maxInFlight: 2 }, 0);
  const first = patches(listed(s, G, [obj("a", "u-a"), obj("b", "u-b"), obj("c", "u-c")]));
  t.same(first.map((p) => p.name), ["a", "b"]);
  const next = patches(step(s, { type: "patched", resource: G, namespace: "ns", name: "a", result: "ok" }, 10).effects);
  t.same(next.map((p) => p.name), ["c"], "first seen, first patched");
});

t.test("a successful PATCH counts the object as labelled at once and reports the delay since it was first seen wrong", async (t) => {
  const s = initialLabelling(CONFIG, POLICY, 0);
  listed(s, G, [obj("a", "u-a")], 1_000);
  const e = step(s, { type: "patched", resource: G, namespace: "ns", name: "a", result: "ok" }, 1_250).effects;
  t.same(e.filter((x) => x.type === "labelled"), [{ type: "labelled", resource: G, delayMs: 250 }]);
  t.match(progress(s)[0]?.resources.find((r) => r.resource === G), { labelled: 1, unlabelled: 0 });
  // The watch echo (labels as patched) changes nothing; one that lost the label again re-queues it.
  const want = slotOf("u-a", 64);
  t.same(patches(step(s, { type: "upserted", resource: G, object: obj("a", "u-a", { "shard.shardcar.io/web": want }, { resourceVersion: "2" }) }, 1_300).effects), []);
  t.same(patches(step(s, { type: "upserted", resource: G, object: obj("a", "u-a", {}, { resourceVersion: "3" }) }, 1_400).effects).map((p) => p.resourceVersion), ["3"], "a full update that dropped the label: patched again, against the new version");
});

t.test("409: judged again from the newer version the watch brought, or retried after a doubling backoff", async (t) => {
  const s = initialLabelling(CONFIG, POLICY, 0);
  listed(s, G, [obj("a", "u-a"), obj("b", "u-b")]);
  // a: the watch already delivered version 2 before the conflict answer.
  step(s, { type: "upserted", resource: G, object: obj("a", "u-a", {}, { resourceVersion: "2" }) }, 5);
  const a = patches(step(s, { type: "patched", resource: G, namespace: "ns", name: "a", result: "conflict" }, 10).effects);
  t.same(a.map((p) => [p.name, p.resourceVersion]), [["a", "2"]], "patched again at once, against version 2");
  // b: no newer version seen yet: wait for it, retry at +100 ms, then +200 ms.
  const b = step(s, { type: "patched", resource: G, namespace: "ns", name: "b", result: "conflict" }, 10).effects;
  t.same(patches(b), []);
  t.same(b.filter((e) => e.type === "wake"), [{ type: "wake", at: 110 }]);
  t.same(patches(step(s, { type: "tick" }, 110).effects).map((p) => p.name), ["b"]);
  const again = step(s, { type: "patched", resource: G, namespace: "ns", name: "b", result: "conflict" }, 120).effects;
  t.same(again.filter((e) => e.type === "wake"), [{ type: "wake", at: 320 }], "the backoff doubles");
});

t.test("404: the object is gone; no retry, and its DELETE removes it from the counts", async (t) => {
  const s = initialLabelling(CONFIG, POLICY, 0);
  listed(s, G, [obj("a", "u-a")]);
  t.same(step(s, { type: "patched", resource: G, namespace: "ns", name: "a", result: "gone" }, 10).effects, []);
  step(s, { type: "deleted", resource: G, namespace: "ns", name: "a" }, 20);
  t.match(progress(s)[0]?.resources.find((r) => r.resource === G), { objects: 0, unlabelled: 0 });
});

t.test("other failures are retried with backoff and reported until a PATCH of that resource succeeds", async (t) => {
  const s = initialLabelling(CONFIG, POLICY, 0);
  listed(s, G, [obj("a", "u-a")]);
  step(s, { type: "patched", resource: G, namespace: "ns", name: "a", result: "error", error: "HTTP 403: forbidden" }, 10);
  const v = labelledVerdict(progress(s)[0], [], RATE);
  t.match(v, { status: "False", reason: "PatchFailing", message: /HTTP 403: forbidden/ });
  t.equal(patches(step(s, { type: "tick" }, 110).effects).length, 1, "retried");
  step(s, { type: "patched", resource: G, namespace: "ns", name: "a", result: "ok" }, 120);
  t.match(progress(s)[0]?.resources.find((r) => r.resource === G), { unlabelled: 0 });
  t.equal(progress(s)[0]?.resources.find((r) => r.resource === G)?.patchError, undefined, "the error is cleared");
});

t.test("a restarted labeller finds exactly what is still wrong (the cluster's labels are the whole state)", async (t) => {
  const objects = Array.from({ length: 20 }, (_, i) => obj(`o${i}`, `uid-${i}`));
  const s = initialLabelling(CONFIG, POLICY, 0);
  const sent = patches(listed(s, G, objects));
  const done = new Set(sent.slice(0, 8).map((p) => p.name));
  // The cluster after 8 PATCHes landed; a new leader lists it.
  const after = objects.map((o) => (done.has(o.name) ? { ...o, labels: { "shard.shardcar.io/web": slotOf(o.uid ?? "", 64) } } : o));
  const fresh = initialLabelling(CONFIG, POLICY, 50);
  t.same(patches(listed(fresh, G, after, 50)).map((p) => p.name).sort(), objects.filter((o) => !done.has(o.name)).map((o) => o.name).sort());
});

t.test("a config change re-judges everything: a dropped ring stops its resources, a new slot count relabels", async (t) => {
  const s = initialLabelling(CONFIG, POLICY, 0);
  const uid = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
  t.same(patches(listed(s, G, [obj("g", uid, { "shard.shardcar.io/web": slotOf(uid, 64) })])), []);
  const e = patches(step(s, { type: "config", config: { rings: [{ ...WEB, slotCount: 128 }], problems: [] } }, 10).effects);
  t.same(e.map((p) => p.labels), [{ "shard.shardcar.io/web": slotOf(uid, 128) }]);
  step(s, { type: "config", config: { rings: [{ ...WEB, resources: WEB.resources.filter((r) => r.key === "owner") }], problems: [] } }, 20);
  t.same([...s.resources.keys()], [W], "gadgets are no longer watched");
});

t.test("the Labelled condition: problems first, then listing, then what is in no cache", async (t) => {
  t.match(labelledVerdict(undefined, [{ reason: "LabelConflict", message: "x and y both label" }], RATE), { status: "False", reason: "LabelConflict", message: "x and y both label" });
  const s = initialLabelling(CONFIG, POLICY, 0);
  t.match(labelledVerdict(progress(s)[0], [], RATE), { status: "Unknown", reason: "Listing", message: /gadgets.example.com, widgets.example.com/ });
  step(s, { type: "listFailed", resource: G, error: "HTTP 403: forbidden" }, 1);
  t.match(labelledVerdict(progress(s)[0], [], RATE), { status: "False", reason: "ListFailed", message: /gadgets.example.com \(HTTP 403: forbidden\)/ });
  t.same(patches(step(s, { type: "tick" }, 1).effects), [], "nothing is known, nothing is patched");
  listed(s, G, [obj("a", "u-a")]);
  listed(s, W, []);
  t.match(labelledVerdict(progress(s)[0], [], RATE), { status: "False", reason: "Backfilling", message: /^1 of 1 objects lack the right shard.shardcar.io\/web .*gadgets.example.com 1 unlabelled/ });
  step(s, { type: "patched", resource: G, namespace: "ns", name: "a", result: "ok" }, 2);
  t.match(labelledVerdict(progress(s)[0], [], RATE), { status: "True", reason: "AllLabelled", message: /gadgets.example.com 1, widgets.example.com 0/ });
  const [done] = progress(s);
  if (done === undefined) throw new Error("no progress for the ring");
  t.same(labellingStatus(done), {
    label: "shard.shardcar.io/web",
    unlabelled: 0,
    resources: [
      { resource: G, key: "uid", synced: true, objects: 1, labelled: 1, unlabelled: 0, mislabelled: 0 },
      { resource: W, key: "owner", synced: true, objects: 0, labelled: 0, unlabelled: 0, mislabelled: 0 },
    ],
  });
});

t.test("a backfill sends more PATCHes per second while the apiserver answers fast, and fewer after it answers 429", async (t) => {
  const policy: LabellingPolicy = { ...POLICY, minRatePerSecond: 10, maxRatePerSecond: 1_000, burst: 10, maxInFlight: 1_000 };
  const s = initialLabelling(CONFIG, policy, 0);
  const objects = Array.from({ length: 5_000 }, (_, i) => obj(`o${i}`, `uid-${i}`));
  let inFlight = patches(listed(s, G, objects, 0));
  /** Sends for one second in 10 ms steps, answering every PATCH 5 ms later with `result`; returns how many went. */
  const second = (start: number, result: "ok" | "throttled"): number => {
    let sent = 0;
    for (let now = start; now < start + 1_000; now += 10) {
      const answered = inFlight;
      inFlight = [];
      for (const p of answered) inFlight.push(...patches(step(s, { type: "patched", resource: p.resource, namespace: p.namespace, name: p.name, result, latencyMs: 5 }, now + 5).effects));
      inFlight.push(...patches(step(s, { type: "tick" }, now + 10).effects));
      sent += inFlight.length;
    }
    return sent;
  };
  const early = second(0, "ok");
  second(1_000, "ok");
  second(2_000, "ok");
  const later = second(3_000, "ok");
  t.ok(later >= 3 * early, `the rate climbs while answers are fast: ${early}/s, then ${later}/s`);
  second(4_000, "throttled");
  const after = second(5_000, "ok");
  t.ok(after < later, `it backs off after 429s: ${later}/s, then ${after}/s`);
  t.equal(s.rate.backoffs, 1, "the 429s of one second halve it once");
});

/**
 * Drives a backfill in 10 ms steps, answering every PATCH `latencyMs` (a
 * multiple of 10) after it went; returns when each PATCH went.
 */
function backfill(s: LabellingState, objects: number, untilMs: number, latencyMs: number): number[] {
  const sent: number[] = [];
  let pending: { at: number; p: Extract<LabellingEffect, { type: "patch" }> }[] = [];
  const take = (effects: readonly LabellingEffect[], now: number): void => {
    for (const p of patches(effects)) {
      pending.push({ at: now + latencyMs, p });
      sent.push(now);
    }
  };
  take(listed(s, G, Array.from({ length: objects }, (_, i) => obj(`o${i}`, `uid-${i}`)), 0), 0);
  for (let now = 10; now <= untilMs; now += 10) {
    const due = pending.filter((x) => x.at <= now);
    pending = pending.filter((x) => x.at > now);
    for (const { p } of due) take(step(s, { type: "patched", resource: p.resource, namespace: p.namespace, name: p.name, result: "ok", latencyMs }, now).effects, now);
    take(step(s, { type: "tick" }, now).effects, now);
  }
  return sent;
}

t.test("the achieved rate never exceeds the user's --label-rate: at most 5 PATCHes begin in any one second at --label-rate 5, whatever the burst", async (t) => {
  // Fast answers and a long backlog: the target climbs to the ceiling, and a
  // burst of 100 tokens would send 100 at once if the bucket alone ruled.
  const s = initialLabelling(CONFIG, { ...POLICY, maxRatePerSecond: 5, minRatePerSecond: undefined, burst: 100, maxInFlight: 100 }, 0);
  const sent = backfill(s, 1_000, 60_000, 10);
  const worst = Math.max(...sent.map((at) => sent.filter((x) => x >= at && x < at + 1_000).length));
  t.equal(worst, 5, "never more than 5 in any second");
  t.ok(sent.length >= 5 * 59, `and close to 5 a second: ${sent.length} in 60 s`);
  t.equal(s.rate.target, 5, "the target reached the ceiling and stopped");
  t.ok(achievedRate(s.rate, 60_000) <= 5, `the achieved rate reads ${achievedRate(s.rate, 60_000)}/s`);
});

t.test("the reported rate is the achieved one: with PATCHes of 200 ms and 8 in flight the Labelled condition says 40/s while the target is 500/s", async (t) => {
  const s = initialLabelling(CONFIG, { ...POLICY, maxRatePerSecond: 500, minRatePerSecond: 500, burst: 500, maxInFlight: 8 }, 0);
  backfill(s, 5_000, 30_000, 200);
  const achieved = achievedRate(s.rate, 30_000);
  t.equal(s.rate.target, 500);
  t.ok(achieved <= 8 / 0.2, `at most 8 ÷ 200 ms: ${achieved}/s`);
  t.ok(achieved >= 35, `and what was achieved, not 0: ${achieved}/s`);
  listed(s, W, [], 30_000);
  const v = labelledVerdict(progress(s)[0], [], { achieved, target: s.rate.target });
  t.match(v, { status: "False", reason: "Backfilling", message: /labelling at 40\/s over the last 10 s \(target 500\/s\)$/ });
});

t.test("the target does not climb while every in-flight slot is taken: latency, not the rate, is the limit", async (t) => {
  const s = initialLabelling(CONFIG, { ...POLICY, maxRatePerSecond: 500, minRatePerSecond: 20, burst: 20, maxInFlight: 8 }, 0);
  backfill(s, 5_000, 30_000, 200);
  t.ok(s.rate.target <= 80, `8 ÷ 200 ms is 40/s; the target stays near it: ${s.rate.target}/s, not the ceiling`);
});
