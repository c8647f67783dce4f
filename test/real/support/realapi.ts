/**
 * The real-server lane's view of `../shared/realapi`: the environment that
 * `start.sh` printed (exported by `test/real/run.sh`), and, re-exported for
 * the lane's files, the raw HTTPS client (`test/support/http.ts`), the waits
 * (`test/support/wait.ts`) and the shard arithmetic done independently of
 * the proxy (`test/support/shard-sets.ts`).
 *
 * Test-only. The lane runs these files serially against one server, so a
 * suite may assume nobody else writes while it checks a cache.
 */
import { readFileSync } from "node:fs";
import { clusterClock } from "../../support/wait.ts";

export { call, callJson, HttpError, inParallel, listAll, open, waitUntil } from "../../support/http.ts";
// Waits and pauses on the cluster clock, as every test's (test/support/wait.ts).
export { eventually } from "../../support/wait.ts";
export const sleep = (ms: number): Promise<void> => clusterClock.sleep(ms);
export type { KubeList, KubeMeta, KubeObject, Reply, RequestOptions, Target } from "../../support/http.ts";
export { expectedShard, ident, inShard, keyOf, setDiff, setsEqual } from "../../support/shard-sets.ts";
export { brokenProxyOptions } from "../../support/broken-proxy.ts";

export interface RealApiEnv {
  readonly url: string;
  readonly token: string;
  readonly caFile: string;
  readonly caPem: string;
  readonly kubeconfig: string;
  /** `on` when started with `ShardedListAndWatch=true`. */
  readonly gate: "on" | "off";
  readonly runDir: string;
}

/**
 * Reads the environment `start.sh` printed. Throws when it is missing: these
 * files only make sense inside `npm run test:real`, which sets it.
 */
export function realApiEnv(): RealApiEnv {
  const e = process.env;
  const url = e["REALAPI_URL"];
  const token = e["REALAPI_TOKEN"];
  const caFile = e["REALAPI_CA"];
  const kubeconfig = e["KUBECONFIG"];
  const gate = e["REALAPI_GATE_SHARDED"];
  if (url === undefined || token === undefined || caFile === undefined || kubeconfig === undefined || (gate !== "true" && gate !== "false")) {
    throw new Error("REALAPI_URL, REALAPI_TOKEN, REALAPI_CA, KUBECONFIG and REALAPI_GATE_SHARDED are not set: run these tests with `npm run test:real`");
  }
  return { url, token, caFile, caPem: readFileSync(caFile, "utf8"), kubeconfig, gate: gate === "true" ? "on" : "off", runDir: e["REALAPI_RUN_DIR"] ?? "" };
}
