#!/usr/bin/env bash
# npm run image [-- --tag NAME] [-- --node-image IMAGE]
#
# Builds the shardcar image from this checkout with podman, reaching no
# registry but npm's and Debian's: image/local-base.sh makes NODE_IMAGE from
# debootstrap and the `node` devDependency (cached; skipped with
# --node-image, e.g. --node-image docker.io/library/node:24-bookworm-slim
# where Docker Hub is reachable), then `podman build` of the Dockerfile.
#
#   --tag NAME        default localhost/shardcar:<package.json version>
#   --node-image IMG  use IMG as NODE_IMAGE instead of building one
#
# npm's CA bundle (npm config cafile, else NODE_EXTRA_CA_CERTS), when set, is
# passed to the build stages as the `npm-ca` secret, so a TLS-intercepting
# proxy in front of the registry works without baking its CA into a layer.
# Prints `image: NAME` as its last line. Needs podman (and, without
# --node-image, root and debootstrap).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

version=$(node -p 'require("./package.json").version' 2>/dev/null || sed -nE 's/^  "version": "([^"]+)".*/\1/p' package.json)
TAG=localhost/shardcar:$version
NODE_IMAGE=
while [ $# -gt 0 ]; do
  case $1 in
    --tag) TAG=${2:?--tag needs a name}; shift 2 ;;
    --tag=*) TAG=${1#--tag=}; shift ;;
    --node-image) NODE_IMAGE=${2:?--node-image needs an image}; shift 2 ;;
    --node-image=*) NODE_IMAGE=${1#--node-image=}; shift ;;
    *) echo "image/build.sh: unknown argument $1 (allowed: --tag NAME, --node-image IMAGE)" >&2; exit 2 ;;
  esac
done

command -v podman >/dev/null || { echo "image/build.sh: podman is not installed (apt-get install podman)" >&2; exit 1; }
if [ -z "$NODE_IMAGE" ]; then
  NODE_IMAGE=$(bash "$ROOT/image/local-base.sh" | tail -n 1)
fi

# shellcheck source=image/podman-args.sh
. "$ROOT/image/podman-args.sh"
podman_args_probe --entrypoint /bin/true "$NODE_IMAGE" || { echo "image/build.sh: podman cannot start a container of $NODE_IMAGE here (attempts above)" >&2; exit 1; }

secret=()
ca=$(npm config get cafile 2>/dev/null || true)
[ -n "$ca" ] && [ "$ca" != null ] && [ "$ca" != undefined ] || ca=${NODE_EXTRA_CA_CERTS:-}
if [ -n "$ca" ] && [ -s "$ca" ]; then
  secret=(--secret "id=npm-ca,src=$ca")
  echo "image/build.sh: passing $ca to npm in the build stages (secret npm-ca)" >&2
fi

echo "image/build.sh: podman build -t $TAG --build-arg NODE_IMAGE=$NODE_IMAGE ${PODMAN_ARGS[*]}" >&2
podman build "${PODMAN_ARGS[@]}" "${secret[@]}" \
  --build-arg "NODE_IMAGE=$NODE_IMAGE" \
  --tag "$TAG" --file "$ROOT/Dockerfile" "$ROOT" >&2
echo "image: $TAG"
