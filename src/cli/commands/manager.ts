import { switchFlags, valueFlags } from "../../flag-table.ts";
import { createAdminServer, type AdminOptions } from "../../proxy/reporting/admin.ts";
import { Counter, Registry as PromRegistry } from "../../prom.ts";
import { ApiClient } from "../../kube/client.ts";
import { connectionFor, describeSource, loadKubeAccess } from "../../kube/config.ts";
import { systemClock } from "../../ring/clock.ts";
import { runCoordinator } from "../../ring/coordinator.ts";
import { DEFAULT_LABEL_BURST, DEFAULT_LABEL_RATE, Labeller, watchLabelSlotConfig } from "../../ring/labeller.ts";
import { createLogger } from "../../log.ts";
import { parseListen } from "../../proxy/run.ts";
import { readOwnImage } from "../../webhook/own-image.ts";
import {
  DEFAULT_CERT_POLICY,
  FileCertificates,
  SelfManagedCertificates,
  defaultInjectorConfig,
  kubeSecretStore,
  kubeWebhookConfigStore,
  startWebhookServer,
  watchCertificates,
  webhookDnsNames,
  type CertificateSource,
  type InjectorConfig,
  type WebhookServer,
} from "../../webhook/index.ts";
import type { Command } from "../command.ts";
import { UsageError, durationFlag, intFlag, parseFlags } from "../flags.ts";
import { labelRateFlags } from "../label-rate-flags.ts";
import { selfSignedTls } from "../serving-tls.ts";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** `--metrics-auth`: the apiserver decides who reads /metrics, which is then served over TLS. */
async function metricsAuth(api: ApiClient): Promise<Pick<AdminOptions, "metricsAuth" | "tls">> {
  const [{ DelegatedAuth }, { tls }] = await Promise.all([import("../../kube/access-review.ts"), selfSignedTls("shardcar manager metrics CA", ["localhost", "127.0.0.1"])]);
  return { metricsAuth: new DelegatedAuth(api), tls };
}

