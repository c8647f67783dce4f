#!/usr/bin/env bash
# npm run test:real — the real-server lane (issue 8).
#
#   1. ../shared/realapi/setup.sh builds the real k8s.io/apiserver 1.36 server
#      (cached in ~/.cache/shardcar-realapi; ~2.5 min on a clean machine).
#   2. start.sh on  -> seed the data set -> run test/real/*.test.ts -> stop
#   3. start.sh off on the same run directory (same etcd data) -> run again -> stop
#   4. The servers are always stopped and the run directory removed (trap).
#
# The last line is machine-readable, for .ci/run:
#   test:real: N passed, N failed, N skipped          (exit 0 when nothing failed, else 1)
#   test:real: skipped: <reason>                       (exit 75: the server could not be built)
#
# Environment: SHARDCAR_SHARED (default ../shared), SHARDCAR_REAL_GATES ("on off"),
# (exported to the suites: SHARDCAR_REAL_WEBHOOK_PORT, the loopback port the kit
# maps shardcar-system/shardcar-webhook:443 to),
# SHARDCAR_REAL_TESTS (test files, default test/real/*.test.ts),
# SHARDCAR_TEST_BREAK_PROXY=skip-watch-filter (test-only: every proxy skips its
# watch filter; the lane must then fail).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
SHARED=${SHARDCAR_SHARED:-$ROOT/../shared}
KIT="$SHARED/realapi"
GATES=${SHARDCAR_REAL_GATES:-on off}
# shellcheck disable=SC2206
FILES=(${SHARDCAR_REAL_TESTS:-test/real/*.test.ts})
# Node 24 from devDependencies (the system node may be older): tap's children use it too.
export PATH="$ROOT/node_modules/.bin:$PATH"
NODE=node
TAP=tap

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
log() { printf '\n=== test:real: %s\n' "$*"; }
secs() { awk -v ms="$1" 'BEGIN { printf "%.1f s", ms / 1000 }'; }
T_START=$(now_ms)
TIMES=()
PASS=0; FAIL=0; SKIP=0

# ---------------------------------------------------------------- setup
log "setup: $KIT/setup.sh"
SETUP_OUT=$(mktemp)
t0=$(now_ms)
if [ ! -x "$KIT/setup.sh" ]; then
  echo "test:real: skipped: $KIT/setup.sh not found (../shared/realapi is not beside the repository)"
  rm -f "$SETUP_OUT"; exit 75
fi
"$KIT/setup.sh" 2>&1 | tee "$SETUP_OUT"
setup_rc=${PIPESTATUS[0]}
TIMES+=("setup.sh|$(( $(now_ms) - t0 ))")
if [ "$setup_rc" -ne 0 ]; then
  reason=$(grep -E 'setup: ERROR' "$SETUP_OUT" | tail -n 1)
  [ -n "$reason" ] || reason="setup.sh exited $setup_rc: $(grep -v '^\s*$' "$SETUP_OUT" | tail -n 1)"
  rm -f "$SETUP_OUT"
  echo "test:real: skipped: the real API server could not be built: $reason"
  exit 75
fi
rm -f "$SETUP_OUT"

# ---------------------------------------------------------------- the build the pods run
# The injection suites run `shardcar manager` and the sidecar as pods on the
# one-pod kubelet (test/support/kubelet/), from this checkout's dist/ (the
# image's /app/dist/cli/bin.js).
log "build: npm run build"
t0=$(now_ms)
if ! npm run build --silent; then
  echo "test:real: npm run build failed"
  echo "test:real: 0 passed, 1 failed, 0 skipped"; exit 1
fi
TIMES+=("build|$(( $(now_ms) - t0 ))")

# ---------------------------------------------------------------- run directory, always cleaned up
RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/shardcar-realapi.XXXXXX")
OUT_DIR=$(mktemp -d "${TMPDIR:-/tmp}/shardcar-real-out.XXXXXX")
cleanup() {
  # Private servers the fault tests started inside the run directory
  # (test/support/faults/servers.ts), in case a test died before stopping its own.
  local private
  for private in "$RUN_DIR"/*/env; do
    [ -f "$private" ] && "$KIT/stop.sh" "$(dirname "$private")" >/dev/null 2>&1
  done
  if [ -f "$RUN_DIR/env" ]; then "$KIT/stop.sh" "$RUN_DIR" --clean >/dev/null 2>&1 || true; fi
  rm -rf "$RUN_DIR" "$OUT_DIR"
}
trap cleanup EXIT
trap 'echo "test:real: interrupted"; exit 130' INT TERM

finish() {
  log "times"
  local entry
  for entry in "${TIMES[@]}"; do printf '  %-28s %s\n' "${entry%%|*}" "$(secs "${entry##*|}")"; done
  printf '  %-28s %s\n' "total" "$(secs $(( $(now_ms) - T_START )))"
  echo "test:real: $PASS passed, $FAIL failed, $SKIP skipped"
  [ "$FAIL" -eq 0 ] && exit 0
  exit 1
}

# A loopback port for webhooks the suites serve, mapped to the service the
# manifests name (shardcar-system/shardcar-webhook:443): the kit then dials it
# with the TLS name shardcar-webhook.shardcar-system.svc and verifies caBundle,
# as kube-apiserver does (test/real/label-slots.test.ts). Picked once, so both
# gates use the same map.
WEBHOOK_PORT=$("$NODE" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
export SHARDCAR_REAL_WEBHOOK_PORT=$WEBHOOK_PORT
export REALAPI_WEBHOOK_SERVICES="shardcar-system/shardcar-webhook:443=127.0.0.1:$WEBHOOK_PORT${REALAPI_WEBHOOK_SERVICES:+,$REALAPI_WEBHOOK_SERVICES}"

seeded=0
for gate in $GATES; do
  log "start.sh $gate"
  t0=$(now_ms)
  # start.sh picks free ports and then binds them; on a busy machine another
  # process can take one in between (seen once in CI: "bind: address already
  # in use"). Its failure path stops what it started, so try again on fresh ports.
  started=0
  for attempt in 1 2 3; do
    if REALAPI_RUN_DIR="$RUN_DIR" "$KIT/start.sh" "$gate" >"$OUT_DIR/start.$gate" 2>&1; then started=1; break; fi
    grep -q "address already in use" "$OUT_DIR/start.$gate" || break
    echo "test:real: start.sh $gate lost a port race (attempt $attempt); retrying on other ports"
  done
  if [ "$started" -eq 0 ]; then
    cat "$OUT_DIR/start.$gate"
    echo "test:real: the real API server was built but did not start (gate $gate); logs: $RUN_DIR"
    tail -n 20 "$RUN_DIR/realapi.log" 2>/dev/null
    FAIL=$((FAIL + 1)); finish
  fi
  TIMES+=("start.sh $gate|$(( $(now_ms) - t0 ))")
  grep -E '^(REALAPI_URL|REALAPI_GATE_SHARDED|REALAPI_READY_MS)=' "$OUT_DIR/start.$gate"
  set -a
  # shellcheck disable=SC1091
  . "$RUN_DIR/env"
  set +a

  # Seeds on the first start; on the restart it finds everything there (409s)
  # and waits until the custom resources are served again (the first
  # custom-resource list after a restart can be a 429).
  t0=$(now_ms)
  if ! "$NODE" test/real/seed.ts; then
    echo "test:real: seeding the real API server failed (gate $gate)"
    FAIL=$((FAIL + 1)); "$KIT/stop.sh" "$RUN_DIR" >/dev/null; finish
  fi
  [ "$seeded" -eq 1 ] && label="seed check" || label="seed"
  TIMES+=("$label ($gate)|$(( $(now_ms) - t0 ))")
  seeded=1

  log "suites, gate $gate: ${FILES[*]}"
  t0=$(now_ms)
  "$TAP" --jobs=1 --disable-coverage --timeout=600 "${FILES[@]}" 2>&1 | tee "$OUT_DIR/tap.$gate"
  rc=${PIPESTATUS[0]}
  TIMES+=("suites, gate $gate|$(( $(now_ms) - t0 ))")
  summary=$(grep -aE '^# \{ total: [0-9]+' "$OUT_DIR/tap.$gate" | tail -n 1)
  p=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary"); p=${p:-0}
  f=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary"); f=${f:-0}
  s=$(sed -nE 's/.*skip: ([0-9]+).*/\1/p' <<<"$summary"); s=${s:-0}
  # A crash without a summary, or a non-zero exit without a counted failure, is a failure.
  if [ -z "$summary" ] || { [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; }; then f=$((f + 1)); fi
  PASS=$((PASS + p)); FAIL=$((FAIL + f)); SKIP=$((SKIP + s))
  echo "test:real: gate $gate: $p passed, $f failed, $s skipped"

  t0=$(now_ms)
  "$KIT/stop.sh" "$RUN_DIR"
  TIMES+=("stop.sh $gate|$(( $(now_ms) - t0 ))")
done
finish
