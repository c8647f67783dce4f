/**
 * The operator tools' decision functions, as tables: probe readings,
 * audit arithmetic (duplicates, churn, owners that own nothing), ring owners
 * from Leases (expired, fenced, stale against the table), canary verdicts.
 */
import t from "tap";
import { randomUUID } from "node:crypto";
import { buildAudit, type AuditObject } from "../../src/ops/audit.ts";
import { canaryOk, judgeCanary, namespaceIn } from "../../src/ops/canary.ts";
import { classifyProbe, probeRanges, type ProbeObservation } from "../../src/ops/checks.ts";
import { committedOwnerOf, ringOwners, staticOwners, type MemberLease } from "../../src/ops/owners.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, makeRange, split } from "../../src/shard/range.ts";
import { canonicalSelector } from "../../src/shard/selector.ts";

t.test("classifyProbe: shardInfo decides typed lists, the items decide custom ones", async (t) => {
  const sample = "00000000-0000-0000-0000-000000000001";
  const ranges = probeRanges(sample);
  t.notOk(contains(ranges, fnv1a64(sample)), "the probe excludes the sample");
  const sel = canonicalSelector("uid", ranges) ?? "";
  const inside = "6f1d9e2c-3b7a-4c1e-9f0a-1234567890ab";
  const obs = (o: Partial<ProbeObservation>): ProbeObservation => ({ status: 200, sentSelector: sel, itemKeys: [], ...o });
  const rows: Array<[string, boolean, boolean, ProbeObservation, string]> = [
    ["typed, shardInfo echoes the selector", false, true, obs({ shardInfoSelector: sel, itemKeys: [inside] }), "honoured"],
    ["typed, shardInfo but the excluded sample came back", false, true, obs({ shardInfoSelector: sel, itemKeys: [sample] }), "wrong"],
    ["typed, shardInfo for another selector", false, true, obs({ shardInfoSelector: "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')" }), "wrong"],
    ["typed, no shardInfo", false, true, obs({ itemKeys: [inside] }), "ignored"],
    ["custom, the excluded sample came back", true, true, obs({ itemKeys: [sample] }), "ignored"],
    ["custom, an in-range item", true, true, obs({ itemKeys: [inside] }), "honoured"],
    ["custom, nothing returned, a sample existed", true, true, obs({}), "honoured"],
    ["custom, nothing at all to go on", true, false, obs({}), "unknown"],
    ["any, HTTP 403", false, true, obs({ status: 403 }), "error"],
  ];
  for (const [name, custom, hadSample, o, want] of rows) t.equal(classifyProbe(custom, hadSample, ranges, o), want, name);
});

// Real uids: FNV-1a of short sequential strings clusters in the high bits.
const objs = (n: number, ns = "default"): AuditObject[] => Array.from({ length: n }, (_, i) => ({ id: `${ns}/o-${i}`, namespace: ns, keyValue: randomUUID() }));

t.test("buildAudit: overlapping owners show up as duplicates, churn is counted apart", async (t) => {
  const full = objs(400);
  const [a, b] = split(2);
  const wide = [makeRange(0n, (a?.end ?? 0n) + (1n << 60n))];
  const owners = { description: "test", notes: [], owners: [ { name: "A", ranges: wide, serving: true }, { name: "B", ranges: b === undefined ? [] : [b], serving: true } ] };
  const idsIn = (ranges: readonly ReturnType<typeof makeRange>[]): string[] => full.filter((o) => contains(ranges, fnv1a64(o.keyValue))).map((o) => o.id);
  const overlap = full.filter((o) => contains(wide, fnv1a64(o.keyValue)) && b !== undefined && contains([b], fnv1a64(o.keyValue))).length;
  const r = buildAudit({ resource: "pods", key: "uid", owners, resourceVersion: "1", full, lists: [ { owner: "A", ids: [...idsIn(wide), "default/gone"], outside: 0, serverFiltered: true }, { owner: "B", ids: b === undefined ? [] : idsIn([b]), outside: 0, serverFiltered: true } ] });
  t.ok(overlap > 0);
  t.equal(r.duplicated.count, overlap, "every object in both owners' ranges is a duplicate");
  t.equal(r.missing.count, 0);
  t.equal(r.churn, 1, "an id missing from the full list is churn, not a duplicate");
  t.notOk(r.ok);
  t.ok(r.doubledKeyspace > 0.06 && r.doubledKeyspace < 0.07, "1/16 of the keyspace is doubled");
});

