/**
 * The injection decision: a pure function of the raw pod, the manager's
 * configuration and the admission request's namespace. It reads; it never
 * edits. Patch generation (`patch.ts`) acts on the plan it returns.
 *
 * Checks run in a fixed order and the first that applies wins, so the
 * answer (and the message a user sees) is deterministic:
 *
 * 1. the `shardcar.io/inject` toggle (label over annotation);
 * 2. already injected (sidecar present) — skipped, never injected twice;
 * 3. `shardcar.io/status` without a sidecar — refused (a copied pod);
 * 4. the manager's own namespace — refused;
 * 5. `hostNetwork` — refused;
 * 6. every `shardcar.io/` annotation — all problems reported together;
 * 7. `ordinal/N` needs a StatefulSet pod name;
 * 8. the ring's name (explicit, or the owning workload);
 * 9. names shardcar reserves;
 * 10. the service-account token the app containers use;
 * 11. ports the sidecar needs.
 */
import { ordinalOf } from "../shard/spec.ts";
import { isValidRingName } from "../settings/pod-settings.ts";
import { ANNOTATIONS, parsePodSettings, readInjectToggle, type PodSettings } from "./annotations.ts";
import { SERVICE_ACCOUNT_DIR, SHARED_VOLUME, SIDECAR_NAME, type InjectorConfig } from "./config.ts";
import { arr, obj, str, stringMap, type JsonObject } from "./json.ts";

/** Why a pod is admitted unchanged. */
export type SkipReason =
  /** No `shardcar.io/inject` label or annotation. */
  | "not-opted-in"
  /** `shardcar.io/inject: "false"`. */
  | "opted-out"
  /** The sidecar is there and `shardcar.io/status` records it. */
  | "already-injected"
  /** A container named `shardcar-proxy` is there without a status: someone added it by hand. */
  | "sidecar-present";

export interface InjectionPlan {
  readonly settings: PodSettings;
  /** The ring's name in ring mode (explicit or the owning workload's) and in static labels mode; otherwise `undefined`. */
  readonly ring: string | undefined;
  /** Names of the `spec.containers` to rewire to the sidecar, in pod order. */
  readonly apps: readonly string[];
  /**
   * The volume the app containers already mount at the service-account path
   * (usually the ServiceAccount admission plugin's `kube-api-access-*`). The
   * sidecar mounts it at that path itself, so it reads the very token the app
   * would have read. `undefined` when no app container mounts one yet: then
   * the token is mounted into the sidecar by the same automount that would
   * have given it to the app, and shardcar never grants a token that the
   * pod's ServiceAccount would not.
   */
  readonly tokenVolume: string | undefined;
  readonly config: InjectorConfig;
}

export type InjectionDecision =
  | { readonly inject: false; readonly reason: SkipReason }
  | { readonly refuse: string }
  | { readonly inject: true; readonly plan: InjectionPlan };

export interface AdmissionContext {
  /** The request's namespace; a pod's own `metadata.namespace` may be empty at admission. */
  readonly namespace?: string;
}

