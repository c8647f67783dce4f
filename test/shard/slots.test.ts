import t from "tap";
import { rng } from "../support/rng.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { FULL_RANGE, KEYSPACE_END, shardRange, equal, type Range } from "../../src/shard/range.ts";
import { slotRange } from "../../src/shard/table.ts";
import {
  controllerOwnerUid,
  keyValue,
  parseSlot,
  slotAlignedRanges,
  slotLabelKey,
  slotLabelSelector,
  slotOfHash,
  slotOfValue,
  slotsOfRanges,
} from "../../src/shard/slots.ts";

const randomHash = (r: () => number): bigint => (BigInt(Math.floor(r() * 2 ** 32)) << 32n) | BigInt(Math.floor(r() * 2 ** 32));

t.test("an object's slot is the ring slot whose range holds its hash, at every slot boundary", async (t) => {
  for (const n of [1, 3, 7, 256, 1000, 1024]) {
    for (let s = 0; s < n; s++) {
      const r = slotRange(s, n);
      t.equal(slotOfHash(r.start, n), s, `first hash of slot ${s}/${n}`);
      t.equal(slotOfHash(r.end - 1n, n), s, `last hash of slot ${s}/${n}`);
    }
  }
});

t.test("slotOfHash agrees with slotRange for random hashes", async (t) => {
  const r = rng(7);
  for (let i = 0; i < 2000; i++) {
    const n = 1 + Math.floor(r() * 1024);
    const h = randomHash(r);
    const s = slotOfHash(h, n);
    const range = slotRange(s, n);
    if (!(range.start <= h && h < range.end)) t.fail(`hash ${h} got slot ${s}/${n} = [${range.start}, ${range.end})`);
  }
  t.pass("2000 random hashes placed in the slot that holds them");
});

t.test("slotOfHash refuses hashes and slot counts outside the keyspace", async (t) => {
  t.throws(() => slotOfHash(KEYSPACE_END, 256), /outside/);
  t.throws(() => slotOfHash(-1n, 256), /outside/);
  t.throws(() => slotOfHash(0n, 0), /slot count 0/);
  t.throws(() => slotOfHash(0n, 1025), /slot count 1025/);
});

t.test("slotOfValue is the slot of the KEP-5866 hash of the value", async (t) => {
  t.equal(slotOfValue("default", 256), Number(fnv1a64("default") >> 56n));
});

t.test("a slot label value reads back only in its one canonical decimal form", async (t) => {
  t.equal(parseSlot("0", 256), 0);
  t.equal(parseSlot("255", 256), 255);
  for (const bad of ["256", "007", "-1", "+1", " 1", "1 ", "1.0", "", "none", "0x1", "١"]) t.equal(parseSlot(bad, 256), undefined, JSON.stringify(bad));
});

t.test("the slot label is named after the ring, and a ring that cannot name a label is refused by name", async (t) => {
  t.equal(slotLabelKey("my-controller"), "shard.shardcar.io/my-controller");
  t.throws(() => slotLabelKey("My_Ring"), /"My_Ring"/);
  t.throws(() => slotLabelKey("a".repeat(64)), /at most 63/);
});

t.test("a ring member's slots are exactly the slots its ranges are made of", async (t) => {
  const n = 256;
  const ranges: Range[] = [slotRange(3, n), slotRange(4, n), slotRange(200, n)].map((r) => r);
  t.same(slotsOfRanges(ranges, n), [3, 4, 200]);
  t.ok(equal(slotAlignedRanges(ranges, n), ranges));
});

t.test("static i/N in labels mode partitions the slots: each slot to exactly one shard", async (t) => {
  for (const [shards, n] of [[3, 256], [5, 256], [7, 10], [256, 256], [300, 256]] as const) {
    const owner = new Array<number>(n).fill(-1);
    for (let i = 0; i < shards; i++) {
      for (const s of slotsOfRanges([shardRange(i, shards)], n)) {
        if (owner[s] !== -1) t.fail(`slot ${s} owned by ${owner[s]} and ${i} of ${shards}`);
        owner[s] = i;
      }
    }
    t.ok(owner.every((o) => o >= 0), `${shards} shards over ${n} slots: no slot unowned`);
  }
  t.same(slotsOfRanges([FULL_RANGE], 16).length, 16);
  t.same(slotsOfRanges([], 16), []);
});

t.test("the owned-slots selector lists each slot once, in order, and is absent when nothing is owned", async (t) => {
  t.equal(slotLabelSelector("shard.shardcar.io/r", [6, 0, 3, 3]), "shard.shardcar.io/r in (0,3,6)");
  t.equal(slotLabelSelector("shard.shardcar.io/r", []), undefined);
});

t.test("a child's key value is its controller's uid, so it shares its uid-keyed parent's slot", async (t) => {
  const parent = { uid: "p-uid", namespace: "ns" };
  const child = { uid: "c-uid", namespace: "ns", ownerReferences: [{ uid: "other", controller: false }, { uid: "p-uid", controller: true }] };
  t.equal(keyValue(child, "owner"), keyValue(parent, "uid"));
  t.equal(slotOfValue(keyValue(child, "owner") ?? "", 256), slotOfValue(keyValue(parent, "uid") ?? "", 256));
  t.equal(controllerOwnerUid({ ownerReferences: [{ uid: "x" }, { uid: "y", controller: "true" }] }), undefined, "only controller: true counts");
  t.equal(keyValue({ uid: "self", ownerReferences: [{ uid: "x", controller: false }] }, "owner"), "self", "no controller: the object's own uid");
});

t.test("the owner key is total over decoded JSON: what is not a reference is skipped, as the scanners skip it", async (t) => {
  const child = { uid: "self", ownerReferences: [null, "p", 3, ["x"], { uid: "p-uid", controller: true }] };
  t.equal(keyValue(child, "owner"), "p-uid", "non-objects before the controller reference are skipped");
  for (const refs of [{ uid: "p-uid", controller: true }, "refs", 4, null]) {
    t.equal(keyValue({ uid: "self", ownerReferences: refs }, "owner"), "self", `ownerReferences ${JSON.stringify(refs)} holds no reference`);
  }
  t.equal(controllerOwnerUid({ ownerReferences: [{ uid: 7, controller: true }, { uid: "p", controller: true }] }), "p", "a controller reference without a string uid does not count");
});

t.test("a key value that needs a uid is unknown before the apiserver assigned one; a namespace never is", async (t) => {
  t.equal(keyValue({ namespace: "ns" }, "uid"), undefined);
  t.equal(keyValue({ namespace: "ns", uid: "" }, "owner"), undefined);
  t.equal(keyValue({ ownerReferences: [{ uid: "p", controller: true }] }, "owner"), "p", "a child's slot is known at CREATE");
  t.equal(keyValue({}, "namespace"), "", "cluster-scoped objects hash the empty namespace, as the server");
});