export const managerCommand: Command = {
  name: "manager",
  usage: `Usage: shardcar manager [flags]

Serves the mutating admission webhook that injects the shardcar sidecar into
pods labelled or annotated shardcar.io/inject: "true", over HTTPS
(AdmissionReview v1, POST /mutate-pods; GET /healthz), and, on the replica
that wins the manager election (a Lease in --namespace), runs every ShardRing:
member Leases in, generation-stamped range tables out (docs/rings.md).

For rings in labels mode (spec.filter: labels) it also serves the stamping
webhook (POST /label-slots: the slot label shard.shardcar.io/<ring> on the
ring's resources, on CREATE and UPDATE) and, on the leader, labels what the
webhook could not (a rate-limited, metadata-only backfill; docs/label-slots.md).

Webhook certificates come from one of two places:
  self          the manager keeps a CA and serving certificate in the Secret
                --secret, renews them, and patches caBundle into its own
                MutatingWebhookConfiguration --webhook-config (default)
  cert-manager  cert-manager writes tls.crt/tls.key into --cert-dir and its
                CA injector fills caBundle; the manager only reads the files

Flags:
  --image IMAGE             the shardcar image to inject as the sidecar (default:
                            the image of this pod's "manager" container, read
                            through the API using $POD_NAME and $POD_NAMESPACE)
  --image-pull-policy P     Always, IfNotPresent (default) or Never
  --webhook-listen H:P      HTTPS listener (default 0.0.0.0:9443)
  --cert-mode MODE          self (default) or cert-manager
  --cert-dir DIR            tls.crt and tls.key in cert-manager mode
                            (default /var/run/shardcar/webhook-certs)
  --cert-resync D           how often to re-check certificates and caBundle (default 1m)
  --cert-validity D         self mode: lifetime of each CA and serving certificate, renewed
                            with a third left (default 8760h); a third must exceed --cert-resync
  --namespace NS            the manager's namespace; never injected (default shardcar-system)
  --service NAME            the webhook Service, for certificate names (default shardcar-webhook)
  --secret NAME             the self-managed certificate Secret (default shardcar-webhook-tls)
  --webhook-config NAME     the MutatingWebhookConfiguration to patch (default shardcar)
  --proxy-port N            the sidecar's loopback API port (default 7443)
  --admin-port N            the sidecar's health and metrics port (default 9464)
  --no-rings                serve the injection webhook only: no rings, no label slots
  --label-rate N            the most slot-label PATCHes per second: never more begin in any one second
                            (default ${DEFAULT_LABEL_RATE}; lower it to be gentle with a busy apiserver). Under
                            it the rate adapts: it starts at 20/s (or --label-rate if lower), climbs
                            while PATCHes come back fast, and halves on a 429 or a PATCH slower than
                            250 ms, not below --label-rate-min
  --label-rate-min N        the least PATCHes per second the rate halves to, at most --label-rate
                            (default a tenth of --label-rate, at most 20); equal to --label-rate for a
                            fixed rate
  --label-rate-max N        the former name of --label-rate (deprecated); beside it, must agree with it
  --label-burst N           PATCHes that may go at once after a quiet spell (default ${DEFAULT_LABEL_BURST})
  --metrics-listen H:P      /metrics (webhook reviews, ring coverage, generations, handoffs) and /healthz
                            over plain HTTP (default 0.0.0.0:9465; "off" disables)
  --metrics-auth            /metrics only for requests the apiserver authenticates (TokenReview) and
                            authorizes (SubjectAccessReview: get /metrics), over TLS, as controller-runtime
  --sidecar-metrics-auth    inject sidecars with --metrics-auth (their probes then use HTTPS)
  --sidecar-debug-remote    inject sidecars with --debug-remote: /debug/shardcar beyond loopback, for
                            shardcar audit --canary through the apiserver's pod proxy
  --log-level LEVEL         pino level (default info)

Examples:
  shardcar manager
  shardcar manager --image ghcr.io/shardcar/shardcar:0.1.0
  shardcar manager --image ghcr.io/shardcar/shardcar:0.1.0 --cert-mode cert-manager \\
      --cert-dir /var/run/shardcar/webhook-certs --namespace shardcar-system
`,
  async run(argv, io) {
    const { values } = parseFlags(argv, {
      ...valueFlags("image", "image-pull-policy", "webhook-listen", "cert-mode", "cert-dir", "cert-resync", "cert-validity", "namespace", "service", "secret", "webhook-config", "proxy-port", "admin-port", "log-level", "label-rate", "label-rate-min", "label-rate-max", "label-burst", "metrics-listen"),
      ...switchFlags("no-rings", "metrics-auth", "sidecar-metrics-auth", "sidecar-debug-remote"),
    });
    if (values.image !== undefined && values.image.trim() === "") throw new UsageError("--image", "--image must not be empty");
    const podName = io.env["POD_NAME"];
    const podNamespace = io.env["POD_NAMESPACE"];
    if (values.image === undefined && (podName === undefined || podNamespace === undefined)) {
      throw new UsageError("--image", "--image is required outside a pod ($POD_NAME and $POD_NAMESPACE are unset), e.g. --image ghcr.io/shardcar/shardcar:0.1.0");
    }
    const pullPolicy = values["image-pull-policy"] ?? "IfNotPresent";
    if (pullPolicy !== "Always" && pullPolicy !== "IfNotPresent" && pullPolicy !== "Never") {
      throw new UsageError("--image-pull-policy", `invalid --image-pull-policy ${JSON.stringify(pullPolicy)}: expected Always, IfNotPresent or Never`);
    }
    const listen = parseListen("--webhook-listen", values["webhook-listen"] ?? "0.0.0.0:9443");
    const metricsFlag = values["metrics-listen"] ?? "0.0.0.0:9465";
    const metricsListen = metricsFlag === "off" ? undefined : parseListen("--metrics-listen", metricsFlag);
    const certMode = values["cert-mode"] ?? "self";
    if (certMode !== "self" && certMode !== "cert-manager") throw new UsageError("--cert-mode", `invalid --cert-mode ${JSON.stringify(certMode)}: expected self or cert-manager`);
    const certDir = values["cert-dir"] ?? "/var/run/shardcar/webhook-certs";
    const resyncMs = durationFlag("--cert-resync", values["cert-resync"], 60_000);
    if (resyncMs < 1000) throw new UsageError("--cert-resync", `invalid --cert-resync ${JSON.stringify(values["cert-resync"])}: at least 1s`);
    const validityMs = durationFlag("--cert-validity", values["cert-validity"], DEFAULT_CERT_POLICY.validityMs);
    // Renewal starts with a third of the lifetime left; a check must fall in
    // that window, or a certificate could expire between two checks.
    if (validityMs / 3 <= resyncMs) {
      throw new UsageError("--cert-validity", `invalid --cert-validity ${JSON.stringify(values["cert-validity"])}: a third of it must be longer than --cert-resync (${resyncMs} ms), or a certificate could expire between two checks`);
    }
    const certPolicy = values["cert-validity"] === undefined ? DEFAULT_CERT_POLICY : { validityMs, renewBeforeMs: Math.round(validityMs / 3) };
    const names: Record<string, string> = {
      "--namespace": values.namespace ?? "shardcar-system",
      "--service": values.service ?? "shardcar-webhook",
      "--secret": values.secret ?? "shardcar-webhook-tls",
      "--webhook-config": values["webhook-config"] ?? "shardcar",
    };
    for (const [flag, v] of Object.entries(names)) {
      if (!DNS_LABEL.test(v) || v.length > 63) throw new UsageError(flag, `invalid ${flag} ${JSON.stringify(v)}: expected a DNS-1123 label`);
    }
    const namespace = names["--namespace"] ?? "shardcar-system";
    const proxyPort = intFlag("--proxy-port", values["proxy-port"], 7443, 1, 65535);
    const adminPort = intFlag("--admin-port", values["admin-port"], 9464, 1, 65535);
    if (proxyPort === adminPort) throw new UsageError("--admin-port", `--admin-port ${adminPort} must differ from --proxy-port`);
    const labelRates = labelRateFlags(values);
    const labelBurst = intFlag("--label-burst", values["label-burst"], DEFAULT_LABEL_BURST, 1, 10_000);
    const rings = values["no-rings"] !== true;

    const logger = createLogger({ level: values["log-level"] ?? "info", name: "shardcar-manager", destination: io.stdout });
    if (labelRates.warning !== undefined) logger.warn(labelRates.warning);
    // By the one rule (src/kube/config.ts): $KUBECONFIG, else the pod's own
    // service account, else ~/.kube/config. Loaded lazily: cert-manager mode
    // with --image and --no-rings talks to no apiserver.
    let client: Promise<ApiClient> | undefined;
    const kube = (): Promise<ApiClient> =>
      (client ??= loadKubeAccess({ env: io.env }).then(async (access) => {
        logger.info({ config: describeSource(access.source), server: access.cluster.server }, "the manager's API server");
        return new ApiClient(await connectionFor(access));
      }));
    const image = values.image ?? (await readOwnImage(await kube(), podNamespace ?? "", podName ?? "", "manager"));
    const config: InjectorConfig = {
      ...defaultInjectorConfig(image),
      imagePullPolicy: pullPolicy,
      proxyPort,
      adminPort,
      managerNamespace: namespace,
      sidecarMetricsAuth: values["sidecar-metrics-auth"] === true,
      sidecarDebugRemote: values["sidecar-debug-remote"] === true,
    };

    let source: CertificateSource;
    if (certMode === "self") {
      source = new SelfManagedCertificates({
        secrets: kubeSecretStore(await kube(), namespace, names["--secret"] ?? ""),
        webhookConfig: kubeWebhookConfigStore(await kube(), names["--webhook-config"] ?? ""),
        dnsNames: webhookDnsNames(names["--service"] ?? "", namespace),
        logger,
        policy: certPolicy,
      });
    } else {
      source = new FileCertificates(certDir);
    }

    // Certificate renewals reach the server once it exists.
    const live: { server?: WebhookServer } = {};
    let tls;
    try {
      tls = await watchCertificates({
        source,
        intervalMs: resyncMs,
        retryMs: 2000,
        logger,
        signal: io.signal,
        onChange: (next) => live.server?.setTls(next),
      });
    } catch (e) {
      // Stopped before a certificate was ever available: a clean shutdown.
      if (io.signal.aborted) return 0;
      throw e;
    }
    const registry = new PromRegistry();
    // Every replica answers /label-slots from its own view of the ShardRings;
    // only the leader labels (a task of the ring coordinator).
    const api = rings ? await kube() : undefined;
    const slots = api === undefined ? undefined : watchLabelSlotConfig(api, undefined, systemClock, logger.child({ component: "label-slots" }));
    const labelReviews = new Counter({ name: "shardcar_label_webhook_reviews_total", help: "Reviews of the stamping webhook (/label-slots) by result: stamped, unchanged, deferred (the slot needs the uid: left to the labeller), skipped, not-synced, errored.", labelNames: ["result"], registers: [registry] });
    // How many pods the apiserver sends: with the objectSelector and
    // matchConditions right, only opted-in pods ever reach this webhook.
    const reviews = new Counter({
      name: "shardcar_inject_webhook_reviews_total",
      help: "Reviews of the injection webhook (/mutate-pods) by result (injected, skipped, denied, errored) and, when skipped, why.",
      labelNames: ["result", "reason"],
      registers: [registry],
    });
    const server = await startWebhookServer({
      host: listen.host,
      port: listen.port,
      tls,
      config,
      logger,
      onOutcome: (o) => reviews.inc({ result: o.result, reason: o.result === "skipped" ? o.reason : "" }),
      labelSlots: slots === undefined ? undefined : { config: () => slots.current(), onOutcome: (o) => labelReviews.inc({ result: o.result }) },
    });
    live.server = server;
    logger.info({ certMode, namespace, image, proxyPort, adminPort }, "shardcar manager ready");
    io.stdout.write(`shardcar manager serving the webhook on https://${listen.host}:${server.port}\n`);

    const metrics = metricsListen === undefined ? undefined : createAdminServer({ registry, readiness: [], ...(values["metrics-auth"] === true ? await metricsAuth(await kube()) : {}) });
    if (metrics !== undefined && metricsListen !== undefined) {
      await new Promise<void>((resolve, reject) => {
        metrics.once("error", reject);
        metrics.listen(metricsListen.port, metricsListen.host, () => resolve());
      });
      const bound = metrics.address();
      io.stdout.write(`shardcar manager serving metrics on ${values["metrics-auth"] === true ? "https" : "http"}://${metricsListen.host}:${typeof bound === "object" && bound !== null ? bound.port : metricsListen.port}/metrics\n`);
    }
    // The ring coordinator runs behind its own leader election (a Lease in
    // `namespace`); webhook serving is not elected: every replica answers.
    const labeller =
      api === undefined || slots === undefined
        ? undefined
        : new Labeller({ api, source: slots, policy: { maxRatePerSecond: labelRates.maxRatePerSecond, minRatePerSecond: labelRates.minRatePerSecond, burst: labelBurst }, registry, log: logger });
    const coordination = !rings
      ? Promise.resolve()
      : runCoordinator(
          {
            client: api,
            namespace,
            identity: podName ?? `manager-${process.pid}`,
            registry,
            log: logger,
            tasks: labeller === undefined ? [] : [labeller],
          },
          io.signal,
        );

    await new Promise<void>((resolve) => {
      if (io.signal.aborted) resolve();
      else io.signal.addEventListener("abort", () => resolve(), { once: true });
    });
    logger.info("shutting down");
    await Promise.all([server.close(), coordination]);
    slots?.stop();
    metrics?.closeAllConnections();
    await new Promise<void>((resolve) => (metrics === undefined ? resolve() : metrics.close(() => resolve())));
    return 0;
  },
};
