/**
 * The pure half of the one-pod kubelet: what a kubelet and a container
 * runtime compute from a Pod before starting anything. The environment
 * (service links, `env` in order with `$(VAR)` expansion, `valueFrom`), the
 * command line (the image's ENTRYPOINT/CMD against `command`/`args`), the
 * user, named ports, and where each mount lands in the container's root.
 *
 * Anything the runner does not implement is refused with a message that
 * names it, never silently skipped: a test that passes here must not pass
 * because a field was ignored.
 */
import type { V1Container, V1EnvVar, V1Pod, V1Probe } from "@kubernetes/client-node";
import { posix } from "node:path";

/** What the runner knows about an image: its config (ENTRYPOINT, CMD, ENV, WORKDIR, USER) and files. */
export interface ImageSpec {
  readonly entrypoint: readonly string[];
  readonly cmd: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly workingDir: string;
  readonly user: { readonly uid: number; readonly gid: number };
  /** Container path → node path, bound read-only into the container's root (the image's own files). */
  readonly files: Readonly<Record<string, string>>;
}

export class UnsupportedError extends Error {}

/** The fieldRef paths a kubelet resolves; `podIP` and `hostIP` are the runner's. */
export function fieldRefValue(pod: V1Pod, fieldPath: string, ips: { podIP: string; hostIP: string }): string {
  const md = pod.metadata ?? {};
  const keyed = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath);
  if (keyed !== null) {
    const map = keyed[1] === "labels" ? md.labels : md.annotations;
    return map?.[keyed[2] ?? ""] ?? "";
  }
  switch (fieldPath) {
    case "metadata.name":
      return md.name ?? "";
    case "metadata.namespace":
      return md.namespace ?? "";
    case "metadata.uid":
      return md.uid ?? "";
    case "spec.nodeName":
      return pod.spec?.nodeName ?? "";
    case "spec.serviceAccountName":
      return pod.spec?.serviceAccountName ?? "";
    case "status.podIP":
    case "status.podIPs":
      return ips.podIP;
    case "status.hostIP":
    case "status.hostIPs":
      return ips.hostIP;
  }
  throw new UnsupportedError(`fieldRef ${JSON.stringify(fieldPath)} is not one the kubelet supports`);
}

/**
 * Kubelet's `$(VAR)` expansion (k8s.io/kubernetes third_party/forked/golang/expansion):
 * `$(NAME)` becomes the value when NAME is defined and stays as written when
 * not; `$$` is an escaped `$`.
 */
