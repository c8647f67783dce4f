/**
 * `shardcar audit` against devapi, through the CLI: static ranges with the
 * gate on, off and mixed add up to the total and say who filtered; namespace
 * keying names the largest namespaces; a real ring is audited from its
 * Leases, and a member frozen with stale ranges shows up as a gap (exit 1)
 * until the manager reassigns its slots.
 */
import t from "tap";
import { seedPods, startDevApi, type GateMode } from "../../src/devapi/index.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, split } from "../../src/shard/range.ts";
import { slotsToRanges } from "../../src/shard/table.ts";
import { parseSlots } from "../../src/ring/table.ts";
import { SLOTS_ANNOTATION, memberLeaseName } from "../../src/ring/names.ts";
import { until } from "../support/wait.ts";
import { cli, kubeconfigFile, TestRing } from "./support.ts";

interface AuditJson {
  total: number;
  sum: number;
  ok: boolean;
  skew: number;
  rows: { name: string; serving: boolean; count: number; expected: number; outside: number; serverFiltered: boolean; note?: string }[];
  missing: { count: number; examples: { id: string; claimedBy: string[] }[] };
  duplicated: { count: number };
  uncoveredKeyspace: number;
  largestNamespaces: { namespace: string; count: number; owners: string[] }[];
}

const NAMESPACES = ["alpha", "beta", "gamma", "delta", "team-a", "team-b"];

// Small pages with the gate on and off (the lists really page); one page per
// range when mixed, so each range's list meets one apiserver (devapi
// alternates per request) and the verdict differs by range.
const GATES: Array<{ gate: GateMode; pageSize: string; filtered: (rows: AuditJson["rows"]) => boolean; what: string }> = [
  { gate: "on", pageSize: "100", filtered: (rows) => rows.every((r) => r.serverFiltered && r.outside === 0), what: "the server filtered every range" },
  { gate: "off", pageSize: "100", filtered: (rows) => rows.every((r) => !r.serverFiltered && r.outside > 0), what: "the server filtered no range; the audit dropped the rest, as the proxy would" },
  { gate: "mixed", pageSize: "1000", filtered: (rows) => rows.some((r) => r.serverFiltered) && rows.some((r) => !r.serverFiltered), what: "some ranges were filtered by the server, some not" },
];

