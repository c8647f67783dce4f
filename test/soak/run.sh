#!/usr/bin/env bash
# npm run soak — the soak lane (test/soak/soak.test.ts, docs/testing.md).
# Knobs are the test's (SHARDCAR_SOAK_MINUTES, ..._SAMPLE_SECONDS, ...).
# The last line is for .ci/run:  soak: N passed, N failed, N skipped
# (exit 0 when nothing failed, else 1; a run without a summary is a failure).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/node_modules/.bin:$PATH"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# tap's plugins are built once after a clean install (as npm test does).
tap build >/dev/null
tap --disable-coverage --jobs=1 --timeout=0 -R tap test/soak/soak.test.ts 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
summary=$(grep -aE '^# \{ total: [0-9]+' "$out" | tail -n 1)
p=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary"); p=${p:-0}
f=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary"); f=${f:-0}
s=$(sed -nE 's/.*skip: ([0-9]+).*/\1/p' <<<"$summary"); s=${s:-0}
if [ -z "$summary" ] || { [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; }; then f=$((f + 1)); fi
echo "soak: $p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
