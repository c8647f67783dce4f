import t from "tap";
import { createServer, type IncomingMessage } from "node:http";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { X509Certificate } from "node:crypto";
import jsonpatch from "fast-json-patch";
import { ApiClient, directConnection } from "../../src/kube/client.ts";
import { silentLogger } from "../../src/log.ts";
import {
  DEFAULT_CERT_POLICY,
  FileCertificates,
  SelfManagedCertificates,
  caBundlePatch,
  issueWebhookCertificates,
  kubeSecretStore,
  kubeWebhookConfigStore,
  planWebhookCertificates,
  watchCertificates,
  webhookDnsNames,
  type CaBundleOperation,
  type CertificateSource,
  type SecretStore,
  type WebhookCaEntry,
  type WebhookConfigStore,
  type WebhookSecretData,
} from "../../src/webhook/certs.ts";
import { inspectCertificate, isSignedBy, keyMatchesCertificate, splitPemBundle } from "../../src/pki/inspect.ts";
import { eventually } from "../support/wait.ts";

const DAY = 24 * 3600_000;
const NOW = new Date("2026-11-30T12:00:00Z");
const NAMES = webhookDnsNames("shardcar-webhook", "shardcar-system");
const fp = (pem: string): string => new X509Certificate(pem).fingerprint256;

t.test("the serving names cover every way the apiserver may address the Service", async (t) => {
  t.same(NAMES, ["shardcar-webhook", "shardcar-webhook.shardcar-system", "shardcar-webhook.shardcar-system.svc", "shardcar-webhook.shardcar-system.svc.cluster.local"]);
});

t.test("planWebhookCertificates", async (t) => {
  const good = await issueWebhookCertificates(undefined, NAMES, NOW);
  const other = await issueWebhookCertificates(undefined, NAMES, NOW);
  const rows: Array<[string, Partial<WebhookSecretData> | undefined, Date, string[] | undefined]> = [
    ["no Secret: issue", undefined, NOW, NAMES],
    ["a fresh certificate: keep", good, NOW, undefined],
    ["a certificate with most of its life ahead: keep", good, new Date(NOW.getTime() + 200 * DAY), undefined],
    ["missing keys: issue", { "tls.crt": good["tls.crt"] }, NOW, NAMES],
    ["garbage certificate: issue", { ...good, "tls.crt": "not a cert" }, NOW, NAMES],
    ["key of another certificate: issue", { ...good, "tls.key": other["tls.key"] }, NOW, NAMES],
    ["not signed by any CA in ca.crt: issue", { ...good, "ca.crt": other["ca.crt"] }, NOW, NAMES],
    ["inside the renewal window: issue", good, new Date(NOW.getTime() + DEFAULT_CERT_POLICY.validityMs - DEFAULT_CERT_POLICY.renewBeforeMs + DAY), NAMES],
    ["for other names: issue", good, NOW, [...NAMES, "shardcar-webhook.other.svc"]],
  ];
  for (const [name, data, now, names] of rows) {
    const plan = planWebhookCertificates(data, names ?? NAMES, now);
    t.equal(plan.action, name.endsWith(": keep") ? "keep" : "issue", `${name}${plan.action === "issue" ? ` (${plan.reason})` : ""}`);
  }
});

t.test("issued certificates: serving cert for every name, signed by the first CA, key matches", async (t) => {
  const d = await issueWebhookCertificates(undefined, NAMES, NOW);
  const facts = inspectCertificate(d["tls.crt"]);
  t.same(facts?.dnsNames, NAMES);
  t.equal(facts?.isCa, false);
  const cas = splitPemBundle(d["ca.crt"]);
  t.equal(cas.length, 1);
  t.ok(isSignedBy(d["tls.crt"], cas[0] ?? ""));
  t.ok(keyMatchesCertificate(d["tls.key"], d["tls.crt"]));
  t.equal(facts?.notAfter.getTime(), NOW.getTime() + DEFAULT_CERT_POLICY.validityMs - ((NOW.getTime() + DEFAULT_CERT_POLICY.validityMs) % 1000), "valid for the policy's lifetime");
});