t.test("buildAudit: an owner that owns nothing serves nothing; static owners split evenly", async (t) => {
  const full = objs(50);
  const owners = staticOwners(2);
  const lists = owners.owners.map((o) => ({ owner: o.name, ids: full.filter((x) => contains(o.ranges, fnv1a64(x.keyValue))).map((x) => x.id), outside: 0, serverFiltered: true }));
  const r = buildAudit({ resource: "pods", key: "uid", owners, resourceVersion: "9", full, lists });
  t.ok(r.ok);
  t.equal(r.sum, 50);
  t.equal(r.uncoveredKeyspace, 0);
  const empty = buildAudit({ resource: "pods", key: "uid", owners: { description: "x", notes: [], owners: [{ name: "lonely", ranges: [], serving: true }] }, resourceVersion: "9", full, lists: [{ owner: "lonely", ids: [], outside: 0, serverFiltered: true }] });
  t.equal(empty.missing.count, 50);
  t.same(empty.missing.examples[0]?.claimedBy, [], "nobody claims them");
  t.equal(empty.uncoveredKeyspace, 1);
});

const NOW = Date.parse("2026-01-01T00:00:00Z");
const lease = (over: Partial<MemberLease> & { slots: string; member: string }): MemberLease => ({
  name: `shardcar-web-${over.member}`,
  annotations: { "shardcar.io/member": over.member, "shardcar.io/slots": over.slots, ...over.annotations },
  holder: `${over.member}/abc`,
  renewTime: NOW - 1000,
  leaseDurationSeconds: 15,
  ...over,
});
const STATUS = { slotCount: 4, committed: { generation: 7, members: [ { name: "a", slots: "0-1" }, { name: "b", slots: "2-3" } ] } };

t.test("ringOwners: serving, expired, fenced, and stale against the committed table", async (t) => {
  const rows: Array<[string, MemberLease, boolean, RegExp | undefined]> = [
    ["renewed a second ago, slots as committed", lease({ member: "a", slots: "0-1" }), true, undefined],
    ["renewed 20 s ago with a 15 s lease", lease({ member: "a", slots: "0-1", renewTime: NOW - 20_000 }), false, /Lease expired 5\.0 s ago/],
    ["taken over by the manager", lease({ member: "a", slots: "0-1", holder: "fenced-by:mgr" }), false, /fenced/],
    ["released", lease({ member: "a", slots: "0-1", holder: "" }), false, /released/],
    ["enforcing other slots than committed", lease({ member: "a", slots: "0" }), true, /enforces slots 0; the committed table \(generation 7\) gives it 0-1/],
    ["unparsable slots", lease({ member: "a", slots: "x" }), false, /unreadable/],
  ];
  for (const [name, l, serving, note] of rows) {
    const set = ringOwners({ namespace: "shop", ring: "web", status: STATUS, leases: [l] }, NOW);
    const o = set.owners[0];
    t.equal(o?.serving, serving, name);
    if (note === undefined) t.equal(o?.note, undefined, `${name}: no note`);
    else t.match(o?.note, note, name);
    t.ok(set.notes.some((n) => /member b is in the committed table but has no Lease/.test(n)), `${name}: b's missing Lease is noted`);
  }
  t.equal(committedOwnerOf(STATUS, (1n << 63n) + 5n)?.member, "b", "the upper half is b's in the committed table");
  t.equal(committedOwnerOf(undefined, 0n), undefined);
});

t.test("canary verdicts and namespace names chosen into a range", async (t) => {
  const base = { target: "a", id: "x", keyValue: "k", unreachable: [] };
  t.equal(judgeCanary({ ...base, expectedBy: [], seenBy: [], leakedTo: [] }), "unserved");
  t.equal(judgeCanary({ ...base, expectedBy: ["a", "b"], seenBy: ["a"], leakedTo: [] }), "missed", "overlap: every serving owner must deliver it");
  t.equal(judgeCanary({ ...base, expectedBy: ["a"], seenBy: ["a"], leakedTo: ["c"] }), "leaked");
  t.equal(judgeCanary({ ...base, expectedBy: ["a"], seenBy: ["a"], leakedTo: [] }), "ok");
  t.notOk(canaryOk([], ["a"]), "an owner without a canary fails the run");
  for (const r of split(5)) {
    const name = namespaceIn([r], "shardcar-canary-t");
    t.ok(name !== undefined && contains([r], fnv1a64(name)), `${name ?? "?"} hashes into its range`);
  }
  t.equal(namespaceIn([makeRange(5n, 6n)], "p", 1000), undefined, "a one-value range is not found by search");
});
