/**
 * Test-only: `SHARDCAR_TEST_BREAK_PROXY=skip-watch-filter` makes every
 * in-process proxy the real-server lane and the fault tests start pass watch
 * streams through unfiltered (ShardProxyOptions `unsafeSkipWatchFilter`), to
 * show that the tests catch such a proxy.
 */
export function brokenProxyOptions(): { unsafeSkipWatchFilter?: true } {
  return process.env["SHARDCAR_TEST_BREAK_PROXY"] === "skip-watch-filter" ? { unsafeSkipWatchFilter: true } : {};
}