t.test("a renewal keeps the previous CA while it is valid, and drops expired ones", async (t) => {
  const old = await issueWebhookCertificates(undefined, NAMES, new Date(NOW.getTime() - 250 * DAY));
  const renewed = await issueWebhookCertificates(old, NAMES, NOW);
  const cas = splitPemBundle(renewed["ca.crt"]);
  t.equal(cas.length, 2, "new CA and the still-valid old one");
  t.ok(isSignedBy(renewed["tls.crt"], cas[0] ?? ""), "the new CA comes first and signed the new certificate");
  t.equal(fp(cas[1] ?? ""), fp(old["ca.crt"]), "the old CA is kept, so the old certificate still verifies");
  const later = await issueWebhookCertificates(renewed, NAMES, new Date(NOW.getTime() + 130 * DAY));
  t.equal(splitPemBundle(later["ca.crt"]).length, 2, "the CA that expired in the meantime is gone");
});

t.test("a renewed ca.crt puts every certificate on lines of its own, as Go's encoding/pem (the apiserver loading caBundle) requires", async (t) => {
  const old = await issueWebhookCertificates(undefined, NAMES, new Date(NOW.getTime() - 250 * DAY));
  const renewed = await issueWebhookCertificates(old, NAMES, NOW);
  const block = "-----BEGIN CERTIFICATE-----\n(?:[A-Za-z0-9+/=]+\n)+-----END CERTIFICATE-----\n";
  t.match(renewed["ca.crt"], new RegExp(`^(?:${block}){2}$`), "two whole PEM blocks, each ending in a newline");
  t.match(renewed["tls.crt"], new RegExp(`^${block}$`), "the serving certificate too");
});

t.test("caBundlePatch guards each change with a test of the webhook's name, and is empty when nothing differs", async (t) => {
  const bundle = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  const b64 = Buffer.from(bundle).toString("base64");
  t.same(caBundlePatch([{ name: "a", caBundle: undefined }, { name: "b", caBundle: "old" }, { name: "c", caBundle: b64 }], bundle), [
    { op: "test", path: "/webhooks/0/name", value: "a" },
    { op: "add", path: "/webhooks/0/clientConfig/caBundle", value: b64 },
    { op: "test", path: "/webhooks/1/name", value: "b" },
    { op: "replace", path: "/webhooks/1/clientConfig/caBundle", value: b64 },
  ]);
  t.same(caBundlePatch([{ name: "a", caBundle: b64 }], bundle), []);
});

/** An in-memory Secret with resourceVersion semantics, shared by "replicas". */
class MemorySecrets implements SecretStore {
  data: WebhookSecretData | undefined;
  rv = 0;
  writes = 0;
  async get(): Promise<{ data: WebhookSecretData; resourceVersion: string } | undefined> {
    return this.data === undefined ? undefined : { data: this.data, resourceVersion: String(this.rv) };
  }
  async create(data: WebhookSecretData): Promise<"created" | "conflict"> {
    if (this.data !== undefined) return "conflict";
    this.writes++;
    this.data = data;
    this.rv++;
    return "created";
  }
  async update(data: WebhookSecretData, rv: string): Promise<"updated" | "conflict"> {
    if (rv !== String(this.rv)) return "conflict";
    this.writes++;
    this.data = data;
    this.rv++;
    return "updated";
  }
}

class MemoryWebhookConfig implements WebhookConfigStore {
  webhooks: WebhookCaEntry[] = [
    { name: "label.inject.shardcar.io", caBundle: undefined },
    { name: "annotation.inject.shardcar.io", caBundle: undefined },
  ];
  patches = 0;
  readonly events: string[];
  constructor(events: string[] = []) {
    this.events = events;
  }
  async get(): Promise<WebhookCaEntry[]> {
    return structuredClone(this.webhooks);
  }
  async patch(ops: readonly CaBundleOperation[]): Promise<void> {
    this.patches++;
    this.events.push("patch caBundle");
    const doc = jsonpatch.applyPatch({ webhooks: this.webhooks.map((w) => ({ name: w.name, clientConfig: w.caBundle === undefined ? {} : { caBundle: w.caBundle } })) }, structuredClone(ops) as jsonpatch.Operation[], true, false).newDocument;
    this.webhooks = doc.webhooks.map((w) => ({ name: w.name, caBundle: (w.clientConfig).caBundle }));
  }
}

