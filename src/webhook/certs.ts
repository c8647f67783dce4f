/**
 * The webhook's serving certificate, in either of two modes:
 *
 * - **cert-manager**: cert-manager writes `tls.crt`/`tls.key` into a mounted
 *   Secret and its CA injector fills `caBundle` (annotation
 *   `cert-manager.io/inject-ca-from`). {@link FileCertificates} only reads
 *   the files, and picks up renewals by polling.
 * - **self-managed**: {@link SelfManagedCertificates} keeps a CA and serving
 *   certificate in a Secret in the manager's namespace, renews them, and
 *   patches `caBundle` into its own MutatingWebhookConfiguration.
 *
 * Self-managed design: every renewal makes a **new CA** (its key is never
 * stored anywhere: it signs one certificate and is dropped), and `ca.crt`
 * keeps the previous CAs that are still valid. `caBundle` is patched before
 * any replica serves a certificate from the new CA, so the apiserver trusts
 * old and new serving certificates throughout a rollover. Replicas race
 * through the Secret's resourceVersion: one create or update wins, the
 * others get a conflict and adopt what the winner wrote.
 *
 * Decisions ({@link planWebhookCertificates}, {@link caBundlePatch}) are pure
 * functions of their inputs and `now`; the classes are the I/O shell.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { ApiError, type ApiClient } from "../kube/client.ts";
import { arr, obj, str, type JsonObject, type JsonValue } from "./json.ts";
import type { Logger } from "../log.ts";
import { createLocalCa, type TlsMaterial } from "../pki/ca.ts";
import { inspectCertificate, isSignedBy, keyMatchesCertificate, splitPemBundle } from "../pki/inspect.ts";

/** What the Secret holds (decoded), under the standard `kubernetes.io/tls` keys. */
export interface WebhookSecretData {
  readonly "tls.crt": string;
  readonly "tls.key": string;
  /** The CA that signed `tls.crt`, then any earlier CAs still valid. */
  readonly "ca.crt": string;
}

export interface CertPolicy {
  /** Lifetime of each CA and serving certificate. */
  readonly validityMs: number;
  /** Renew when less than this is left. */
  readonly renewBeforeMs: number;
}

const DAY = 24 * 3600_000;
/**
 * A year, renewed with a third left (as cert-manager renews at 2/3 of a
 * lifetime): four months in which a failing renewal is visible in logs
 * before anything expires.
 */
export const DEFAULT_CERT_POLICY: CertPolicy = { validityMs: 365 * DAY, renewBeforeMs: 122 * DAY };

/** The names the apiserver may use for the webhook Service. */
export function webhookDnsNames(service: string, namespace: string): string[] {
  return [service, `${service}.${namespace}`, `${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`];
}

export type CertPlan = { readonly action: "keep" } | { readonly action: "issue"; readonly reason: string };

/** Whether the stored certificates can keep serving at `now`, or why not. Pure. */
export function planWebhookCertificates(
  data: Partial<WebhookSecretData> | undefined,
  dnsNames: readonly string[],
  now: Date,
  policy: CertPolicy = DEFAULT_CERT_POLICY,
): CertPlan {
  const issue = (reason: string): CertPlan => ({ action: "issue", reason });
  if (data === undefined) return issue("no Secret yet");
  const cert = data["tls.crt"];
  const key = data["tls.key"];
  const bundle = data["ca.crt"];
  if (cert === undefined || key === undefined || bundle === undefined) return issue("Secret lacks tls.crt, tls.key or ca.crt");
  const facts = inspectCertificate(cert);
  if (facts === undefined) return issue("tls.crt does not parse");
  if (!keyMatchesCertificate(key, cert)) return issue("tls.key is not the key of tls.crt");
  const cas = splitPemBundle(bundle);
  if (!cas.some((ca) => isSignedBy(cert, ca) && (inspectCertificate(ca)?.notAfter.getTime() ?? 0) > now.getTime())) {
    return issue("tls.crt is not signed by a valid CA in ca.crt");
  }
  const missing = dnsNames.filter((n) => !facts.dnsNames.includes(n));
  if (missing.length > 0) return issue(`tls.crt lacks ${missing.join(", ")}`);
  if (facts.notBefore.getTime() > now.getTime()) return issue(`tls.crt is not valid before ${facts.notBefore.toISOString()}`);
  if (facts.notAfter.getTime() - now.getTime() < policy.renewBeforeMs) return issue(`tls.crt expires at ${facts.notAfter.toISOString()}`);
  return { action: "keep" };
}