for (const { gate, pageSize, filtered, what } of GATES) {
  t.test(`gate ${gate}: three static ranges add up to the total, nothing missing or duplicated`, async (t) => {
    const api = await startDevApi({ gate });
    t.teardown(() => api.close());
    seedPods(api, { count: 900, namespaces: NAMESPACES });
    const kc = kubeconfigFile(api.url);
    const r = await cli(["audit", "--kubeconfig", kc, "--resource", "pods", "--shards", "3", "--json", "--page-size", pageSize]);
    t.equal(r.code, 0, r.err);
    const a = JSON.parse(r.out) as AuditJson;
    t.equal(a.total, 900);
    t.equal(a.sum, 900, "the ranges' counts add up to the total");
    t.equal(a.missing.count, 0);
    t.equal(a.duplicated.count, 0);
    t.ok(a.rows.every((row) => row.count === row.expected && row.count > 200), "each range returned exactly the pods whose uid hashes into it");
    t.ok(filtered(a.rows), what);
    t.ok(a.skew >= 1 && a.skew < 1.3, `skew ${a.skew.toFixed(2)} is max/mean`);
    const text = await cli(["audit", "--kubeconfig", kc, "--resource", "pods", "--shards", "3"]);
    t.match(text.out, /serving owners' lists add up to 900 — equal/);
    t.match(text.out, /^OK: the sum equals the total; nothing missing, nothing duplicated\.$/m);
  });
}

t.test("namespace keying: counts per range and the largest namespaces, each wholly in one range", async (t) => {
  const api = await startDevApi({ gate: "on" });
  t.teardown(() => api.close());
  seedPods(api, { count: 300, namespaces: NAMESPACES });
  seedPods(api, { count: 200, namespaces: ["big"], prefix: "big-" });
  const r = await cli(["audit", "--kubeconfig", kubeconfigFile(api.url), "--resource", "pods=namespace", "--shards", "3", "--json", "--top", "3"]);
  t.equal(r.code, 0, r.err);
  const a = JSON.parse(r.out) as AuditJson;
  t.equal(a.sum, 500);
  t.equal(a.largestNamespaces.length, 3);
  t.same(a.largestNamespaces[0], { namespace: "big", count: 200, owners: [`${split(3).findIndex((x) => contains([x], fnv1a64("big")))}/3`] }, "the largest namespace is named with the range that holds all of it");
});

t.test("a ring: audited from its members' Leases; a member frozen with stale ranges is a gap until the manager moves its slots", async (t) => {
  const api = await startDevApi({ gate: "on" });
  seedPods(api, { count: 600, namespaces: ["default"] });
  const ring = new TestRing(api, "shop", "web");
  t.teardown(async () => {
    await ring.stop();
    await api.close();
  });
  ring.startCoordinator();
  for (const m of ["web-0", "web-1", "web-2"]) await ring.add(m);
  await ring.settled(["web-0", "web-1", "web-2"]);
  const kc = kubeconfigFile(api.url, "shop");
  const audit = async (): Promise<{ code: number; a: AuditJson; out: string }> => {
    const r = await cli(["audit", "--kubeconfig", kc, "--resource", "pods", "--ring", "web", "--json"]);
    return { code: r.code, a: JSON.parse(r.out) as AuditJson, out: r.out };
  };
  const healthy = await audit();
  t.equal(healthy.code, 0);
  t.same(healthy.a.rows.map((r) => [r.name, r.serving]), [["web-0", true], ["web-1", true], ["web-2", true]]);
  t.equal(healthy.a.sum, 600);
  t.equal(healthy.a.uncoveredKeyspace, 0);

  // Freeze web-1: no more renewals, its Lease keeps claiming its old slots.
  // The manager is down too, so nobody reassigns them: a silent gap.
  await ring.stopCoordinator();
  const lease = api.store.get("leases.coordination.k8s.io", "shop", memberLeaseName("web", "web-1"));
  const slots = parseSlots(lease?.metadata?.annotations?.[SLOTS_ANNOTATION] ?? "", 256);
  const frozenRanges = slots.ok ? slotsToRanges(slots.value, 256) : [];
  const inGap = api.store.list("pods").filter((p) => contains(frozenRanges, fnv1a64(p.metadata?.uid ?? ""))).length;
  ring.kill("web-1");
  // The audit judges a Lease expired by its renewTime against its own (wall)
  // clock: wait until that holds for web-1's Lease, rather than a period
  // that a renewal still in flight at the kill could outlast.
  await until("web-1's Lease expired by the audit's clock", () => {
    const spec = api.store.get("leases.coordination.k8s.io", "shop", memberLeaseName("web", "web-1"))?.spec as { renewTime?: string; leaseDurationSeconds?: number } | undefined;
    return spec?.renewTime !== undefined && spec.leaseDurationSeconds !== undefined && Date.parse(spec.renewTime) + spec.leaseDurationSeconds * 1000 < Date.now();
  });
  const broken = await audit();
  t.equal(broken.code, 1, "the audit exits 1");
  t.ok(inGap > 100, `web-1 held ${inGap} pods`);
  t.equal(broken.a.missing.count, inGap, "every pod in the frozen member's slots is reported missing");
  t.equal(broken.a.sum, 600 - inGap, "and the sum falls short by exactly that");
  const row = broken.a.rows.find((r) => r.name === "web-1");
  t.equal(row?.serving, false);
  t.match(row?.note, /Lease expired .* ago/);
  t.ok(broken.a.missing.examples.every((m) => m.claimedBy.includes("web-1")), "each missing example names the frozen member that claims it");
  t.ok(broken.a.uncoveredKeyspace > 0.2, "about a third of the keyspace has no serving owner");
  const text = await cli(["audit", "--kubeconfig", kc, "--resource", "pods", "--ring", "web"]);
  t.match(text.out, new RegExp(`MISSING: ${inGap} objects are served by no replica`));
  t.match(text.out, /NOT SERVING: Lease expired/);

  // The manager comes back, fences web-1 and hands its slots on: healed.
  ring.startCoordinator();
  await ring.settled(["web-0", "web-2"]);
  const healed = await audit();
  t.equal(healed.a.missing.count, 0, "no gap once the slots moved");
  t.equal(healed.a.sum, 600);
  t.ok(healed.a.rows.filter((r) => r.serving).map((r) => r.name).join() === "web-0,web-2", "the fenced member no longer serves");
});

t.test("bad flags exit 2 naming the flag", async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [["audit", "--shards", "3"], /--resource is required/],
    [["audit", "--resource", "pods"], /exactly one of --shards N or --ring NAME/],
    [["audit", "--resource", "pods", "--shards", "3", "--ring", "web"], /exactly one of --shards N or --ring NAME/],
    [["audit", "--resource", "pods,configmaps", "--shards", "3"], /--resource .*one resource at a time/],
    [["audit", "--resource", "pods", "--shards", "zero"], /--shards "zero"/],
    [["audit", "--resource", "pods", "--ring", "Web"], /--ring "Web"/],
    [["audit", "--resource", "pods", "--shards", "2", "--canary-timeout", "soon"], /--canary-timeout "soon"/],
    [["audit", "--resource", "pods", "--shards", "2", "--admin-url", "0:http://x"], /--admin-url "0:http:\/\/x"/],
    [["audit", "--resource", "pods", "--shards", "2", "--page-size", "0"], /--page-size "0"/],
    [["audit", "--resource", "pods", "--shards", "2", "--canary-max", "0"], /--canary-max "0"/],
    [["audit", "--resource", "pods", "--shards", "2", "--nope"], /--nope/],
  ];
  for (const [argv, re] of cases) {
    const r = await cli(argv);
    t.equal(r.code, 2, argv.join(" "));
    t.match(r.err, re);
  }
});

t.test("an unreachable API server is one line on stderr and exit 1, not a stack trace", async (t) => {
  const r = await cli(["audit", "--kubeconfig", kubeconfigFile("http://127.0.0.1:9"), "--resource", "pods", "--shards", "2"]);
  t.equal(r.code, 1);
  t.match(r.err, /^shardcar audit: GET http:\/\/127\.0\.0\.1:9\/api\/v1: connect ECONNREFUSED/);
  t.equal(r.err.trim().split("\n").length, 1, "one line");
});
