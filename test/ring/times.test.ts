import t from "tap";
import { leaseTimes, type LeaseView } from "../../src/ring/times.ts";
import { fromString, isAssignable, isReleased, isServing, memberState, MemberState, needsFence, toString } from "../../src/ring/state.ts";
import { FENCED_PREFIX } from "../../src/ring/names.ts";

const NOW = 1_000_000;
/** One valid, freshly renewed member Lease; each case changes one field. */
const defaultLease = (over: Partial<LeaseView> = {}): LeaseView => ({ holder: "web-0/abc", renewedAt: NOW, durationMs: 2_000, leaving: false, ...over });

t.test("leaseTimes: durations until expiry and until the takeover delay, from the observed renewal", async (t) => {
  const rows: Array<[string, LeaseView, number, number, { toExpired: number; toDead: number } | undefined]> = [
    ["just renewed", defaultLease(), NOW, 0, { toExpired: 2_000, toDead: 2_000 }],
    ["half way", defaultLease(), NOW + 1_000, 0, { toExpired: 1_000, toDead: 1_000 }],
    ["expired, takeover later", defaultLease(), NOW + 2_500, 4_000, { toExpired: -500, toDead: 1_500 }],
    ["takeover delay shorter than the duration counts as the duration", defaultLease(), NOW, 500, { toExpired: 2_000, toDead: 2_000 }],
    ["no renew time proves nothing", defaultLease({ renewedAt: undefined }), NOW, 0, undefined],
    ["zero duration proves nothing", defaultLease({ durationMs: 0 }), NOW, 0, undefined],
    ["negative duration proves nothing", defaultLease({ durationMs: -5 }), NOW, 0, undefined],
    ["NaN renew time proves nothing", defaultLease({ renewedAt: Number.NaN }), NOW, 0, undefined],
  ];
  for (const [name, lease, now, takeover, want] of rows) t.same(leaseTimes(lease, now, takeover), want, name);
});

t.test("memberState: each Lease maps to one state; a case changes one field", async (t) => {
  const rows: Array<[string, LeaseView | undefined, number, MemberState]> = [
    ["renewed, not leaving", defaultLease(), NOW + 1_999, MemberState.Ready],
    ["renewed, leaving", defaultLease({ leaving: true }), NOW, MemberState.Leaving],
    ["expiry is exclusive: at renewedAt+duration it is expired", defaultLease(), NOW + 2_000, MemberState.Expired],
    ["past expiry, before takeover", defaultLease(), NOW + 2_500, MemberState.Expired],
    ["past takeover", defaultLease(), NOW + 4_000, MemberState.Dead],
    ["a leaving member that stopped renewing is dead like any other", defaultLease({ leaving: true }), NOW + 4_000, MemberState.Dead],
    ["taken over by the leader", defaultLease({ holder: `${FENCED_PREFIX}mgr-0` }), NOW, MemberState.Fenced],
    ["released (no holder)", defaultLease({ holder: "" }), NOW, MemberState.Gone],
    ["released (holder absent)", defaultLease({ holder: undefined }), NOW, MemberState.Gone],
    ["no Lease at all", undefined, NOW, MemberState.Gone],
    ["held but unreadable times fail closed", defaultLease({ durationMs: undefined }), NOW, MemberState.Unknown],
  ];
  for (const [name, lease, now, want] of rows) t.equal(toString(memberState(lease, now, 4_000)), toString(want), name);
});

t.test("the state order makes availability a comparison", async (t) => {
  const all = [MemberState.Unknown, MemberState.Gone, MemberState.Fenced, MemberState.Dead, MemberState.Expired, MemberState.Leaving, MemberState.Ready];
  t.same(all.filter(isServing), [MemberState.Leaving, MemberState.Ready]);
  t.same(all.filter(isAssignable), [MemberState.Ready]);
  t.same(all.filter(isReleased), [MemberState.Gone, MemberState.Fenced]);
  t.same(all.filter(needsFence), [MemberState.Unknown, MemberState.Dead], "only states that may hide a live member need a fence");
  t.same([...all].sort((a, b) => a - b), all, "declared in ascending order");
});

t.test("toString and fromString round-trip every state; anything else is Unknown", async (t) => {
  for (const s of Object.values(MemberState)) t.equal(fromString(toString(s)), s, toString(s));
  t.equal(toString(99), "Unknown");
  t.equal(toString(-1), "Unknown");
  t.equal(toString(1.5), "Unknown");
  t.equal(fromString("ready"), MemberState.Unknown, "case matters");
  t.equal(fromString(""), MemberState.Unknown);
});