/**
 * A new CA and serving certificate. `ca.crt` is the new CA followed by the
 * CAs of `previous` that are still valid at `now`, so clients that still
 * hold the old bundle, and replicas still serving the old certificate, keep
 * working during the rollover. Expired CAs are dropped, which bounds the
 * bundle to the CAs of one certificate lifetime.
 */
export async function issueWebhookCertificates(
  previous: Partial<WebhookSecretData> | undefined,
  dnsNames: readonly string[],
  now: Date,
  policy: CertPolicy = DEFAULT_CERT_POLICY,
): Promise<WebhookSecretData> {
  const ca = await createLocalCa(`shardcar-webhook-ca@${Math.floor(now.getTime() / 1000)}`, now, policy.validityMs);
  const [commonName = "shardcar-webhook"] = dnsNames.slice(-2);
  const tls = await ca.issue({ commonName, names: dnsNames, now, validityMs: policy.validityMs });
  const kept = splitPemBundle(previous?.["ca.crt"] ?? "").filter((pem) => {
    const f = inspectCertificate(pem);
    return f !== undefined && f.isCa && f.notAfter.getTime() > now.getTime();
  });
  return { "tls.crt": tls.cert, "tls.key": tls.key, "ca.crt": [ca.certPem, ...kept].join("") };
}

/** One webhook entry of a MutatingWebhookConfiguration, as far as caBundle is concerned. */
export interface WebhookCaEntry {
  readonly name: string;
  /** Base64 of a PEM bundle, as stored in `clientConfig.caBundle`. */
  readonly caBundle: string | undefined;
}

/**
 * The JSON Patch that sets `caBundle` on every webhook whose bundle differs.
 * Each change is guarded by a `test` of that webhook's name, so a
 * configuration reordered since it was read fails the patch instead of
 * putting the bundle on the wrong webhook. Empty when nothing differs.
 */
export function caBundlePatch(webhooks: readonly WebhookCaEntry[], bundlePem: string): CaBundleOperation[] {
  const want = Buffer.from(bundlePem).toString("base64");
  const ops: CaBundleOperation[] = [];
  webhooks.forEach((w, i) => {
    if (w.caBundle === want) return;
    ops.push({ op: "test", path: `/webhooks/${i}/name`, value: w.name });
    ops.push({ op: w.caBundle === undefined ? "add" : "replace", path: `/webhooks/${i}/clientConfig/caBundle`, value: want });
  });
  return ops;
}

/** RFC 6902 operations as {@link caBundlePatch} makes them. */
export type CaBundleOperation =
  | { readonly op: "test"; readonly path: string; readonly value: string }
  | { readonly op: "add" | "replace"; readonly path: string; readonly value: string };

/** Storage of the webhook Secret; `conflict` means someone else wrote first. */
export interface SecretStore {
  get(): Promise<{ readonly data: Partial<WebhookSecretData>; readonly resourceVersion: string } | undefined>;
  create(data: WebhookSecretData): Promise<"created" | "conflict">;
  update(data: WebhookSecretData, resourceVersion: string): Promise<"updated" | "conflict">;
}

/** Access to the manager's own MutatingWebhookConfiguration. */
export interface WebhookConfigStore {
  /** The webhooks in order. Throws if the configuration does not exist. */
  get(): Promise<WebhookCaEntry[]>;
  patch(ops: readonly CaBundleOperation[]): Promise<void>;
}

/** Where serving certificates come from; `load` is called at start and on every resync. */
export interface CertificateSource {
  load(): Promise<TlsMaterial>;
}

export interface SelfManagedOptions {
  readonly secrets: SecretStore;
  readonly webhookConfig: WebhookConfigStore;
  readonly dnsNames: readonly string[];
  readonly logger: Logger;
  readonly policy?: CertPolicy;
  /** Injectable clock for tests. */
  readonly now?: () => Date;
}

