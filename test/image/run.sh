#!/usr/bin/env bash
# npm run test:image — the image lane (issue 15).
#
#   1. image/build.sh (npm run image): the local NODE_IMAGE from debootstrap
#      and the `node` devDependency (cached in ~/.cache/shardcar-image), then
#      `podman build` of the Dockerfile, tagged localhost/shardcar:test-lane.
#   2. test/image/*.test.ts against that image (tap), with the podman options
#      image/podman-args.sh found this host needs.
#   3. The image's size and layers (podman history), for docs/install.md.
#
# The last line is machine-readable, for .ci/run:
#   test:image: N passed, N failed, N skipped       (exit 0 when nothing failed, else 1)
#   test:image: skipped: <reason>                    (exit 75: podman, or what the build needs, is not installed)
# A build that fails with the tools present is a failure, never a skip.
#
# Environment: SHARDCAR_IMAGE_TAG (default localhost/shardcar:test-lane),
# SHARDCAR_IMAGE_TESTS (test files, default test/image/*.test.ts).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
TAG=${SHARDCAR_IMAGE_TAG:-localhost/shardcar:test-lane}
# shellcheck disable=SC2206
FILES=(${SHARDCAR_IMAGE_TESTS:-test/image/*.test.ts})
export PATH="$ROOT/node_modules/.bin:$PATH"

log() { printf '\n=== test:image: %s\n' "$*"; }
skip() { echo "test:image: skipped: $*"; exit 75; }

missing=()
for tool in podman debootstrap; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
[ "${#missing[@]}" -eq 0 ] || skip "not installed: ${missing[*]} (Debian packages podman, debootstrap)"
[ "$(id -u)" -eq 0 ] || skip "debootstrap and podman image mount need root; running as $(id -un)"

log "build: image/build.sh --tag $TAG"
t0=$(date +%s)
BUILD_OUT=$(mktemp)
trap 'rm -f "$BUILD_OUT"' EXIT
bash image/build.sh --tag "$TAG" 2>&1 | tee "$BUILD_OUT"
build_rc=${PIPESTATUS[0]}
echo "test:image: build took $(( $(date +%s) - t0 )) s"
if [ "$build_rc" -ne 0 ]; then
  echo "test:image: the image did not build (exit $build_rc)"
  echo "test:image: 0 passed, 1 failed, 0 skipped"
  exit 1
fi

# The options the build used are the ones the tests' `podman run` need.
# shellcheck source=image/podman-args.sh
. image/podman-args.sh
if ! podman_args_probe "$TAG" --help >/dev/null; then
  echo "test:image: the image was built but podman cannot run it here (attempts above)"
  echo "test:image: 0 passed, 1 failed, 0 skipped"
  exit 1
fi
export SHARDCAR_IMAGE=$TAG SHARDCAR_PODMAN_ARGS="${PODMAN_ARGS[*]}"

log "size and layers of $TAG"
podman images "$TAG"
podman history --format '{{.Size}}\t{{.CreatedBy}}' "$TAG" | cut -c1-150

log "suites: ${FILES[*]}"
# tap's plugin set comes from package.json (its TypeScript plugin off) only once built.
tap build >/dev/null
TAP_OUT=$(mktemp)
trap 'rm -f "$BUILD_OUT" "$TAP_OUT"' EXIT
tap --jobs=1 --disable-coverage --timeout=600 "${FILES[@]}" 2>&1 | tee "$TAP_OUT"
rc=${PIPESTATUS[0]}
summary=$(grep -aE '^# \{ total: [0-9]+' "$TAP_OUT" | tail -n 1)
p=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary"); p=${p:-0}
f=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary"); f=${f:-0}
s=$(sed -nE 's/.*skip: ([0-9]+).*/\1/p' <<<"$summary"); s=${s:-0}
if [ -z "$summary" ] || { [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; }; then f=$((f + 1)); fi
echo "test:image: $p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
