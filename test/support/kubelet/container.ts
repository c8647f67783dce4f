/**
 * How one container process is started: the root filesystem and mounts a
 * runtime would give it, built by a shell script that runs in a private
 * mount namespace entered from the pod sandbox's, and then `chroot` +
 * `setpriv` into the container's user. The chain only ever `exec`s, so the
 * spawned PID is the container's process: SIGKILL on it is a crash.
 *
 * The root is a fresh tmpfs (the container's own writable layer, remounted
 * read-only for `readOnlyRootFilesystem`) with the node's top-level
 * directories bound read-only into it (the "image": binaries, libraries, the
 * worktree), `/proc`, `/dev`, `/sys` from the node, and an empty `/run` and
 * `/tmp` of its own. Volumes are bound at their mountPaths, read-only where
 * the mount says so.
 */
import { lstatSync, readdirSync, readlinkSync } from "node:fs";
import { join, posix } from "node:path";
import type { V1Container } from "@kubernetes/client-node";
import { UnsupportedError, resolveInRoot, type ImageSpec, type NodeFs, type ProcessIdentity, type RootEntry } from "./spec.ts";
import type { NodeVolume } from "./volumes.ts";

/** Directories every container gets from the node read-write (kernel interfaces). */
const KERNEL_DIRS = new Set(["proc", "dev", "sys"]);
/** Top-level names the container owns (empty in its root), never the node's. */
const OWN_DIRS = new Set(["run", "tmp"]);

/** The node's filesystem as seen when building container roots. */
export function nodeFs(): NodeFs {
  const top = new Map<string, RootEntry>();
  for (const name of readdirSync("/")) {
    if (OWN_DIRS.has(name)) continue;
    const st = lstatSync(join("/", name));
    if (st.isSymbolicLink()) top.set(name, { kind: "symlink", target: readlinkSync(join("/", name)) });
    else if (st.isDirectory()) top.set(name, { kind: "host-dir" });
  }
  return {
    top,
    lstat(path) {
      try {
        const st = lstatSync(path);
        if (st.isSymbolicLink()) return { kind: "symlink", target: readlinkSync(path) };
        return { kind: st.isDirectory() ? "dir" : "file" };
      } catch {
        return { kind: "missing" };
      }
    },
  };
}

const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

export interface MountPlanEntry {
  readonly source: string;
  /** Path inside the container root, symlinks resolved. */
  readonly target: string;
  readonly readOnly: boolean;
  readonly file: boolean;
}

/** Where the container's image files and volume mounts go, in mount order. */
export function mountPlan(c: V1Container, image: ImageSpec, volumes: ReadonlyMap<string, NodeVolume>, fs: NodeFs): MountPlanEntry[] {
  const plan: MountPlanEntry[] = [];
  for (const [path, source] of Object.entries(image.files)) {
    const st = fs.lstat(source);
    plan.push({ source, target: resolveInRoot(path, fs).path, readOnly: true, file: st.kind === "file" });
  }
  const mounts = [...(c.volumeMounts ?? [])].sort((a, b) => a.mountPath.split("/").length - b.mountPath.split("/").length);
  for (const m of mounts) {
    const v = volumes.get(m.name);
    if (v === undefined) throw new UnsupportedError(`container ${c.name}: volumeMount ${JSON.stringify(m.name)} names no volume of the pod`);
    if (m.subPathExpr !== undefined) throw new UnsupportedError(`container ${c.name}: subPathExpr is not implemented`);
    if (m.mountPropagation !== undefined && m.mountPropagation !== "None") throw new UnsupportedError(`container ${c.name}: mountPropagation ${m.mountPropagation} is not implemented`);
    const source = m.subPath === undefined || m.subPath === "" ? v.path : posix.join(v.path, m.subPath);
    plan.push({ source, target: resolveInRoot(m.mountPath, fs).path, readOnly: m.readOnly === true, file: m.subPath !== undefined && fs.lstat(source).kind === "file" });
  }
  return plan;
}

/**
 * The setup script. `$@` is the container's argv; the script ends by
 * exec'ing it in the new root as the container's user.
 */
export function setupScript(root: string, fs: NodeFs, plan: readonly MountPlanEntry[], id: ProcessIdentity, workingDir: string): string {
  const lines = ["set -e", `R=${q(root)}`, `/usr/bin/mount -t tmpfs -o mode=0755 tmpfs "$R"`];
  for (const [name, entry] of [...fs.top].sort(([a], [b]) => a.localeCompare(b))) {
    if (entry.kind === "symlink") {
      lines.push(`/bin/ln -s ${q(entry.target)} "$R"/${q(name)}`);
      continue;
    }
    lines.push(`/bin/mkdir "$R"/${q(name)}`, `/usr/bin/mount --rbind /${q(name)} "$R"/${q(name)}`);
    if (!KERNEL_DIRS.has(name)) lines.push(`/usr/bin/mount -o remount,bind,ro "$R"/${q(name)}`);
  }
  lines.push(`/bin/mkdir -m 0755 "$R/run"`, `/bin/mkdir -m 1777 "$R/tmp"`);
  for (const m of plan) {
    const target = `"$R"${q(m.target)}`;
    if (m.file) lines.push(`/bin/mkdir -p "$(/usr/bin/dirname ${target})"`, `[ -e ${target} ] || /usr/bin/touch ${target}`);
    else lines.push(`/bin/mkdir -p ${target}`);
    lines.push(`/usr/bin/mount --bind ${q(m.source)} ${target}`);
    if (m.readOnly) lines.push(`/usr/bin/mount -o remount,bind,ro ${target}`);
  }
  if (id.readOnlyRoot) lines.push(`/usr/bin/mount -o remount,ro "$R"`);
  lines.push(`exec /usr/sbin/chroot "$R" /usr/bin/env --chdir=${q(workingDir)} ${setprivArgs(id).map(q).join(" ")} -- "$@"`);
  return lines.join("\n");
}

/** `setpriv` with the container's uid, gid, groups and privilege settings (used for the process and for exec). */
export function setprivArgs(id: ProcessIdentity): string[] {
  return [
    "/usr/bin/setpriv",
    `--reuid=${id.uid}`,
    `--regid=${id.gid}`,
    id.groups.length === 0 ? "--clear-groups" : `--groups=${id.groups.join(",")}`,
    ...(id.noNewPrivs ? ["--no-new-privs"] : []),
    ...(id.dropAllCaps ? ["--bounding-set=-all", "--inh-caps=-all"] : []),
    // Dies with the test process that is its kubelet: nothing outlives a
    // crashed test run (set after the uid change, which would clear it).
    "--pdeathsig=SIGKILL",
  ];
}
