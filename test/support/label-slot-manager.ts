/**
 * The label-slot pieces of `shardcar manager`, wired as it wires them, for
 * the tests of labels mode: its own watch of the ShardRings, the stamping
 * webhook (`/label-slots` on the real HTTPS server, with a serving
 * certificate for the webhook Service's TLS name, so an apiserver's mutating
 * admission verifies it as the real plugin does), and the labeller, which
 * runs as a task of the elected ring coordinator (the caller starts that:
 * `runCoordinator({ …, tasks: [pieces.labeller] })`).
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { Registry } from "prom-client";
import type { MutatingWebhook } from "../../src/devapi/index.ts";
import { ApiClient, kubeConfigConnection } from "../../src/kube/client.ts";
import { silentLogger } from "../../src/log.ts";
import { Labeller, watchLabelSlotConfig } from "../../src/ring/labeller.ts";
import type { LabellingPolicy } from "../../src/ring/labelling.ts";
import type { LocalCa } from "../../src/pki/ca.ts";
import { startWebhookServer, type WebhookServer } from "../../src/webhook/server.ts";
import { testConfig } from "../webhook/support.ts";
import { clusterClock } from "./wait.ts";

/** The TLS name of the webhook Service the manifests create. */
export const WEBHOOK_SERVICE = "shardcar-webhook.shardcar-system.svc";

export interface LabelSlotPieces {
  readonly webhook: WebhookServer;
  readonly labeller: Labeller;
  readonly registry: Registry;
  /** The webhook as devapi's admission names it (by URL), for `api.setMutatingWebhooks`. */
  readonly hook: (rules: MutatingWebhook["rules"]) => MutatingWebhook;
  /** Stops the webhook and the ShardRing watch (the coordinator that runs the labeller is the caller's). */
  stop(): Promise<void>;
}

/** `kubeConfig`: the manager's credentials, straight to the apiserver. */
export async function startLabelSlotPieces(kubeConfig: KubeConfig, opts: { readonly ca: LocalCa; readonly port?: number; readonly policy?: Partial<LabellingPolicy> }): Promise<LabelSlotPieces> {
  // The cluster's clock, as every ring test's leader (test/support/quiet-clock.ts).
  const client = new ApiClient(kubeConfigConnection(kubeConfig), (ms, fn) => clusterClock.timer(ms, fn));
  const log = silentLogger();
  const watch = watchLabelSlotConfig(client, undefined, clusterClock, log);
  const tls = await opts.ca.issue({ commonName: WEBHOOK_SERVICE, names: [WEBHOOK_SERVICE, "127.0.0.1"], now: new Date(), validityMs: 3600_000 });
  const webhook = await startWebhookServer({ host: "127.0.0.1", port: opts.port ?? 0, tls, config: testConfig(), logger: log, labelSlots: { config: () => watch.current() } });
  const registry = new Registry();
  const labeller = new Labeller({ api: client, source: watch, registry, clock: clusterClock, reportIntervalMs: 100, policy: { maxRatePerSecond: 500, minRatePerSecond: 200, burst: 50, retryMinMs: 50, ...opts.policy } });
  return {
    webhook,
    labeller,
    registry,
    hook: (rules) => ({ name: "slots.shardcar.io", url: `https://127.0.0.1:${webhook.port}/label-slots`, caBundle: opts.ca.certPem, serverName: WEBHOOK_SERVICE, failurePolicy: "Ignore", rules }),
    async stop() {
      await webhook.close();
      watch.stop();
    },
  };
}
