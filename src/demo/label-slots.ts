/**
 * The manager's labels-mode pieces as the demo runs them in its one
 * process, wired as `shardcar manager` wires them: a watch of the
 * ShardRings, the stamping webhook (`/label-slots`, HTTPS with a CA of its
 * own) called by devapi's mutating admission for the resources whose slot
 * is known at CREATE, and the labeller, a task of the elected coordinator
 * (the caller passes {@link DemoLabelSlots.labeller} to `runCoordinator`).
 *
 * The labeller's rate is raised far above the manager's default: devapi
 * answers a PATCH in well under a millisecond, and the demo backfills a few
 * thousand pods in its 30 s. A cluster picks `--label-rate` for its
 * apiserver (docs/label-slots.md).
 */
import type { KubeConfig } from "@kubernetes/client-node";
import type { DevApi, MutatingWebhook } from "../devapi/index.ts";
import { ApiClient, kubeConfigConnection } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import { createLocalCa } from "../pki/ca.ts";
import { Registry } from "../prom.ts";
import { Labeller, watchLabelSlotConfig } from "../ring/labeller.ts";
import { systemClock } from "../ring/clock.ts";
import { defaultInjectorConfig } from "../webhook/config.ts";
import { startWebhookServer, LABEL_SLOTS_PATH, type WebhookServer } from "../webhook/server.ts";

/** What the demo's webhook is asked to stamp: resources whose slot is known at CREATE (owner-keyed children). */
export type StampedResource = { readonly group: string; readonly resource: string };

export interface DemoLabelSlots {
  readonly labeller: Labeller;
  /** Registers the stamping webhook with devapi's admission for `resources` (CREATE and UPDATE). */
  admit(api: DevApi, resources: readonly StampedResource[]): void;
  stop(): Promise<void>;
}

const SERVICE_NAME = "shardcar-webhook.shardcar-system.svc";
// In-process PATCHes against devapi: a backfill of the demo's pods takes about a second.
const DEMO_POLICY = { maxRatePerSecond: 4000, minRatePerSecond: 4000, burst: 400, maxInFlight: 32, retryMinMs: 50 } as const;

export async function startDemoLabelSlots(kubeConfig: KubeConfig, logger: Logger): Promise<DemoLabelSlots> {
  const log = logger.child({ component: "manager" });
  const client = new ApiClient(kubeConfigConnection(kubeConfig));
  const watch = watchLabelSlotConfig(client, undefined, systemClock, log);
  const ca = await createLocalCa("shardcar demo webhook CA", new Date(), 24 * 3600_000);
  const tls = await ca.issue({ commonName: SERVICE_NAME, names: [SERVICE_NAME, "127.0.0.1"], now: new Date(), validityMs: 24 * 3600_000 });
  let webhook: WebhookServer | undefined;
  try {
    webhook = await startWebhookServer({ host: "127.0.0.1", port: 0, tls, config: defaultInjectorConfig("shardcar:demo"), logger: log, labelSlots: { config: () => watch.current() } });
  } catch (err) {
    watch.stop();
    throw err;
  }
  const server = webhook;
  const labeller = new Labeller({ api: client, source: watch, registry: new Registry(), log, reportIntervalMs: 250, policy: DEMO_POLICY });
  return {
    labeller,
    admit(api, resources) {
      const hook: MutatingWebhook = {
        name: "slots.shardcar.io",
        url: `https://127.0.0.1:${server.port}${LABEL_SLOTS_PATH}`,
        caBundle: ca.certPem,
        serverName: SERVICE_NAME,
        // As the manifests: an outage must never block the controllers' writes.
        failurePolicy: "Ignore",
        timeoutMs: 3_000,
        rules: resources.map((r) => ({ group: r.group, resource: r.resource, operations: ["CREATE", "UPDATE"] })),
      };
      api.setMutatingWebhooks([hook]);
    },
    async stop() {
      await server.close();
      watch.stop();
    },
  };
}
