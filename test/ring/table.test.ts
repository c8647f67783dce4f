import t from "tap";
import { decodeSpec, decodeTables, DEFAULT_SPEC, encodeTables, formatSlots, HandoffMode, parseSlots, PendingPhase, Refusal, sameTables, type RingTables } from "../../src/ring/table.ts";

const owners = (s: string): (string | undefined)[] => [...s].map((c) => (c === "." ? undefined : c === "a" ? "web-a" : c === "b" ? "web-b" : c));

interface Member {
  name: string;
  slots: string;
}
interface StatusFixture {
  generation: number;
  slotCount: number;
  committed: { generation: number; members: Member[] };
  pending: { generation: number; phase: string; startedAt: string; deadline: string; members: Member[] };
}
const nth = (ms: Member[], i: number): Member => ms[i] as Member;

/** One valid status with a pending generation; each refusal case breaks one field. */
const defaultStatus = (): StatusFixture => ({
  generation: 4,
  slotCount: 4,
  committed: { generation: 2, members: [{ name: "web-a", slots: "0-1" }, { name: "web-b", slots: "2-3" }] },
  pending: { generation: 4, phase: "Widening", startedAt: "2026-01-01T00:00:00.000Z", deadline: "2026-01-01T00:01:00.000Z", members: [{ name: "web-a", slots: "0-2" }, { name: "web-b", slots: "3" }] },
});

t.test("formatSlots and parseSlots round-trip, merging runs", async (t) => {
  const rows: Array<[number[], string]> = [
    [[], ""],
    [[0], "0"],
    [[0, 1, 2, 5, 7, 8], "0-2,5,7-8"],
    [[8, 7, 0, 2, 1, 5, 5], "0-2,5,7-8"],
  ];
  for (const [slots, text] of rows) {
    t.equal(formatSlots(slots), text);
    const back = parseSlots(text, 16);
    t.ok(back.ok && formatSlots(back.value) === text, `${text} parses back`);
  }
});

t.test("parseSlots refuses anything but ascending runs inside the slot count", async (t) => {
  const rows: Array<[string, string]> = [
    ["0-", Refusal.Malformed],
    ["a", Refusal.Malformed],
    ["3-1", Refusal.Malformed],
    ["0,,1", Refusal.Malformed],
    ["-1", Refusal.Malformed],
    ["16", Refusal.SlotOutOfRange],
    ["0-16", Refusal.SlotOutOfRange],
    ["1e3", Refusal.Malformed],
  ];
  for (const [text, reason] of rows) {
    const r = parseSlots(text, 16);
    t.equal(r.ok ? "ok" : r.reason, reason, JSON.stringify(text));
  }
});

t.test("decodeSpec fills defaults and refuses bad values with a message naming the field", async (t) => {
  t.same(decodeSpec(undefined), { ok: true, value: DEFAULT_SPEC });
  t.same(decodeSpec({ slots: 64, handoff: "exclusive", handoffTimeoutSeconds: 5, relistBudget: 3 }), { ok: true, value: { slotCount: 64, mode: HandoffMode.Exclusive, handoffTimeoutMs: 5_000, relistBudget: 3 } });
  t.equal(DEFAULT_SPEC.relistBudget, 1, "a ring relists at most one keyspace at once (what one unsharded replica lists at its start) unless it says otherwise");
  const budget = (spec: unknown): number | undefined => {
    const r = decodeSpec(spec);
    return r.ok ? r.value.relistBudget : undefined;
  };
  t.equal(budget({ slots: 64 }), 1, "an absent relistBudget is the default");
  t.equal(budget({ relistBudget: null }), 1, "null counts as absent, like every spec field (the apiserver drops nulls)");
  t.equal(budget({ relistBudget: 0.25 }), 0.25, "a fraction of the keyspace is allowed (a gentler ring)");
  t.equal(budget({ relistBudget: 64 }), 64, "up to 64 keyspaces, far beyond any limit a rebalance reaches");
  const bad: Array<[unknown, RegExp]> = [
    [{ slots: 0 }, /spec\.slots/],
    [{ slots: 4096 }, /spec\.slots/],
    [{ slots: "256" }, /spec\.slots/],
    [{ handoff: "both" }, /spec\.handoff/],
    [{ handoffTimeoutSeconds: -1 }, /handoffTimeoutSeconds/],
    [{ relistBudget: 0 }, /spec\.relistBudget must be a number in \(0, 64\].*got 0/],
    [{ relistBudget: -2 }, /spec\.relistBudget.*got -2/],
    [{ relistBudget: 65 }, /spec\.relistBudget.*got 65/],
    [{ relistBudget: "2" }, /spec\.relistBudget.*got "2"/],
    [{ relistBudget: 1e300 }, /spec\.relistBudget/],
    ["ring", /object/],
  ];
  for (const [spec, msg] of bad) {
    const r = decodeSpec(spec);
    t.ok(!r.ok && r.reason === Refusal.SpecInvalid && msg.test(r.message), JSON.stringify(spec));
  }
});