export function expand(input: string, vars: ReadonlyMap<string, string>): string {
  let out = "";
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    if (c !== "$" || i + 1 >= input.length) {
      out += c;
      continue;
    }
    const next = input[i + 1];
    if (next === "$") {
      out += "$";
      i++;
    } else if (next === "(") {
      const close = input.indexOf(")", i + 2);
      if (close < 0) {
        out += input.slice(i);
        break;
      }
      const name = input.slice(i + 2, close);
      const value = vars.get(name);
      out += value ?? `$(${name})`;
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

export type ObjectReader = (kind: "ConfigMap" | "Secret", namespace: string, name: string) => Promise<Record<string, unknown> | undefined>;

export interface EnvContext {
  readonly podIP: string;
  readonly hostIP: string;
  /** The `kubernetes` Service as the pod reaches it. */
  readonly kubernetes: { readonly host: string; readonly port: number };
  readonly read: ObjectReader;
}

/**
 * The container's environment in the order a kubelet builds it: the image's
 * ENV, the runtime's HOSTNAME and HOME, the `kubernetes` Service's variables
 * (always present, whatever `enableServiceLinks` says), then `envFrom` and
 * `env` in order, each `$(VAR)` expanded against what came before.
 */
export async function containerEnv(pod: V1Pod, c: V1Container, image: ImageSpec, ctx: EnvContext): Promise<Map<string, string>> {
  const env = new Map<string, string>(Object.entries(image.env));
  env.set("HOSTNAME", pod.metadata?.name ?? "");
  if (!env.has("HOME")) env.set("HOME", "/");
  const { host, port } = ctx.kubernetes;
  const service: Record<string, string> = {
    KUBERNETES_SERVICE_HOST: host,
    KUBERNETES_SERVICE_PORT: String(port),
    KUBERNETES_SERVICE_PORT_HTTPS: String(port),
    KUBERNETES_PORT: `tcp://${host}:${port}`,
    [`KUBERNETES_PORT_${port}_TCP`]: `tcp://${host}:${port}`,
    [`KUBERNETES_PORT_${port}_TCP_PROTO`]: "tcp",
    [`KUBERNETES_PORT_${port}_TCP_PORT`]: String(port),
    [`KUBERNETES_PORT_${port}_TCP_ADDR`]: host,
  };
  for (const [k, v] of Object.entries(service)) env.set(k, v);
  const namespace = pod.metadata?.namespace ?? "";
  for (const from of c.envFrom ?? []) {
    const ref = from.configMapRef ?? from.secretRef;
    const kind = from.configMapRef !== undefined ? "ConfigMap" : "Secret";
    const obj = ref?.name === undefined ? undefined : await ctx.read(kind, namespace, ref.name);
    if (obj === undefined) {
      if (ref?.optional === true) continue;
      throw new UnsupportedError(`envFrom ${kind} ${JSON.stringify(ref?.name)} not found (CreateContainerConfigError)`);
    }
    for (const [k, v] of Object.entries(dataOf(kind, obj))) env.set(`${from.prefix ?? ""}${k}`, v);
  }
  for (const e of c.env ?? []) env.set(e.name, await envValue(pod, e, env, ctx));
  return env;
}

async function envValue(pod: V1Pod, e: V1EnvVar, soFar: ReadonlyMap<string, string>, ctx: EnvContext): Promise<string> {
  if (e.valueFrom === undefined) return expand(e.value ?? "", soFar);
  const from = e.valueFrom;
  if (from.fieldRef !== undefined) return fieldRefValue(pod, from.fieldRef.fieldPath, ctx);
  const keyRef = from.configMapKeyRef ?? from.secretKeyRef;
  if (keyRef !== undefined) {
    const kind = from.configMapKeyRef !== undefined ? "ConfigMap" : "Secret";
    const obj = await ctx.read(kind, pod.metadata?.namespace ?? "", keyRef.name ?? "");
    const value = obj === undefined ? undefined : dataOf(kind, obj)[keyRef.key];
    if (value === undefined && keyRef.optional !== true) {
      throw new UnsupportedError(`env ${e.name}: ${kind} ${JSON.stringify(keyRef.name)} key ${JSON.stringify(keyRef.key)} not found (CreateContainerConfigError)`);
    }
    return value ?? "";
  }
  throw new UnsupportedError(`env ${e.name}: valueFrom ${JSON.stringify(Object.keys(from))} is not implemented by this runner`);
}

/** A ConfigMap's or Secret's string data (Secret `data` is base64). */
export function dataOf(kind: "ConfigMap" | "Secret", obj: Record<string, unknown>): Record<string, string> {
  const data = (obj["data"] ?? {}) as Record<string, string>;
  if (kind === "ConfigMap") return { ...data };
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]));
}

/**
 * The runtime's command line: `command` replaces ENTRYPOINT (and then the
 * image's CMD is dropped), `args` replaces CMD; both are `$(VAR)` expanded.
 */
export function commandLine(c: V1Container, image: ImageSpec, env: ReadonlyMap<string, string>): string[] {
  const entry = c.command !== undefined && c.command.length > 0 ? c.command : image.entrypoint;
  const args = c.args !== undefined && c.args.length > 0 ? c.args : c.command !== undefined && c.command.length > 0 ? [] : image.cmd;
  const argv = [...entry, ...args].map((a) => expand(a, env));
  if (argv.length === 0) throw new UnsupportedError(`container ${c.name}: no command (the image has no ENTRYPOINT or CMD)`);
  return argv;
}

export interface ProcessIdentity {
  readonly uid: number;
  readonly gid: number;
  readonly groups: readonly number[];
  readonly noNewPrivs: boolean;
  readonly dropAllCaps: boolean;
  readonly readOnlyRoot: boolean;
}