/** Decides what to do with `pod` (the raw JSON of the request's object). Pure; never throws. */
export function decideInjection(pod: JsonObject, config: InjectorConfig, context: AdmissionContext = {}): InjectionDecision {
  const metadata = obj(pod["metadata"]) ?? {};
  const spec = obj(pod["spec"]) ?? {};
  const labels = stringMap(metadata["labels"]);
  const annotations = stringMap(metadata["annotations"]);

  const toggle = readInjectToggle(labels, annotations);
  if (!toggle.ok) return { refuse: toggle.problem };
  if (!toggle.inject) return { inject: false, reason: toggle.source === "default" ? "not-opted-in" : "opted-out" };

  const containers = arr(spec["containers"]).map((c) => obj(c) ?? {});
  const initContainers = arr(spec["initContainers"]).map((c) => obj(c) ?? {});
  const hasSidecar = [...containers, ...initContainers].some((c) => str(c["name"]) === SIDECAR_NAME);
  const hasStatus = annotations[ANNOTATIONS.status] !== undefined;
  if (hasSidecar) return { inject: false, reason: hasStatus ? "already-injected" : "sidecar-present" };
  if (hasStatus) {
    return {
      refuse: `pod has annotation ${ANNOTATIONS.status} but no ${SIDECAR_NAME} container, so it was copied from an injected pod; remove ${ANNOTATIONS.status} so the webhook can inject it afresh`,
    };
  }

  const namespace = context.namespace ?? str(metadata["namespace"]);
  if (namespace === config.managerNamespace) {
    return {
      refuse: `shardcar does not inject into its own namespace ${JSON.stringify(config.managerNamespace)}: the manager's pods serve this webhook and must never depend on it`,
    };
  }

  if (spec["hostNetwork"] === true) {
    return {
      refuse: `shardcar cannot inject into a pod with hostNetwork: true: the sidecar listens on 127.0.0.1:${config.proxyPort} and :${config.adminPort}, which would be ports of the node itself, shared by every such pod on it`,
    };
  }

  const parsed = parsePodSettings(annotations);
  if (!parsed.ok) return { refuse: parsed.problems.join("; ") };
  const settings = parsed.settings;

  const podName = str(metadata["name"]);
  if (settings.shards.mode === "ordinal") {
    const n = settings.shards.count;
    const value = JSON.stringify(`ordinal/${n}`);
    const ordinal = podName === undefined ? undefined : ordinalOf(podName);
    if (podName === undefined || podName === "" || ordinal === undefined) {
      const named = podName ? `is named ${JSON.stringify(podName)}` : `has no name yet (generateName ${JSON.stringify(str(metadata["generateName"]) ?? "")})`;
      return {
        refuse: `${ANNOTATIONS.shards} ${value} needs a StatefulSet pod named <set>-<ordinal>, but this pod ${named}; use ring or i/N for other workloads`,
      };
    }
    if (ordinal >= n) {
      return {
        refuse: `${ANNOTATIONS.shards} ${value}: pod ${JSON.stringify(podName)} has ordinal ${ordinal}, which is not below N (${n}); raise N to the StatefulSet's replicas`,
      };
    }
  }

  let ring: string | undefined;
  if (settings.shards.mode !== "ring") ring = settings.ring; // labels mode only (parsePodSettings refuses it otherwise)
  else {
    const resolved = settings.ring === undefined ? ringFromOwner(metadata, labels) : { ok: true as const, name: settings.ring };
    if (!resolved.ok) return { refuse: resolved.problem };
    ring = resolved.name;
  }

  const volumes = arr(spec["volumes"]).map((v) => obj(v) ?? {});
  if (volumes.some((v) => str(v["name"]) === SHARED_VOLUME)) {
    return { refuse: `pod already has a volume named ${JSON.stringify(SHARED_VOLUME)}, a name shardcar reserves for its sidecar` };
  }

  const wiring = chooseApps(containers, spec["automountServiceAccountToken"] === false, config);
  if (!wiring.ok) return { refuse: wiring.problem };

  for (const c of [...initContainers, ...containers]) {
    for (const p of arr(c["ports"])) {
      const port = obj(p)?.["containerPort"];
      if (typeof port !== "number") continue;
      const role = port === config.proxyPort ? "its loopback API listener" : port === config.adminPort ? "health and metrics" : undefined;
      if (role !== undefined) {
        return {
          refuse: `container ${JSON.stringify(str(c["name"]) ?? "")} already uses port ${port}, which the ${SIDECAR_NAME} sidecar needs for ${role}; change the container's port or the manager's --${role === "health and metrics" ? "admin" : "proxy"}-port`,
        };
      }
    }
  }

  return { inject: true, plan: { settings, ring, apps: wiring.apps, tokenVolume: wiring.tokenVolume, config } };
}

type Wiring = { readonly ok: true; readonly apps: string[]; readonly tokenVolume: string | undefined } | { readonly ok: false; readonly problem: string };