t.test("self-managed: the first replica creates the Secret and patches caBundle into every webhook", async (t) => {
  const secrets = new MemorySecrets();
  const cfg = new MemoryWebhookConfig();
  const tls = await new SelfManagedCertificates({ secrets, webhookConfig: cfg, dnsNames: NAMES, logger: silentLogger(), now: () => NOW }).load();
  t.equal(secrets.writes, 1);
  t.equal(tls.cert, secrets.data?.["tls.crt"]);
  t.equal(tls.key, secrets.data?.["tls.key"]);
  const want = Buffer.from(secrets.data?.["ca.crt"] ?? "").toString("base64");
  t.same(cfg.webhooks.map((w) => w.caBundle), [want, want]);
});

t.test("self-managed: a second replica adopts the Secret without writing anything", async (t) => {
  const secrets = new MemorySecrets();
  const cfg = new MemoryWebhookConfig();
  const first = await new SelfManagedCertificates({ secrets, webhookConfig: cfg, dnsNames: NAMES, logger: silentLogger(), now: () => NOW }).load();
  const second = await new SelfManagedCertificates({ secrets, webhookConfig: cfg, dnsNames: NAMES, logger: silentLogger(), now: () => new Date(NOW.getTime() + 60_000) }).load();
  t.same(second, first);
  t.equal(secrets.writes, 1);
  t.equal(cfg.patches, 1);
});

t.test("self-managed: a replica that loses the create race adopts the winner's certificate", async (t) => {
  const secrets = new MemorySecrets();
  const winner = await issueWebhookCertificates(undefined, NAMES, NOW);
  // The winner writes between this replica's get (empty) and its create.
  const racing: SecretStore = {
    get: (() => {
      let first = true;
      return async () => {
        if (first) {
          first = false;
          return undefined;
        }
        return secrets.get();
      };
    })(),
    create: async (data) => {
      await secrets.create(winner);
      return secrets.create(data);
    },
    update: (d, rv) => secrets.update(d, rv),
  };
  const tls = await new SelfManagedCertificates({ secrets: racing, webhookConfig: new MemoryWebhookConfig(), dnsNames: NAMES, logger: silentLogger(), now: () => NOW }).load();
  t.equal(tls.cert, winner["tls.crt"]);
  t.equal(secrets.writes, 1, "only the winner wrote");
});

t.test("self-managed: a renewal publishes the new CA in caBundle (next to the old) before the new certificate is served", async (t) => {
  const events: string[] = [];
  const secrets = new MemorySecrets();
  const cfg = new MemoryWebhookConfig(events);
  let now = NOW;
  const source = new SelfManagedCertificates({ secrets, webhookConfig: cfg, dnsNames: NAMES, logger: silentLogger(), now: () => now });
  const first = await source.load();
  events.length = 0;
  now = new Date(NOW.getTime() + 300 * DAY);
  const renewed = await source.load();
  events.push("serve");
  t.not(renewed.cert, first.cert);
  t.same(events, ["patch caBundle", "serve"]);
  const bundle = Buffer.from(cfg.webhooks[0]?.caBundle ?? "", "base64").toString("utf8");
  const cas = splitPemBundle(bundle);
  t.ok(cas.some((ca) => isSignedBy(first.cert, ca)), "the old certificate still verifies against caBundle");
  t.ok(cas.some((ca) => isSignedBy(renewed.cert, ca)), "and so does the new one");
});

t.test("self-managed: when the webhook configuration cannot be read, load fails (the caller keeps its certificate)", async (t) => {
  const cfg: WebhookConfigStore = {
    get: async () => {
      throw new Error("mutatingwebhookconfigurations.admissionregistration.k8s.io \"shardcar\" not found");
    },
    patch: async () => {},
  };
  await t.rejects(new SelfManagedCertificates({ secrets: new MemorySecrets(), webhookConfig: cfg, dnsNames: NAMES, logger: silentLogger(), now: () => NOW }).load(), /not found/);
});