/** The user a runtime runs the container as: container securityContext, then the pod's, then the image's USER. */
export function identity(pod: V1Pod, c: V1Container, image: ImageSpec): ProcessIdentity {
  const psc = pod.spec?.securityContext ?? {};
  const sc = c.securityContext ?? {};
  const uid = sc.runAsUser ?? psc.runAsUser ?? image.user.uid;
  const gid = sc.runAsGroup ?? psc.runAsGroup ?? image.user.gid;
  if ((sc.runAsNonRoot ?? psc.runAsNonRoot) === true && uid === 0) {
    throw new UnsupportedError(`container ${c.name}: runAsNonRoot is set but the container would run as uid 0 (CreateContainerConfigError)`);
  }
  const groups = [...new Set([...(psc.fsGroup === undefined ? [] : [psc.fsGroup]), ...(psc.supplementalGroups ?? [])])];
  const drop = sc.capabilities?.drop ?? [];
  return {
    uid,
    gid,
    groups,
    noNewPrivs: sc.allowPrivilegeEscalation === false,
    dropAllCaps: drop.includes("ALL"),
    readOnlyRoot: sc.readOnlyRootFilesystem === true,
  };
}

/** A probe's or Service's port: a number, or the name of one of the container's ports. */
export function resolvePort(c: V1Container, port: number | string): number {
  if (typeof port === "number") return port;
  if (/^\d+$/.test(port)) return Number(port);
  const named = (c.ports ?? []).find((p) => p.name === port);
  if (named === undefined) throw new UnsupportedError(`container ${c.name} has no port named ${JSON.stringify(port)}`);
  return named.containerPort;
}

/** Probe timing with the API's defaults. */
export function probeTiming(p: V1Probe): { initialDelayMs: number; periodMs: number; timeoutMs: number; successThreshold: number; failureThreshold: number } {
  return {
    initialDelayMs: (p.initialDelaySeconds ?? 0) * 1000,
    periodMs: (p.periodSeconds ?? 10) * 1000,
    timeoutMs: (p.timeoutSeconds ?? 1) * 1000,
    successThreshold: p.successThreshold ?? 1,
    failureThreshold: p.failureThreshold ?? 3,
  };
}

/** How the node's top-level directories appear in a container's root. */
export type RootEntry = { readonly kind: "host-dir" } | { readonly kind: "symlink"; readonly target: string };

export interface NodeFs {
  /** The node's `/` entries that the container root shares (read-only binds and symlinks). */
  readonly top: ReadonlyMap<string, RootEntry>;
  /** lstat on the node: a directory, a symlink (with target), another file, or missing. */
  lstat(path: string): { readonly kind: "dir" | "file" | "missing" } | { readonly kind: "symlink"; readonly target: string };
}

/**
 * Where `path` lands in a container root built from `fs` (host directories
 * bound read-only at the top, everything else the container's own), with
 * symlinks resolved the way the container will see them. A mount point that
 * does not exist must be creatable in the container's own part: creating
 * directories in a read-only node directory would change the node.
 */
export function resolveInRoot(path: string, fs: NodeFs): { readonly path: string; readonly exists: boolean } {
  if (!path.startsWith("/")) throw new UnsupportedError(`mount path ${JSON.stringify(path)} is not absolute`);
  let pending = path.split("/").filter((p) => p !== "" && p !== ".");
  const done: string[] = [];
  for (let hops = 0; pending.length > 0; ) {
    const comp = pending.shift() ?? "";
    if (comp === "..") {
      done.pop();
      continue;
    }
    const here = [...done, comp];
    const top = fs.top.get(here[0] ?? "");
    let link: string | undefined;
    let missing = false;
    if (here.length === 1) {
      if (top?.kind === "symlink") link = top.target;
      missing = top === undefined;
    } else if (top?.kind === "host-dir") {
      const st = fs.lstat(`/${here.join("/")}`);
      if (st.kind === "symlink") link = st.target;
      missing = st.kind === "missing";
      if (missing) {
        throw new UnsupportedError(`mount path ${JSON.stringify(path)}: /${here.join("/")} does not exist in the node's read-only /${here[0] ?? ""}, and this runner never creates directories on the node`);
      }
    } else {
      missing = true;
    }
    if (link !== undefined) {
      if (++hops > 40) throw new UnsupportedError(`mount path ${JSON.stringify(path)}: too many symlinks`);
      const parts = link.split("/").filter((p) => p !== "" && p !== ".");
      if (link.startsWith("/")) done.length = 0;
      pending = [...parts, ...pending];
      continue;
    }
    done.push(comp);
    if (missing) return { path: posix.join("/", ...done, ...pending), exists: false };
  }
  return { path: posix.join("/", ...done), exists: true };
}
