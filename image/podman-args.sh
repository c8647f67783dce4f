# Sourced (bash): `podman_args_probe RUN-ARGS...` sets PODMAN_ARGS, the
# options `podman build` and `podman run` need on this host, by trying
# `podman run --rm --network=none [options] RUN-ARGS...` (an image and a
# command that exits 0) with more options each time until it works.
#
# Plain podman first. Two host limits need more, both seen in this project's
# sandbox (docs/install.md, "Building the image"):
#   - without CAP_SYS_RESOURCE, podman's default rlimits (nofile and nproc
#     raised to 1048576 for root) cannot be set: "crun: setrlimit
#     `RLIMIT_NOFILE`: Operation not permitted". Explicit --ulimit values
#     within the hard limits work.
#   - with cgroup v1 and a cgroup2 hierarchy that has a controller enabled
#     ("hybrid" mode), crun 1.8 refuses every container: "cgroups in hybrid
#     mode not supported, drop all controllers from cgroupv2"; runc accepts it.
# Each fallback is used only when the simpler form failed, and says so.
podman_args_probe() {
  local out nofile nproc
  nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ] && nofile=65536
  nproc=$(ulimit -Hu); [ "$nproc" = unlimited ] || [ "$nproc" -gt 4096 ] && nproc=4096
  local -a limits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
  local -a candidates=("" "${limits[*]}")
  command -v runc >/dev/null 2>&1 && candidates+=("--runtime runc ${limits[*]}")
  local c
  for c in "${candidates[@]}"; do
    # shellcheck disable=SC2086 # the candidates are word lists by construction
    if out=$(podman run --rm --network=none $c "$@" 2>&1); then
      # shellcheck disable=SC2206
      PODMAN_ARGS=($c)
      [ -z "$c" ] || echo "podman-args: plain podman run failed here; using: $c" >&2
      return 0
    fi
    echo "podman-args: podman run ${c:-(no extra options)} failed: $(tail -n 1 <<<"$out")" >&2
  done
  return 1
}
