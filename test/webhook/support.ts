/**
 * Shared helpers for the webhook tests: the injector configuration the
 * goldens were made with, AdmissionReview builders, and a real HTTPS webhook
 * server whose certificate comes from a CA only the test trusts.
 */
import { readFileSync } from "node:fs";
import { request } from "node:https";
import { silentLogger } from "../../src/log.ts";
import { labelSlotConfig, type LabelSlotConfig, type RingLike } from "../../src/ring/label-slots.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, shardRange } from "../../src/shard/range.ts";
import { defaultInjectorConfig, type InjectorConfig } from "../../src/webhook/config.ts";
import { createLocalCa } from "../../src/pki/ca.ts";
import { startWebhookServer, type WebhookServer, type WebhookServerOptions } from "../../src/webhook/server.ts";

export const TEST_IMAGE = "ghcr.io/shardcar/shardcar:0.1.0";

export function testConfig(over: Partial<InjectorConfig> = {}): InjectorConfig {
  return { ...defaultInjectorConfig(TEST_IMAGE), ...over };
}

/** The labels-mode rings the label-slots tests run with: testdata/label-slots/rings.json, decoded as the manager decodes ShardRings. */
export function testLabelSlotConfig(): LabelSlotConfig {
  return labelSlotConfig(JSON.parse(readFileSync(new URL("./testdata/label-slots/rings.json", import.meta.url), "utf8")) as RingLike[]);
}

/** An AdmissionReview v1 for creating `pod`, as the apiserver sends it. */
export function reviewFor(pod: unknown, opts: { uid?: string; namespace?: string; operation?: string } = {}): Record<string, unknown> {
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: opts.uid ?? "705ab4f5-6393-11e8-b7cc-42010a800002",
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: { group: "", version: "v1", resource: "pods" },
      requestKind: { group: "", version: "v1", kind: "Pod" },
      requestResource: { group: "", version: "v1", resource: "pods" },
      namespace: opts.namespace,
      operation: opts.operation ?? "CREATE",
      userInfo: { username: "system:serviceaccount:kube-system:replicaset-controller", uid: "a1b2", groups: ["system:serviceaccounts", "system:authenticated"] },
      object: pod,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: "meta.k8s.io/v1", kind: "CreateOptions" },
    },
  };
}

/**
 * The slot label a `value` (a uid, a namespace) must get in a ring of
 * `slotCount` slots, as docs/label-slots.md defines it: the slot whose range
 * (`shardRange(slot, S)`, scanned, not computed as slots.ts does) holds the
 * value's FNV-1a 64 hash, in plain decimal.
 */
export function slotByScan(value: string, slotCount: number): string {
  const h = fnv1a64(value);
  for (let s = 0; s < slotCount; s++) if (contains([shardRange(s, slotCount)], h)) return String(s);
  throw new Error("no slot holds the hash");
}

export interface HttpAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

export interface TestWebhook {
  readonly server: WebhookServer;
  /** PEM of the CA that signed the server's certificate. */
  readonly ca: string;
  /** Sends a request verified against {@link ca} for the name `localhost`. */
  send(opts: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer; bodyStream?: AsyncIterable<Buffer> }): Promise<HttpAnswer>;
}

/** Starts the real HTTPS webhook on 127.0.0.1:0; closed on teardown. */
export async function startTestWebhook(t: { teardown(fn: () => unknown): void }, config = testConfig(), extra: Pick<WebhookServerOptions, "labelSlots"> = {}): Promise<TestWebhook> {
  const now = new Date();
  const ca = await createLocalCa("test webhook CA", now, 3600_000);
  const tls = await ca.issue({ commonName: "localhost", names: ["localhost", "127.0.0.1"], now, validityMs: 3600_000 });
  const server = await startWebhookServer({ host: "127.0.0.1", port: 0, tls, config, logger: silentLogger(), ...extra });
  t.teardown(() => server.close());
  return {
    server,
    ca: ca.certPem,
    send(opts) {
      return new Promise<HttpAnswer>((resolve, reject) => {
        const req = request(
          {
            host: "127.0.0.1",
            servername: "localhost",
            port: server.port,
            method: opts.method ?? "POST",
            path: opts.path ?? "/mutate-pods",
            headers: opts.headers ?? { "content-type": "application/json" },
            ca: ca.certPem,
            agent: false,
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (c: Buffer) => chunks.push(c));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
            res.on("error", reject);
          },
        );
        // Writes may fail once the server has answered and closed an
        // oversized upload; the answer is what the tests look at.
        req.on("error", (e) => reject(e));
        if (opts.bodyStream !== undefined) {
          const stream = opts.bodyStream;
          void (async () => {
            try {
              for await (const chunk of stream) {
                if (req.destroyed) return;
                if (!req.write(chunk)) await new Promise((r) => req.once("drain", r));
              }
              req.end();
            } catch {
              // The server closed the connection mid-upload.
            }
          })();
        } else {
          req.end(opts.body);
        }
      });
    },
  };
}