/** Self-managed mode: see the module comment. */
export class SelfManagedCertificates implements CertificateSource {
  readonly #opts: SelfManagedOptions;
  constructor(opts: SelfManagedOptions) {
    this.#opts = opts;
  }

  /**
   * One reconcile pass: make sure the Secret holds a usable certificate
   * (issuing one if needed, racing other replicas), then make sure
   * `caBundle` matches `ca.crt`. Resolves to the certificate to serve.
   * Throws when the Secret or the configuration cannot be read or written;
   * the caller keeps its current certificate and retries, which keeps the
   * order "caBundle first, then the new certificate".
   */
  async load(): Promise<TlsMaterial> {
    const { secrets, dnsNames, logger } = this.#opts;
    const now = (this.#opts.now ?? (() => new Date()))();
    const policy = this.#opts.policy ?? DEFAULT_CERT_POLICY;
    let data: Partial<WebhookSecretData> | undefined;
    for (let attempt = 0; ; attempt++) {
      const current = await secrets.get();
      const plan = planWebhookCertificates(current?.data, dnsNames, now, policy);
      if (plan.action === "keep") {
        data = current?.data;
        break;
      }
      if (attempt >= 3) throw new Error(`webhook certificate still needs issuing after ${attempt} conflicts: ${plan.reason}`);
      const fresh = await issueWebhookCertificates(current?.data, dnsNames, now, policy);
      const result = current === undefined ? await secrets.create(fresh) : await secrets.update(fresh, current.resourceVersion);
      if (result === "conflict") {
        logger.info({ reason: plan.reason }, "another replica wrote the webhook certificate first; adopting it");
        continue;
      }
      logger.info({ reason: plan.reason, notAfter: inspectCertificate(fresh["tls.crt"])?.notAfter }, "issued webhook certificate");
      data = fresh;
      break;
    }
    const cert = data?.["tls.crt"];
    const key = data?.["tls.key"];
    const bundle = data?.["ca.crt"];
    if (cert === undefined || key === undefined || bundle === undefined) throw new Error("webhook Secret is incomplete after reconcile");
    const ops = caBundlePatch(await this.#opts.webhookConfig.get(), bundle);
    if (ops.length > 0) {
      await this.#opts.webhookConfig.patch(ops);
      logger.info({ webhooks: ops.filter((o) => o.op !== "test").length }, "patched caBundle into the MutatingWebhookConfiguration");
    }
    return { key, cert };
  }
}

/** cert-manager mode: `tls.crt` and `tls.key` from a mounted Secret. */
export class FileCertificates implements CertificateSource {
  readonly #dir: string;
  constructor(dir: string) {
    this.#dir = dir;
  }
  async load(): Promise<TlsMaterial> {
    const [cert, key] = await Promise.all([readFile(join(this.#dir, "tls.crt"), "utf8"), readFile(join(this.#dir, "tls.key"), "utf8")]);
    // The kubelet swaps both files at once (..data symlink), but a read can
    // still straddle the swap; a mismatched pair is retried on the next poll.
    if (!keyMatchesCertificate(key, cert)) throw new Error(`${this.#dir}: tls.key does not match tls.crt`);
    return { key, cert };
  }
}

export interface CertificateWatchOptions {
  readonly source: CertificateSource;
  /** How often to reload after the first success. */
  readonly intervalMs: number;
  /** How long to wait before retrying a failed first load. */
  readonly retryMs: number;
  readonly logger: Logger;
  readonly signal: AbortSignal;
  /** Called with each certificate that differs from the last. Must not throw. */
  readonly onChange: (tls: TlsMaterial) => void;
}

/**
 * Loads the first certificate (retrying until it succeeds or `signal`
 * aborts), then reloads every `intervalMs` in the background until `signal`
 * aborts. Resolves with the first certificate; rejects only on abort before
 * one was loaded.
 */
export async function watchCertificates(opts: CertificateWatchOptions): Promise<TlsMaterial> {
  const { source, logger, signal } = opts;
  let current: TlsMaterial | undefined;
  while (current === undefined) {
    signal.throwIfAborted();
    try {
      current = await source.load();
    } catch (e) {
      logger.warn({ err: e }, "webhook certificate not available yet; retrying");
      await sleep(opts.retryMs, signal);
    }
  }
  let last: TlsMaterial = current;
  void (async () => {
    while (!signal.aborted) {
      try {
        await sleep(opts.intervalMs, signal);
      } catch {
        return;
      }
      try {
        const next = await source.load();
        if (next.cert !== last.cert || next.key !== last.key) {
          last = next;
          logger.info({ notAfter: inspectCertificate(next.cert)?.notAfter }, "serving a renewed webhook certificate");
          opts.onChange(next);
        }
      } catch (e) {
        logger.error({ err: e }, "webhook certificate reload failed; keeping the current one");
      }
    }
  })();
  return current;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

// ---------------------------------------------------------------------------
// The Kubernetes-backed stores.

const SECRET_KEYS = ["tls.crt", "tls.key", "ca.crt"] as const;

// Each call has this long; the caller retries a failed pass on its next resync.
const CALL_TIMEOUT_MS = 15_000;

const isStatus = (e: unknown, code: number): boolean => e instanceof ApiError && e.statusCode === code;

/** The webhook Secret through the one client (src/kube/client.ts); a `kubernetes.io/tls` Secret with an extra `ca.crt`. */
export function kubeSecretStore(api: ApiClient, namespace: string, name: string): SecretStore {
  const collection = `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`;
  const one = `${collection}/${encodeURIComponent(name)}`;
  const body = (data: WebhookSecretData, resourceVersion?: string): Record<string, unknown> => ({
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name,
      namespace,
      labels: { "app.kubernetes.io/name": "shardcar", "app.kubernetes.io/component": "webhook-certificate" },
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
    },
    type: "kubernetes.io/tls",
    data: Object.fromEntries(SECRET_KEYS.map((k) => [k, Buffer.from(data[k]).toString("base64")])),
  });
  return {
    async get() {
      let s: JsonObject | undefined;
      try {
        s = obj((await api.request("GET", one, { timeoutMs: CALL_TIMEOUT_MS })) as JsonValue);
      } catch (e) {
        if (isStatus(e, 404)) return undefined;
        throw e;
      }
      const stored = obj(s?.["data"]) ?? {};
      const data: Partial<Record<(typeof SECRET_KEYS)[number], string>> = {};
      for (const k of SECRET_KEYS) {
        const v = str(stored[k]);
        if (v !== undefined) data[k] = Buffer.from(v, "base64").toString("utf8");
      }
      return { data, resourceVersion: str(obj(s?.["metadata"])?.["resourceVersion"]) ?? "" };
    },
    async create(data) {
      try {
        await api.request("POST", collection, { body: body(data), timeoutMs: CALL_TIMEOUT_MS });
        return "created";
      } catch (e) {
        if (isStatus(e, 409)) return "conflict";
        throw e;
      }
    },
    async update(data, resourceVersion) {
      try {
        // resourceVersion in the body makes this a compare-and-swap.
        await api.request("PUT", one, { body: body(data, resourceVersion), timeoutMs: CALL_TIMEOUT_MS });
        return "updated";
      } catch (e) {
        if (isStatus(e, 409)) return "conflict";
        throw e;
      }
    },
  };
}

/** The manager's own MutatingWebhookConfiguration through the one client. */
export function kubeWebhookConfigStore(api: ApiClient, name: string): WebhookConfigStore {
  const path = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${encodeURIComponent(name)}`;
  return {
    async get() {
      const cfg = obj((await api.request("GET", path, { timeoutMs: CALL_TIMEOUT_MS })) as JsonValue);
      return arr(cfg?.["webhooks"]).map((w) => ({ name: str(obj(w)?.["name"]) ?? "", caBundle: str(obj(obj(w)?.["clientConfig"])?.["caBundle"]) }));
    },
    async patch(ops) {
      await api.request("PATCH", path, { body: ops, contentType: "application/json-patch+json", timeoutMs: CALL_TIMEOUT_MS });
    },
  };
}
