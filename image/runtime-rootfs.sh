#!/bin/sh
# Assembles the runtime root filesystem of the shardcar image in DEST (the
# Dockerfile's `rootfs` stage runs this inside NODE_IMAGE): the `node` binary
# and exactly the shared libraries it loads, copied from NODE_IMAGE, plus the
# few files a non-root process expects. No shell, no package manager, no npm,
# no compilers: the final stage is `FROM scratch` with this tree.
#
# The same script serves the official node:24-bookworm-slim (the release
# workflow) and the debootstrap-based image `image/local-base.sh` makes, so
# both produce the same layout. POSIX sh: NODE_IMAGE's /bin/sh may be dash.
set -eu
DEST=${1:?usage: runtime-rootfs.sh DEST}
UID_NONROOT=65532

node_bin=$(command -v node)
mkdir -p "$DEST/usr/local/bin" "$DEST/etc" "$DEST/tmp" "$DEST/home/nonroot" \
  "$DEST/var/lib/dpkg/status.d" "$DEST/usr/share/doc"
cp "$node_bin" "$DEST/usr/local/bin/node"

# The loader and every library ldd resolves, at the paths ldd prints (tar -h
# follows Debian's /lib -> usr/lib and /lib64 symlinks, so each arrives as a
# plain file where the loader looks for it). On arm64 the loader is
# /lib/ld-linux-aarch64.so.1; nothing here names an architecture.
libs=$(ldd "$node_bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
[ -n "$libs" ] || { echo "runtime-rootfs: ldd found no libraries for $node_bin" >&2; exit 1; }
# shellcheck disable=SC2086 # one path per word, by construction
tar -chf - $libs | tar -xf - -C "$DEST"

# Which Debian packages those files came from: their copyright files (glibc
# is LGPL) and their dpkg status, in the distroless layout (status.d/<pkg>)
# that image scanners read to know what is installed.
pkgs=$(for f in $libs; do dpkg-query -S "$f" 2>/dev/null || dpkg-query -S "$(readlink -f "$f")" 2>/dev/null || true; done \
  | sed -E 's/:[^:]*$//; s/, /\n/g' | sed -E 's/:[a-z0-9]+$//' | sort -u)
for p in $pkgs; do
  dpkg-query -s "$p" >"$DEST/var/lib/dpkg/status.d/$p"
  if [ -f "/usr/share/doc/$p/copyright" ]; then
    mkdir -p "$DEST/usr/share/doc/$p" && cp "/usr/share/doc/$p/copyright" "$DEST/usr/share/doc/$p/"
  fi
done
# Node's own licence, where NODE_IMAGE ships it.
if [ -f /usr/local/share/doc/node/LICENSE ]; then
  mkdir -p "$DEST/usr/local/share/doc/node" && cp /usr/local/share/doc/node/LICENSE "$DEST/usr/local/share/doc/node/"
fi
cp /etc/os-release "$DEST/etc/os-release"

# Users: numeric 65532 runs everything (runAsNonRoot can check it); the names
# only make `ps` and os.userInfo() readable.
cat >"$DEST/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:$UID_NONROOT:$UID_NONROOT:nonroot:/home/nonroot:/sbin/nologin
EOF
cat >"$DEST/etc/group" <<EOF
root:x:0:
nonroot:x:$UID_NONROOT:
EOF
# getaddrinfo (Node's dns.lookup) reads this; glibc 2.34+ has files and dns built in.
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$DEST/etc/nsswitch.conf"
chmod 1777 "$DEST/tmp"
chown "$UID_NONROOT:$UID_NONROOT" "$DEST/home/nonroot"
chmod 0700 "$DEST/home/nonroot"
