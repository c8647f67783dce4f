/**
 * The one-pod kubelet's volumes, on the node under `<pod dir>/volumes/`:
 *
 * - `emptyDir`: a directory (mode 0777, as the kubelet makes it); with
 *   `medium: Memory` the sandbox mounts a tmpfs of `sizeLimit` over it;
 * - `secret`, `configMap`, `downwardAPI` and `projected` (with
 *   `serviceAccountToken`): files written the kubelet's way (its
 *   AtomicWriter: a timestamped directory, a `..data` symlink swapped by
 *   rename, and one symlink per top-level name), with `defaultMode`/`mode`,
 *   and with the kubelet's ownership rules (see {@link fileOwner});
 *   `refresh()` rewrites them when their sources changed, which is how a
 *   rotated token or a renewed certificate reaches a running container.
 *
 * Anything else (hostPath, PVCs, ...) is refused by name.
 */
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { V1KeyToPath, V1Pod, V1Volume } from "@kubernetes/client-node";
import { UnsupportedError, dataOf, fieldRefValue, type ObjectReader } from "./spec.ts";

export interface VolumeContext {
  readonly dir: string;
  readonly read: ObjectReader;
  /** The token the kubelet's TokenRequest would return for this pod and projection. */
  readonly token: (audience: string | undefined, expirationSeconds: number) => string;
  readonly podIP: string;
  readonly hostIP: string;
}

interface FileContent {
  readonly content: string;
  readonly mode: number;
  readonly token?: true;
}

/** A materialised volume: where it is on the node, and how to bring it up to date. */
export interface NodeVolume {
  readonly name: string;
  readonly path: string;
  /** `medium: Memory` emptyDir: the sandbox mounts a tmpfs here. */
  readonly tmpfs?: { readonly size: string | undefined };
  /** Rewrites the files when a source changed; resolves to whether anything was written. */
  refresh(): Promise<boolean>;
}

/** `1Mi` → `1m`, `64Ki` → `64k` (tmpfs's size suffixes); plain bytes stay. */
export function tmpfsSize(quantity: string | undefined): string | undefined {
  if (quantity === undefined) return undefined;
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity);
  if (m === null) throw new UnsupportedError(`emptyDir sizeLimit ${JSON.stringify(quantity)}: this runner understands plain bytes, Ki, Mi and Gi`);
  return `${m[1] ?? ""}${m[2] === undefined ? "" : (m[2][0] ?? "").toLowerCase()}`;
}

/**
 * Who owns the files of a secret/configMap/projected volume, and which mode
 * bits they get, as the kubelet decides: with `fsGroup`, group fsGroup and
 * group-readable; without, root and the mode as given. A projected
 * service-account token is the exception: when every container runs as the
 * same explicit user, the kubelet gives the token file to that user with
 * mode 0600 (kubernetes#89193).
 */
export interface FileOwner {
  readonly uid: number;
  readonly gid: number;
  mode(requested: number): number;
}

export function fileOwner(pod: V1Pod, token: boolean): FileOwner {
  if (token) {
    const all = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
    const users = new Set(all.map((c) => c.securityContext?.runAsUser ?? pod.spec?.securityContext?.runAsUser));
    const [only] = [...users];
    if (users.size === 1 && only !== undefined) return { uid: only, gid: pod.spec?.securityContext?.fsGroup ?? 0, mode: () => 0o600 };
  }
  const fsGroup = pod.spec?.securityContext?.fsGroup;
  if (fsGroup !== undefined) return { uid: 0, gid: fsGroup, mode: (m) => m | 0o040 };
  return { uid: 0, gid: 0, mode: (m) => m };
}

/** Creates every volume of `pod` under `<dir>/volumes/`. */
export async function materializeVolumes(pod: V1Pod, ctx: VolumeContext): Promise<NodeVolume[]> {
  const out: NodeVolume[] = [];
  for (const v of pod.spec?.volumes ?? []) out.push(await materialize(pod, v, ctx));
  return out;
}

async function materialize(pod: V1Pod, v: V1Volume, ctx: VolumeContext): Promise<NodeVolume> {
  const path = join(ctx.dir, "volumes", v.name);
  mkdirSync(path, { recursive: true });
  if (v.emptyDir !== undefined) {
    chmodSync(path, 0o777);
    const memory = v.emptyDir.medium === "Memory";
    return { name: v.name, path, ...(memory ? { tmpfs: { size: tmpfsSize(v.emptyDir.sizeLimit) } } : {}), refresh: async () => false };
  }
  const files = async (): Promise<Map<string, FileContent>> => filesOf(pod, v, ctx);
  const writer = new AtomicWriter(path, { file: fileOwner(pod, false), token: fileOwner(pod, true) });
  writer.write(await files());
  return {
    name: v.name,
    path,
    refresh: async () => writer.write(await files()),
  };
}