function chooseApps(containers: readonly JsonObject[], automountOff: boolean, config: InjectorConfig): Wiring {
  const apps: string[] = [];
  const explicit: Array<{ container: string; volume: string }> = [];
  for (const c of containers) {
    const name = str(c["name"]) ?? "";
    // Another mesh's proxy talks to its own control plane, not to the
    // controller's apiserver; it keeps the real wiring.
    if (config.meshSidecars.includes(name)) continue;
    const mount = arr(c["volumeMounts"])
      .map((m) => obj(m) ?? {})
      .find((m) => isServiceAccountPath(str(m["mountPath"])));
    if (mount !== undefined) {
      if (mount["subPath"] !== undefined || mount["subPathExpr"] !== undefined) {
        return {
          ok: false,
          problem: `container ${JSON.stringify(name)} mounts ${SERVICE_ACCOUNT_DIR} with a subPath, which shardcar cannot hand to its sidecar; mount the whole token volume there`,
        };
      }
      explicit.push({ container: name, volume: str(mount["name"]) ?? "" });
      apps.push(name);
    } else if (!automountOff) {
      // No mount yet: the ServiceAccount admission plugin adds one unless a
      // mount at this path exists. The emptyDir mount the patch adds is
      // exactly such a mount, so the app gets shardcar's files instead.
      apps.push(name);
    }
    // automountServiceAccountToken: false and no mount: this container has
    // no token, so it cannot be a client of the apiserver; leave it alone.
  }
  if (apps.length === 0) {
    if (automountOff) {
      return {
        ok: false,
        problem: `pod sets automountServiceAccountToken: false and no app container mounts a token at ${SERVICE_ACCOUNT_DIR}: the ${SIDECAR_NAME} sidecar forwards the controller's own token, so the controller needs one; remove automountServiceAccountToken: false or mount a projected service-account token there`,
      };
    }
    return { ok: false, problem: `pod has no app container to wire to the ${SIDECAR_NAME} sidecar (only ${config.meshSidecars.join(", ")})` };
  }
  const distinct = [...new Set(explicit.map((e) => e.volume))];
  if (distinct.length > 1) {
    return {
      ok: false,
      problem: `app containers mount different volumes at ${SERVICE_ACCOUNT_DIR} (${explicit.map((e) => `${JSON.stringify(e.volume)} in ${JSON.stringify(e.container)}`).join(", ")}); shardcar serves one token to every app container, so mount the same volume in each`,
    };
  }
  return { ok: true, apps, tokenVolume: distinct[0] };
}

/** The service-account path, with or without a trailing slash. */
export function isServiceAccountPath(path: string | undefined): boolean {
  return path !== undefined && path.replace(/\/+$/, "") === SERVICE_ACCOUNT_DIR;
}

type RingName = { readonly ok: true; readonly name: string } | { readonly ok: false; readonly problem: string };

/**
 * The default ring: the pod's owning workload. A Deployment's pods are owned
 * by a ReplicaSet named `<deployment>-<pod-template-hash>`; the hash changes
 * on every rollout, so it is stripped, or a rollout would start a new ring.
 */
function ringFromOwner(metadata: JsonObject, labels: Readonly<Record<string, string>>): RingName {
  const owner = arr(metadata["ownerReferences"])
    .map((o) => obj(o) ?? {})
    .find((o) => o["controller"] === true);
  const kind = str(owner?.["kind"]);
  let name = str(owner?.["name"]);
  if (owner === undefined || name === undefined || kind === undefined) {
    return {
      ok: false,
      problem: `${ANNOTATIONS.ring} is not set and the pod has no controlling owner to name the ring after; set ${ANNOTATIONS.ring}`,
    };
  }
  const hash = labels["pod-template-hash"];
  if (kind === "ReplicaSet" && hash !== undefined && name.endsWith(`-${hash}`)) name = name.slice(0, -(hash.length + 1));
  if (!isValidRingName(name)) {
    return {
      ok: false,
      problem: `${ANNOTATIONS.ring} is not set and the owner's name ${JSON.stringify(name)} is not a valid ring name (a DNS-1123 label of at most 63 characters); set ${ANNOTATIONS.ring}`,
    };
  }
  return { ok: true, name };
}
