import t from "tap";
import { Registry } from "prom-client";
import { parseSlots, type TableJson } from "../../src/ring/table.ts";
import { NS, RingEnv, SHARDRING_REF, sleep, until } from "./harness.ts";

// The relist budget end to end: spec.relistBudget reaches the leader's state
// machine, each pending table the leader writes stays within it, the
// deferred-members gauge shows who waits, and a bad value is refused like any
// broken spec. The state machine's own rules are pinned in handoff.test.ts.

async function gauge(registry: Registry, name: string): Promise<number> {
  const line = (await registry.getSingleMetricAsString(name)).split("\n").find((l) => l.startsWith(`${name}{`));
  return Number(line?.split(" ").pop() ?? Number.NaN);
}

/** Members that own a slot in `to` they do not own in `from`. */
function gainers(from: TableJson, to: TableJson, slotCount: number): string[] {
  const owner = new Map<number, string>();
  for (const m of from.members) {
    const slots = parseSlots(m.slots, slotCount);
    if (slots.ok) for (const s of slots.value) owner.set(s, m.name);
  }
  const out = new Set<string>();
  for (const m of to.members) {
    const slots = parseSlots(m.slots, slotCount);
    if (slots.ok) for (const s of slots.value) if (owner.get(s) !== m.name) out.add(m.name);
  }
  return [...out].sort();
}

t.test("a budget of 0.4 keyspaces (about one survivor's share): a member leaving a ring of four is handed on one gainer at a time, the gauge shows who waits, and a broken budget is refused", async (t) => {
  const env = await RingEnv.start("budget");
  t.teardown(() => env.stop());
  env.api.registerResource({ group: "", version: "v1", resource: "events", kind: "Event", namespaced: true });
  // Each survivor ends with about a third of the keyspace and relists all of
  // it, so 0.4 keyspaces admit one gainer per handoff.
  env.createRing({ handoff: "overlap", slots: 256, relistBudget: 0.4 });
  const { registry } = env.startCoordinator();
  const all = ["web-0", "web-1", "web-2", "web-3"];
  for (const n of all) {
    await env.addMember(n);
    await env.settled(all.slice(0, all.indexOf(n) + 1));
  }

  // Record every pending table the leader writes, against the committed one,
  // as the store applies it (synchronously: none can slip between two
  // looks). The gauge is polled: the leader sets it after each pass, and a
  // value lasts a whole handoff (a relist and the renewals around it), many
  // polls on the members' clock.
  const seen = new Map<number, string[]>();
  const stopWatching = env.api.store.watch(SHARDRING_REF, (e) => {
    const st = e.object["status"] as { pending?: TableJson; committed?: TableJson } | undefined;
    if (st?.pending !== undefined && st.committed !== undefined && !seen.has(st.pending.generation)) seen.set(st.pending.generation, gainers(st.committed, st.pending, 256));
  });
  let maxDeferred = 0;
  let watching = true;
  const poller = (async () => {
    while (watching) {
      maxDeferred = Math.max(maxDeferred, await gauge(registry, "shardcar_ring_relist_budget_deferred_members"));
      await sleep(5);
    }
  })();
  env.phase = "graceful";
  env.startSampling();
  await env.leave("web-3");
  await env.settled(["web-0", "web-1", "web-2"], 15_000);
  stopWatching();
  watching = false;
  await poller;

  t.comment(`pending tables and their gainers: ${[...seen].map(([g, m]) => `${g}: ${m.join(",")}`).join("; ")}`);
  t.equal(seen.size, 3, "three handoffs: web-3's slots go to each of the three survivors in turn");
  t.ok([...seen.values()].every((m) => m.length === 1), "each pending table has one gainer");
  t.same([...seen.values()].flat().sort(), ["web-0", "web-1", "web-2"], "every survivor gained once");
  t.equal(maxDeferred, 2, "the gauge showed two members waiting during the first handoff");
  t.equal(await gauge(registry, "shardcar_ring_relist_budget_deferred_members"), 0, "and none once the ring settled");
  t.same(
    env.samples.filter((s) => s.phase === "graceful" && s.uncovered > 0),
    [],
    "no sample saw an uncovered slot across the three handoffs",
  );

  // A broken budget is refused; the ring keeps the previous spec.
  const obj = env.ringObject();
  if (obj === undefined) throw new Error("no ring");
  env.api.store.update(SHARDRING_REF, { ...obj, spec: { ...(obj["spec"] as object), relistBudget: 0 } });
  await until("the refusal", () => env.ringStatus()?.conditions?.some((c) => c.reason === "SpecInvalid" && c.message.includes("spec.relistBudget")) ?? false, 3_000);
  const cond = env.ringStatus()?.conditions?.find((c) => c.type === "Valid");
  t.match(cond?.message ?? "", /spec\.relistBudget must be a number in \(0, 64\].*got 0.*keeping the previous spec/, "the condition says what is wrong and what was done");
  const events = env.api.store.list({ group: "", version: "v1", resource: "events" }, { namespace: NS });
  t.ok(events.some((e) => e["reason"] === "SpecInvalid" && String(e["message"]).includes("relistBudget")), "a Warning Event names the field");
});
