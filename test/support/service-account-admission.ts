/**
 * What kube-apiserver's ServiceAccount admission plugin does to a new pod
 * (plugin/pkg/admission/serviceaccount), which `../shared/realapi` lacks: it
 * runs before the mutating webhooks, so this is the pod shardcar's webhook
 * sees in a cluster.
 *
 * - `spec.serviceAccountName` defaults to `default`;
 * - unless `automountServiceAccountToken: false` (on the pod), a projected
 *   volume `kube-api-access-<5 random>` (a bound token, the namespace's
 *   `kube-root-ca.crt` ConfigMap, the namespace from the downward API) and,
 *   in every init and app container without a mount at the service-account
 *   path, a read-only mount of it there.
 */
import type { JsonObject } from "../../src/webhook/json.ts";

export const SERVICE_ACCOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount";
// utilrand.String's alphabet (no vowels, no confusable digits).
const ALPHABET = "bcdfghjklmnpqrstvwxz2456789";

/** The volume name the plugin would pick, from `rnd` (a [0, 1) source). */
export function apiAccessVolumeName(rnd: () => number = Math.random): string {
  let s = "";
  for (let i = 0; i < 5; i++) s += ALPHABET[Math.floor(rnd() * ALPHABET.length)] ?? "b";
  return `kube-api-access-${s}`;
}

/** A copy of `pod` as the plugin leaves it. */
export function admitServiceAccount(pod: JsonObject, rnd: () => number = Math.random): JsonObject {
  const out = structuredClone(pod);
  const spec = (out["spec"] ??= {}) as JsonObject;
  if (typeof spec["serviceAccountName"] !== "string" || spec["serviceAccountName"] === "") spec["serviceAccountName"] = "default";
  if (spec["automountServiceAccountToken"] === false) return out;
  const name = apiAccessVolumeName(rnd);
  let used = false;
  for (const key of ["initContainers", "containers"]) {
    for (const c of (spec[key] ?? []) as JsonObject[]) {
      const mounts = (c["volumeMounts"] ??= []) as JsonObject[];
      if (mounts.some((m) => typeof m["mountPath"] === "string" && m["mountPath"].replace(/\/+$/, "") === SERVICE_ACCOUNT_PATH)) continue;
      mounts.push({ name, readOnly: true, mountPath: SERVICE_ACCOUNT_PATH });
      used = true;
    }
  }
  if (!used) return out;
  const volumes = (spec["volumes"] ??= []) as JsonObject[];
  volumes.push({
    name,
    projected: {
      defaultMode: 420,
      sources: [
        { serviceAccountToken: { expirationSeconds: 3607, path: "token" } },
        { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
        { downwardAPI: { items: [{ path: "namespace", fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } }] } },
      ],
    },
  });
  return out;
}
