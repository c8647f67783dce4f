/**
 * Issue 12, faults: the history is compacted (devapi's `store.compact()`, as
 * etcd's compaction), so a resuming watch gets 410 and relists, and a paged
 * LIST's continue token expires mid-list and the pager falls back to a full
 * list. Every cache ends exact, and no controller is ever handed an object
 * outside its shard. The real-server counterpart is
 * test/real/fault-compaction.test.ts; the scenario is shared.
 */
import t from "tap";
import { compactionScenario } from "../support/faults/compaction.ts";
import { devapiServer } from "../support/faults/servers.ts";

const NAMESPACES = ["alpha", "beta", "gamma", "delta"];

for (const gate of ["on", "off"] as const) {
  t.test(`gate ${gate}: after a compaction, resumes get 410 and relist, a paged LIST falls back to a full one, and caches end exact with nothing out of range`, async (t) => {
    await compactionScenario(t, await devapiServer({ gate, pods: 2000, namespaces: NAMESPACES }));
  });
}
