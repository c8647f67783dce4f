#!/usr/bin/env bash
# The fuzz lane (`npm run fuzz`): SHARDCAR_FUZZ_SECONDS (default 600) on two
# jobs: the proxy fuzzer on one for all of it, the /mutate-pods and
# /label-slots fuzzers one after the other on the other, half of it each;
# each with a fresh seed that it prints. Then:
#   fuzz: N requests tried
#   fuzz: P passed, F failed, S skipped
# (the last line for .ci/run, from tap's own summary). A finding prints the
# seed, the case and the exact request, and how to replay it; see
# docs/testing.md, "Fuzzers".
set -uo pipefail
cd "$(dirname "$0")/../../.."
export PATH="$PWD/node_modules/.bin:$PATH"
secs=${SHARDCAR_FUZZ_SECONDS:-600}
export SHARDCAR_FUZZ_SECONDS="$secs"
# The proxies run in the test process; give it the sidecar's allocator
# setting (src/sidecar-runtime.ts), so that the RSS judged is theirs as
# shipped: without it, glibc's per-thread arenas (zlib and TLS work on
# libuv's threads) keep the high-water mark of a burst of large bodies.
export MALLOC_ARENA_MAX=2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# tap runs with the plugins package.json names only once rebuilt for them
# (as npm test does first): this lane works as the first command after npm ci.
tap build >/dev/null || { echo "fuzz: tap build failed"; echo "fuzz: 0 passed, 1 failed, 0 skipped"; exit 1; }
tap --disable-coverage --jobs=2 --timeout=$((secs * 2 + 600)) test/proxy/serving/fuzz.test.ts test/webhook/fuzz.test.ts test/webhook/label-fuzz.test.ts 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
summary=$(grep -aE '^# \{ total: [0-9]+' "$out" | tail -n 1)
pass=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary"); pass=${pass:-0}
fail=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary"); fail=${fail:-0}
skip=$(sed -nE 's/.*skip: ([0-9]+).*/\1/p' <<<"$summary"); skip=${skip:-0}
if [ -z "$summary" ] || { [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; }; then fail=$((fail + 1)); fi
tried=$(grep -aoE '# fuzz [a-z-]+: [0-9]+ requests tried' "$out" | awk '{ n += $4 } END { print n + 0 }')
echo "fuzz: $tried requests tried"
echo "fuzz: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$rc" -eq 0 ]
