/**
 * Issue 8 acceptance: a deliberately broken proxy is caught by the lane.
 * The suites run again in a child tap process with
 * `SHARDCAR_TEST_BREAK_PROXY=skip-watch-filter`, which makes every proxy they
 * start keep every watch event (the test-only ShardProxyOptions
 * `unsafeSkipWatchFilter`). With the gate off the server does not filter
 * watches, so the child must fail, and fail on the claims about watches.
 *
 * With the gate on the server filters watches itself and such a proxy is
 * invisible, which is why the lane runs with the gate off as well.
 */
import t from "tap";
import { spawn } from "node:child_process";
import { realApiEnv } from "./support/realapi.ts";

const env = realApiEnv();
const SUITES = ["test/real/informers.test.ts", "test/real/kubectl.test.ts", "test/real/client-go-shapes.test.ts", "test/real/custom-resources.test.ts"];
const skip =
  process.env["SHARDCAR_TEST_BREAK_PROXY"] !== undefined
    ? "the lane itself runs with a broken proxy"
    : env.gate === "on"
      ? "gate on: the server filters watches itself, so a proxy that skips its watch filter cannot be told apart; the gate-off run checks this"
      : false;

t.test(`gate ${env.gate}: the lane fails when every proxy skips its watch filter (unsafeSkipWatchFilter)`, { skip }, async (t) => {
  const child = spawn("tap", ["--jobs=1", "--disable-coverage", "--timeout=300", "-R", "tap", ...SUITES], {
    env: { ...process.env, SHARDCAR_TEST_BREAK_PROXY: "skip-watch-filter" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (b: Buffer) => (out += b.toString("utf8")));
  child.stderr.on("data", (b: Buffer) => (out += b.toString("utf8")));
  t.teardown(() => {
    child.kill("SIGKILL");
  });
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  const failed = out
    .split("\n")
    .filter((l) => /^\s*not ok \d+ - /.test(l) && !/# (TODO|SKIP)/.test(l))
    .map((l) => l.trim().replace(/^not ok \d+ - /, "").replace(/ # time=.*$/, ""));
  const tests = failed.filter((f) => f.startsWith(`gate ${env.gate}:`));
  t.comment(`the broken lane failed ${failed.length} assertions in ${tests.length} tests:\n${tests.join("\n")}`);
  t.not(code, 0, "the child lane exited non-zero");
  const claims: Array<[string, RegExp]> = [
    ["client-node informers' caches", /pods keyed by uid: three informers .* each cache exactly their shard/],
    ["kubectl --watch output", /no out-of-shard pod was ever shown/],
    ["client-go watch-list and watch output", /no event for an out-of-range object/],
    ["custom-resource watch output", /no event for an out-of-range widget/],
  ];
  for (const [what, re] of claims) t.ok(failed.some((f) => re.test(f)), `caught in ${what}`);
  const lists = failed.filter((f) => /^list: exactly the|exactly the .* in-range widgets$/.test(f));
  t.same(lists, [], "list claims still pass (only watches were broken)");
});
