/**
 * Issue 13 §3 against devapi, shardselector mode: an unmodified parent/child
 * controller, three replicas in ring mode scaled 3→4→2 under churn, children
 * keyed by `owner` (no shardSelector can hash it: every proxy filters them
 * itself), gate on and off. Its negative control, the same run with the
 * children keyed by `uid`, is colocation-negative.test.ts (a file of its
 * own: its duplicates make it the slowest of the three). The run and what it
 * observes: test/support/colocation.ts.
 */
import t from "tap";
import { assertColocated } from "../support/colocation.ts";
import { devapiColocation } from "./colocation.ts";

for (const gate of ["on", "off"] as const) {
  t.test(`gate ${gate}, children keyed by owner: no parent ever gets a second child, every parent gets one, every cache is its shard`, async (t) => {
    assertColocated(t, await devapiColocation(t, gate, { filter: "shardselector", childKey: "owner" }));
  });
}