t.test("decodeTables accepts the valid status and an absent one", async (t) => {
  const r = decodeTables(defaultStatus(), 4);
  t.ok(r.ok);
  if (!r.ok || r.value === undefined) return;
  t.same(r.value.committed.owners, owners("aabb"));
  t.same(r.value.pending?.owners, owners("aaab"));
  t.equal(r.value.pending?.phase, PendingPhase.Widening);
  t.equal(r.value.generation, 4);
  t.same(decodeTables(undefined, 4), { ok: true, value: undefined });
  t.same(decodeTables({ conditions: [] }, 4), { ok: true, value: undefined }, "a status the leader has not filled yet");
});

t.test("decodeTables refuses every way a hand edit can break the table, saying why", async (t) => {
  const rows: Array<[string, (s: StatusFixture) => void, string, RegExp]> = [
    ["a slot owned twice", (s) => (nth(s.committed.members, 1).slots = "1-3"), Refusal.SlotOwnedTwice, /slot 1 is owned by both web-a and web-b/],
    ["a slot without owner", (s) => (nth(s.committed.members, 1).slots = "2"), Refusal.SlotUnowned, /slot 3 has no owner/],
    ["a slot beyond the count", (s) => (nth(s.pending.members, 1).slots = "3-4"), Refusal.SlotOutOfRange, /slot 4/],
    ["garbage slots", (s) => (nth(s.committed.members, 0).slots = "zero"), Refusal.Malformed, /is not N or N-M/],
    ["a member listed twice", (s) => void s.committed.members.push({ name: "web-a", slots: "" }), Refusal.Malformed, /listed twice/],
    ["a member name that is not a DNS name", (s) => (nth(s.committed.members, 0).name = "Web A"), Refusal.Malformed, /DNS/],
    ["a pending generation not above the committed", (s) => (s.pending.generation = 2), Refusal.GenerationOrder, /at least 4/],
    ["a pending generation without room for its step generation", (s) => (s.pending.generation = 3), Refusal.GenerationOrder, /at least 4/],
    ["an unknown phase", (s) => (s.pending.phase = "Shrinking"), Refusal.Malformed, /phase/],
    ["an unreadable deadline", (s) => (s.pending.deadline = "soon"), Refusal.Malformed, /deadline/],
    ["a negative generation", (s) => (s.committed.generation = -1), Refusal.Malformed, /generation/],
    ["a changed slot count", (s) => (s.slotCount = 8), Refusal.SlotCountChanged, /cannot change/],
    ["a pending without a committed table", (s) => void Reflect.deleteProperty(s, "committed"), Refusal.Malformed, /without status.committed/],
  ];
  for (const [name, edit, reason, msg] of rows) {
    const s = defaultStatus();
    edit(s);
    const r = decodeTables(s, 4);
    t.ok(!r.ok, `${name}: refused`);
    if (r.ok) continue;
    t.equal(r.reason, reason, `${name}: reason`);
    t.match(r.message, msg, `${name}: message`);
  }
});

t.test("encodeTables then decodeTables is the identity, and the newest generation survives", async (t) => {
  const tables: RingTables = {
    generation: 9,
    committed: { generation: 4, owners: owners("aabb") },
    pending: { generation: 6, owners: owners("abbb"), phase: PendingPhase.Narrowing, startedAt: Date.parse("2026-01-01T00:00:00Z"), deadline: Date.parse("2026-01-01T00:00:30Z") },
  };
  const wire = JSON.parse(JSON.stringify({ ...encodeTables(tables), slotCount: 4 }));
  const back = decodeTables(wire, 4);
  t.ok(back.ok && sameTables(back.value, tables));
  t.equal(wire.generation, 9, "an abandoned generation above the pending one is kept");
  t.equal(wire.members, 2);
  t.notOk(sameTables(tables, { ...tables, pending: undefined }));
});