t.test("cert-manager mode reads tls.crt and tls.key from the mounted Secret and refuses a mismatched pair", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "shardcar-certs-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const a = await issueWebhookCertificates(undefined, NAMES, NOW);
  const b = await issueWebhookCertificates(undefined, NAMES, NOW);
  await writeFile(join(dir, "tls.crt"), a["tls.crt"]);
  await writeFile(join(dir, "tls.key"), a["tls.key"]);
  const src = new FileCertificates(dir);
  t.same(await src.load(), { cert: a["tls.crt"], key: a["tls.key"] });
  await writeFile(join(dir, "tls.key"), b["tls.key"]);
  await t.rejects(src.load(), /tls.key does not match tls.crt/);
});

t.test("watchCertificates retries the first load, then reports each change once, and stops on abort", async (t) => {
  const a = await issueWebhookCertificates(undefined, NAMES, NOW);
  const b = await issueWebhookCertificates(undefined, NAMES, NOW);
  const script: Array<{ key: string; cert: string } | Error> = [new Error("not yet"), { key: a["tls.key"], cert: a["tls.crt"] }, { key: a["tls.key"], cert: a["tls.crt"] }, { key: b["tls.key"], cert: b["tls.crt"] }];
  let calls = 0;
  const source: CertificateSource = {
    async load() {
      const next = script[Math.min(calls++, script.length - 1)];
      if (next === undefined || next instanceof Error) throw next ?? new Error("empty");
      return next;
    },
  };
  const ac = new AbortController();
  const changes: string[] = [];
  const first = await watchCertificates({ source, intervalMs: 5, retryMs: 5, logger: silentLogger(), signal: ac.signal, onChange: (tls) => changes.push(tls.cert) });
  t.equal(first.cert, a["tls.crt"]);
  await eventually(() => changes.length > 0);
  t.same(changes, [b["tls.crt"]], "one change, for the new certificate only");
  ac.abort();
  const after = calls;
  await new Promise((r) => setTimeout(r, 50));
  t.ok(calls <= after + 1, "no more loads after abort");
});

t.test("watchCertificates rejects when aborted before any certificate loaded", async (t) => {
  const ac = new AbortController();
  const p = watchCertificates({ source: { load: () => Promise.reject(new Error("never")) }, intervalMs: 5, retryMs: 5, logger: silentLogger(), signal: ac.signal, onChange: () => {} });
  setTimeout(() => ac.abort(new Error("stopping")), 30);
  await t.rejects(p, /stopping/);
});

/**
 * A tiny fake apiserver for the two objects certs.ts touches, so the
 * stores are checked on the wire: paths, verbs, the JSON Patch content
 * type, resourceVersion conflicts and 404s.
 */
