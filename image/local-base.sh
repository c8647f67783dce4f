#!/usr/bin/env bash
# Makes the Dockerfile's NODE_IMAGE locally, from Debian's packages and the
# npm registry only, for machines that cannot pull node:24-bookworm-slim:
#
#   debootstrap --variant=minbase bookworm   (glibc, libstdc++, a shell, dpkg)
#   + node   from the project's `node` devDependency (node_modules/node/bin/node)
#   + npm    from the npm registry (`npm pack npm@$NPM_VERSION`)
#
# imported with `podman import` as localhost/shardcar-node-base:<key>, where
# <key> hashes every input (suite, variant, mirror, architecture, this
# script, the node binary, the npm version). The debootstrap tree is cached
# in $SHARDCAR_IMAGE_CACHE (default ~/.cache/shardcar-image) under the same
# kind of key, so a second run takes seconds; a clean machine builds it in
# about half a minute. Prints the image's name as its last line.
#
# Needs root (debootstrap), debootstrap, podman, and `npm ci` done.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

SUITE=${SHARDCAR_DEBIAN_SUITE:-bookworm}
MIRROR=${SHARDCAR_DEBIAN_MIRROR:-http://deb.debian.org/debian}
VARIANT=minbase
# The npm that Node 24.21.0 bundles (its changelog: "upgrade npm to 11.19.0"
# in 24.20.0, none since), so `npm ci` in the build stages behaves as with
# the official node image.
NPM_VERSION=${SHARDCAR_NPM_VERSION:-11.19.0}
CACHE=${SHARDCAR_IMAGE_CACHE:-$HOME/.cache/shardcar-image}
NODE_BIN=$ROOT/node_modules/node/bin/node

say() { echo "local-base: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "debootstrap needs root (run as root, or pull node:24-bookworm-slim and skip this step)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
command -v podman >/dev/null || die "podman is not installed (apt-get install podman)"
[ -x "$NODE_BIN" ] || die "$NODE_BIN is missing: run npm ci first"
node_version=$("$NODE_BIN" --version)
[[ "$node_version" == v24.* ]] || die "$NODE_BIN is $node_version, not Node 24"
ARCH=$(dpkg --print-architecture)

hash() { sha256sum | cut -c1-16; }
script_sum=$(hash <"$0")
deb_key=$(printf '%s\n' "$SUITE" "$VARIANT" "$MIRROR" "$ARCH" "$script_sum" | hash)
node_sum=$(hash <"$NODE_BIN")
key=$(printf '%s\n' "$deb_key" "$node_sum" "$NPM_VERSION" | hash)
IMAGE=localhost/shardcar-node-base:$key

if podman image exists "$IMAGE"; then
  say "$IMAGE is up to date (node $node_version, npm $NPM_VERSION, debian $SUITE/$ARCH)"
  echo "$IMAGE"; exit 0
fi

mkdir -p "$CACHE"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/shardcar-base.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

deb_tar=$CACHE/debootstrap-$SUITE-$ARCH-$deb_key.tar
if [ ! -s "$deb_tar" ]; then
  say "debootstrap --variant=$VARIANT $SUITE ($ARCH) from $MIRROR"
  if ! debootstrap --variant="$VARIANT" --arch="$ARCH" "$SUITE" "$WORK/deb" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
    tail -n 20 "$WORK/debootstrap.log" >&2
    die "debootstrap failed (log above)"
  fi
  # Downloaded .debs and package lists are not part of a base image.
  rm -rf "$WORK/deb/var/cache/apt/archives/"*.deb "$WORK/deb/var/lib/apt/lists/"*
  tar -C "$WORK/deb" --numeric-owner -cf "$deb_tar.tmp" . && mv "$deb_tar.tmp" "$deb_tar"
  rm -rf "$WORK/deb"
  say "cached $deb_tar"
fi

npm_tgz=$CACHE/npm-$NPM_VERSION.tgz
if [ ! -s "$npm_tgz" ]; then
  say "npm pack npm@$NPM_VERSION"
  (cd "$WORK" && npm pack --silent "npm@$NPM_VERSION" >/dev/null) || die "npm pack npm@$NPM_VERSION failed"
  mv "$WORK/npm-$NPM_VERSION.tgz" "$npm_tgz"
fi

say "assembling $IMAGE"
mkdir "$WORK/root"
tar -C "$WORK/root" --numeric-owner -xf "$deb_tar"
install -D -m 0755 "$NODE_BIN" "$WORK/root/usr/local/bin/node"
# Node's licence, from the platform package npm installed beside it.
for license in "$ROOT"/node_modules/node/node_modules/node-linux-*/LICENSE; do
  if [ -f "$license" ]; then install -D -m 0644 "$license" "$WORK/root/usr/local/share/doc/node/LICENSE"; fi
done
mkdir -p "$WORK/root/usr/local/lib/node_modules/npm"
tar -C "$WORK/root/usr/local/lib/node_modules/npm" --strip-components=1 -xzf "$npm_tgz"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$WORK/root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$WORK/root/usr/local/bin/npx"

tar -C "$WORK/root" --numeric-owner -c . | podman import \
  --change 'ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD=["node"]' \
  --message "shardcar local NODE_IMAGE: debian $SUITE $VARIANT ($ARCH), node $node_version, npm $NPM_VERSION" \
  - "$IMAGE" >/dev/null
say "built $IMAGE (node $node_version, npm $NPM_VERSION, debian $SUITE/$ARCH)"
echo "$IMAGE"
