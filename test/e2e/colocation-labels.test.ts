/**
 * Issue 13 §3 against devapi, labels mode with the gate off: the same run as
 * colocation-shardselector.test.ts, with the manager's stamping webhook
 * (children get their parent's slot at CREATE) and labeller (parents are
 * labelled right after they are stored), and every proxy asking the server
 * for its slots by label. Its negative control is colocation-negative's
 * (the same run and checks, children keyed by uid, in shardselector mode);
 * labels mode's own is in the real-server lane (test/real/colocation.test.ts):
 * with uid keys every duplicate child also waits for the labeller, which
 * makes that run too slow for the fast suite.
 */
import t from "tap";
import { assertColocated } from "../support/colocation.ts";
import { devapiColocation } from "./colocation.ts";

t.test("labels mode, gate off, children keyed by owner: no parent ever gets a second child, every parent gets one, every cache is its shard", async (t) => {
  assertColocated(t, await devapiColocation(t, "off", { filter: "labels", childKey: "owner" }));
});