async function fakeApiserver(t: { teardown(fn: () => unknown): void }) {
  const state = {
    secret: undefined as Record<string, unknown> | undefined,
    rv: 0,
    mwc: {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "MutatingWebhookConfiguration",
      metadata: { name: "shardcar", resourceVersion: "7" },
      webhooks: [
        { name: "label.inject.shardcar.io", clientConfig: { service: { name: "shardcar-webhook", namespace: "shardcar-system", path: "/mutate-pods" } }, sideEffects: "None", admissionReviewVersions: ["v1"] },
        { name: "annotation.inject.shardcar.io", clientConfig: { service: { name: "shardcar-webhook", namespace: "shardcar-system", path: "/mutate-pods" } }, sideEffects: "None", admissionReviewVersions: ["v1"] },
      ],
    } as Record<string, unknown>,
    requests: [] as string[],
  };
  const SECRET = "/api/v1/namespaces/shardcar-system/secrets";
  const MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/shardcar";
  const body = async (req: IncomingMessage): Promise<unknown> => {
    const chunks: Buffer[] = [];
    for await (const c of req as AsyncIterable<Buffer>) chunks.push(c);
    return JSON.parse(Buffer.concat(chunks).toString("utf8") || "null") as unknown;
  };
  const server = createServer((req, res) => {
    void (async () => {
      const url = (req.url ?? "").split("?")[0] ?? "";
      state.requests.push(`${req.method} ${url}${req.method === "PATCH" ? ` ${req.headers["content-type"] ?? ""}` : ""}`);
      const send = (code: number, obj: unknown): void => {
        res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(obj));
      };
      const status = (code: number, reason: string): void => send(code, { kind: "Status", apiVersion: "v1", status: "Failure", reason, code });
      if (req.method === "GET" && url === `${SECRET}/shardcar-webhook-tls`) return state.secret ? send(200, state.secret) : status(404, "NotFound");
      if (req.method === "POST" && url === SECRET) {
        if (state.secret) return status(409, "AlreadyExists");
        const s = (await body(req)) as { metadata: Record<string, unknown> };
        state.secret = { ...s, metadata: { ...s.metadata, resourceVersion: String(++state.rv) } };
        return send(201, state.secret);
      }
      if (req.method === "PUT" && url === `${SECRET}/shardcar-webhook-tls`) {
        const s = (await body(req)) as { metadata: { resourceVersion?: string } };
        if (s.metadata.resourceVersion !== String(state.rv)) return status(409, "Conflict");
        state.secret = { ...s, metadata: { ...s.metadata, resourceVersion: String(++state.rv) } };
        return send(200, state.secret);
      }
      if (req.method === "GET" && url === MWC) return send(200, state.mwc);
      if (req.method === "PATCH" && url === MWC) {
        if (req.headers["content-type"] !== "application/json-patch+json") return status(415, "UnsupportedMediaType");
        try {
          state.mwc = jsonpatch.applyPatch(structuredClone(state.mwc), (await body(req)) as jsonpatch.Operation[], true, false).newDocument;
        } catch {
          return status(422, "Invalid");
        }
        return send(200, state.mwc);
      }
      status(404, "NotFound");
    })();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const kc = new ApiClient(directConnection({ server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: "manager-token" }));
  return { kc, state };
}

t.test("through the API client: creates a kubernetes.io/tls Secret, JSON-patches caBundle, and is quiet on the next pass", async (t) => {
  const { kc, state } = await fakeApiserver(t);
  const source = new SelfManagedCertificates({
    secrets: kubeSecretStore(kc, "shardcar-system", "shardcar-webhook-tls"),
    webhookConfig: kubeWebhookConfigStore(kc, "shardcar"),
    dnsNames: NAMES,
    logger: silentLogger(),
    now: () => NOW,
  });
  const tls = await source.load();
  const secret = state.secret as { type: string; data: Record<string, string> };
  t.equal(secret.type, "kubernetes.io/tls");
  t.same(Object.keys(secret.data).sort(), ["ca.crt", "tls.crt", "tls.key"]);
  t.equal(Buffer.from(secret.data["tls.crt"] ?? "", "base64").toString("utf8"), tls.cert, "stored base64, as the API requires");
  const webhooks = (state.mwc as { webhooks: Array<{ clientConfig: { caBundle?: string } }> }).webhooks;
  t.same(webhooks.map((w) => w.clientConfig.caBundle), [secret.data["ca.crt"], secret.data["ca.crt"]], "caBundle is the base64 of ca.crt on both webhooks");
  t.same(state.requests, [
    "GET /api/v1/namespaces/shardcar-system/secrets/shardcar-webhook-tls",
    "POST /api/v1/namespaces/shardcar-system/secrets",
    "GET /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/shardcar",
    "PATCH /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/shardcar application/json-patch+json",
  ]);
  state.requests.length = 0;
  t.same(await source.load(), tls);
  t.same(state.requests, ["GET /api/v1/namespaces/shardcar-system/secrets/shardcar-webhook-tls", "GET /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/shardcar"], "no writes when all is well");
});

t.test("through the API client: a stale resourceVersion on update is a conflict, not an error", async (t) => {
  const { kc } = await fakeApiserver(t);
  const store = kubeSecretStore(kc, "shardcar-system", "shardcar-webhook-tls");
  const d = await issueWebhookCertificates(undefined, NAMES, NOW);
  t.equal(await store.get(), undefined, "404 reads as no Secret");
  t.equal(await store.create(d), "created");
  t.equal(await store.create(d), "conflict");
  const current = await store.get();
  t.equal(await store.update(d, current?.resourceVersion ?? ""), "updated");
  t.equal(await store.update(d, current?.resourceVersion ?? ""), "conflict", "the old resourceVersion no longer applies");
});
