/**
 * The proxy fuzzer's cases can always be made: whatever its mutations stack
 * up to (a member 200,000 levels deep added to a body, then that body
 * mutated again), planCase returns a plan rather than throwing, so that a
 * long run stops only at a finding about the proxy. The first case below is
 * the one that stopped the long run of 2026-12-01 (seed 754791249, case
 * 2380: structuredClone overflowed the stack on such a body).
 */
import t from "tap";
import { Random } from "../../support/fuzz/random.ts";
import { lockRequests, observedRequests } from "../support/fuzz-corpus.ts";
import { planCase } from "../support/http-mutate.ts";

const corpus = [...observedRequests().map((o) => o.request), ...lockRequests({ resource: "leases", name: "demo-lock" }, "ns-0")];

t.test("a body nested 200,000 deep and then mutated again still makes a plan", async (t) => {
  const rnd = Random.forCase(754791249, 2380);
  t.equal(rnd.int(2), 0, "the fuzzer's first draw picks its target: the static proxy, plain HTTP");
  const plan = planCase(rnd, corpus, "replay", false);
  t.match(plan.notes.join("; "), /a member 200000 levels deep added to the document.*body: /, "the case stacks a mutation on the deep body");
  t.ok(plan.writes.length > 0, "and has bytes to send");
});

t.test("any case of a seed can be made", async (t) => {
  const failures: string[] = [];
  for (let i = 0; i < 600; i++) {
    try {
      const rnd = Random.forCase(20261204, i);
      planCase(rnd, corpus, "sweep", rnd.int(2) === 1);
    } catch (e) {
      failures.push(`case ${i}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  t.same(failures, [], "600 cases made");
});

t.test("a message damaged into empty lines is no request: the answers are read without it", async (t) => {
  // The case that stopped the long run at 2894163 (seed 2075304656, case 1890): a HEAD made "\r\n\r\n",
  // and the answer to the GET after it read as a HEAD's, its body taken for a third answer.
  const rnd = Random.forCase(2075304656, 1890);
  t.equal(rnd.int(2), 0, "the static proxy's case");
  const plan = planCase(rnd, corpus, "replay", false);
  t.same(plan.messages.map((m) => m.method), ["GET", "HEAD", "GET"], "three messages made");
  t.match(plan.notes.join("; "), /not HTTP\/1\.1: "\\r\\n\\r\\n"/, "the second damaged into empty lines");
  t.same(plan.methods, ["GET", "GET"], "two requests on the wire");
});