async function filesOf(pod: V1Pod, v: V1Volume, ctx: VolumeContext): Promise<Map<string, FileContent>> {
  const out = new Map<string, FileContent>();
  const namespace = pod.metadata?.namespace ?? "";
  const put = (path: string, content: string, mode: number, token = false): void => {
    if (path.startsWith("/") || path.split("/").includes("..")) throw new UnsupportedError(`volume ${v.name}: item path ${JSON.stringify(path)} is not a relative path inside the volume`);
    out.set(path, { content, mode, ...(token ? { token: true as const } : {}) });
  };
  const keyed = async (kind: "ConfigMap" | "Secret", name: string, items: readonly V1KeyToPath[] | undefined, optional: boolean | undefined, mode: number): Promise<void> => {
    const obj = await ctx.read(kind, namespace, name);
    if (obj === undefined) {
      if (optional === true) return;
      throw new UnsupportedError(`volume ${v.name}: ${kind} ${namespace}/${name} not found (the kubelet keeps the pod in ContainerCreating)`);
    }
    const data = dataOf(kind, obj);
    if (items === undefined) {
      for (const [k, val] of Object.entries(data)) put(k, val, mode);
      return;
    }
    for (const it of items) {
      const val = data[it.key];
      if (val === undefined) {
        if (optional === true) continue;
        throw new UnsupportedError(`volume ${v.name}: ${kind} ${namespace}/${name} has no key ${JSON.stringify(it.key)}`);
      }
      put(it.path, val, it.mode ?? mode);
    }
  };
  if (v.secret !== undefined) {
    await keyed("Secret", v.secret.secretName ?? "", v.secret.items, v.secret.optional, v.secret.defaultMode ?? 0o644);
  } else if (v.configMap !== undefined) {
    await keyed("ConfigMap", v.configMap.name ?? "", v.configMap.items, v.configMap.optional, v.configMap.defaultMode ?? 0o644);
  } else if (v.downwardAPI !== undefined) {
    for (const it of v.downwardAPI.items ?? []) {
      if (it.fieldRef === undefined) throw new UnsupportedError(`volume ${v.name}: downwardAPI item ${it.path} without fieldRef is not implemented`);
      put(it.path, fieldRefValue(pod, it.fieldRef.fieldPath, ctx), it.mode ?? v.downwardAPI.defaultMode ?? 0o644);
    }
  } else if (v.projected !== undefined) {
    const mode = v.projected.defaultMode ?? 0o644;
    for (const s of v.projected.sources ?? []) {
      if (s.serviceAccountToken !== undefined) {
        put(s.serviceAccountToken.path, ctx.token(s.serviceAccountToken.audience, s.serviceAccountToken.expirationSeconds ?? 3600), mode, true);
      } else if (s.configMap !== undefined) {
        await keyed("ConfigMap", s.configMap.name ?? "", s.configMap.items, s.configMap.optional, mode);
      } else if (s.secret !== undefined) {
        await keyed("Secret", s.secret.name ?? "", s.secret.items, s.secret.optional, mode);
      } else if (s.downwardAPI !== undefined) {
        for (const it of s.downwardAPI.items ?? []) {
          if (it.fieldRef === undefined) throw new UnsupportedError(`volume ${v.name}: downwardAPI item ${it.path} without fieldRef is not implemented`);
          put(it.path, fieldRefValue(pod, it.fieldRef.fieldPath, ctx), it.mode ?? mode);
        }
      } else {
        throw new UnsupportedError(`volume ${v.name}: projected source ${JSON.stringify(Object.keys(s))} is not implemented`);
      }
    }
  } else {
    throw new UnsupportedError(`volume ${v.name}: ${JSON.stringify(Object.keys(v).filter((k) => k !== "name"))} is not implemented by this runner (emptyDir, secret, configMap, downwardAPI, projected are)`);
  }
  return out;
}

/**
 * The kubelet's AtomicWriter: a reader sees the whole old set of files or
 * the whole new one, never a mix, because only the `..data` symlink changes,
 * by rename.
 */
class AtomicWriter {
  readonly #dir: string;
  readonly #owners: { readonly file: FileOwner; readonly token: FileOwner };
  #last = "";
  #generation = 0;
  constructor(dir: string, owners: { readonly file: FileOwner; readonly token: FileOwner }) {
    this.#dir = dir;
    this.#owners = owners;
    chmodSync(dir, 0o755);
  }
  write(files: ReadonlyMap<string, FileContent>): boolean {
    const fingerprint = JSON.stringify([...files].sort(([a], [b]) => a.localeCompare(b)));
    if (fingerprint === this.#last) return false;
    const stamp = `..${new Date().toISOString().replace(/[-:.]/g, "_")}.${process.pid}.${++this.#generation}`;
    const staged = join(this.#dir, stamp);
    mkdirSync(staged, { mode: 0o755 });
    for (const [path, f] of files) {
      const file = join(staged, path);
      mkdirSync(dirname(file), { recursive: true, mode: 0o755 });
      const owner = f.token === true ? this.#owners.token : this.#owners.file;
      writeFileSync(file, f.content);
      chmodSync(file, owner.mode(f.mode));
      chownSync(file, owner.uid, owner.gid);
    }
    const data = join(this.#dir, "..data");
    const previous = existsSync(data) ? readlinkSync(data) : undefined;
    const tmp = join(this.#dir, "..data_tmp");
    rmSync(tmp, { force: true });
    symlinkSync(stamp, tmp);
    renameSync(tmp, data);
    for (const top of new Set([...files.keys()].map((p) => p.split("/")[0] ?? ""))) {
      const link = join(this.#dir, top);
      if (!existsSync(link)) symlinkSync(join("..data", top), link);
    }
    if (previous !== undefined) rmSync(join(this.#dir, previous), { recursive: true, force: true });
    this.#last = fingerprint;
    return true;
  }
}

/** The content of a file in a volume, through its symlinks (for tests). */
export function readVolumeFile(volume: NodeVolume, path: string): string {
  return readFileSync(join(volume.path, path), "utf8");
}
