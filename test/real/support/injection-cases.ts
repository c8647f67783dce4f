/**
 * The injection cases of issue 15 §1, run against an {@link AdmissionRig}:
 * pods created through the real apiserver's admission chain, assertions on
 * what it stored and on how many reviews the manager counted. Shared by
 * test/real/injection.test.ts (the rendered overlay, both certificate modes)
 * and test/real/manifests.test.ts (the configuration `kubectl apply -k`
 * left on the server).
 *
 * Expectations about the injected pod are written out here (paths, names,
 * env), not computed by the webhook's code, so a patch that mounts the wrong
 * path fails them; the one comparison with the webhook's own patch checks
 * that the apiserver applied that patch exactly.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { connect as tlsConnect } from "node:tls";
import jsonpatch from "fast-json-patch";
import type { Test } from "tap";
import { defaultInjectorConfig } from "../../../src/webhook/config.ts";
import { decideInjection } from "../../../src/webhook/decide.ts";
import { obj, str, type JsonObject } from "../../../src/webhook/json.ts";
import { buildInjectionPatch } from "../../../src/webhook/patch.ts";
import { SERVICE_ACCOUNT_PATH } from "../../support/service-account-admission.ts";
import { ANNOTATION_WEBHOOK, LABEL_WEBHOOK, MANAGER_NAMESPACE, WEBHOOK_CONFIG, createPod, ensureNamespace, type AdmissionRig, type ReviewCounts } from "./admission.ts";
import { call, callJson, waitUntil, type KubeObject, type Reply } from "./realapi.ts";

const SIDECAR = "shardcar-proxy";
const SHARED_VOLUME = "shardcar-serviceaccount";
const SIDECAR_SHARED_DIR = "/var/run/shardcar/serviceaccount";
/** A namespace the webhooks skip (namespaceSelector): what the server stores for a pod no webhook touched. */
export const CONTROL_NAMESPACE = "control";

type Container = { name: string; image?: string; args?: string[]; env?: Array<{ name: string; value?: string }>; volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>; restartPolicy?: string };
type PodShape = KubeObject & { spec: { initContainers?: Container[]; containers: Container[]; volumes?: Array<{ name: string; emptyDir?: { medium?: string } }> } };

const SERVER_FIELDS = ["uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"];

/** The object without what the server sets on every create, keys sorted: the bytes that must match. */
export function canonical(o: unknown, drop: { name?: boolean; namespace?: boolean } = {}): string {
  const copy = structuredClone(o) as KubeObject;
  const md = (copy.metadata ?? {}) as Record<string, unknown>;
  for (const f of SERVER_FIELDS) delete md[f];
  if (drop.name === true) delete md["name"];
  if (drop.namespace === true) delete md["namespace"];
  const sort = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(sort) : typeof v === "object" && v !== null ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort((v as Record<string, unknown>)[k])])) : v;
  return JSON.stringify(sort(copy));
}

const nameOf = (pod: JsonObject): string => str(obj(pod["metadata"])?.["name"]) ?? "";
const body = (r: Reply): string => r.body.toString("utf8");
const parsed = (r: Reply): PodShape => JSON.parse(body(r)) as PodShape;

/**
 * What the server stores for `pod` when no webhook is called: a server-side
 * dry run in the control namespace, moved back to the pod's namespace. (The
 * server decodes a pod into its Go type and encodes it again, which adds
 * empty structs such as `resources: {}`: "untouched" means equal to this.)
 */
export async function serverForm(rig: AdmissionRig, pod: JsonObject): Promise<PodShape> {
  const md = obj(pod["metadata"]) ?? {};
  const r = await createPod(rig.api.admin, { ...pod, metadata: { ...md, namespace: CONTROL_NAMESPACE } }, { dryRun: true });
  if (r.status !== 201) throw new Error(`control dry run: ${r.status} ${body(r)}`);
  const p = parsed(r);
  (p.metadata ?? {}).namespace = str(md["namespace"]) ?? "";
  return p;
}

const delta = (before: ReviewCounts, after: ReviewCounts, key = "total"): number => (after.get(key) ?? 0) - (before.get(key) ?? 0);

/** The checks every injected pod must pass, from first principles. */
function assertInjected(t: Test, stored: PodShape, image: string): void {
  const sidecars = (stored.spec.initContainers ?? []).filter((c) => c.name === SIDECAR);
  t.equal(sidecars.length, 1, "one shardcar-proxy init container");
  const sc = sidecars[0];
  t.equal(sc?.restartPolicy, "Always", "a native sidecar (restartPolicy: Always)");
  t.equal(sc?.image, image, "the sidecar runs the manager's own image");
  t.ok(sc?.args?.includes("--injected"), "the sidecar runs in injected mode");
  const saMount = sc?.volumeMounts?.find((m) => m.mountPath === SERVICE_ACCOUNT_PATH);
  t.match(saMount, { name: /^kube-api-access-/, readOnly: true }, "the sidecar keeps the real token, read-only, at the service-account path");
  t.match(sc?.volumeMounts?.find((m) => m.name === SHARED_VOLUME), { mountPath: SIDECAR_SHARED_DIR }, "the sidecar writes the shared volume at its own path");
  t.match(stored.spec.volumes?.find((v) => v.name === SHARED_VOLUME), { emptyDir: { medium: "Memory" } }, "the shared volume is a memory emptyDir");
  for (const app of stored.spec.containers) {
    const env = Object.fromEntries((app.env ?? []).map((e) => [e.name, e.value]));
    t.match(env, { KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: "7443" }, `${app.name} is pointed at the loopback proxy`);
    const mounts = (app.volumeMounts ?? []).filter((m) => m.mountPath === SERVICE_ACCOUNT_PATH);
    t.same(mounts, [{ name: SHARED_VOLUME, mountPath: SERVICE_ACCOUNT_PATH, readOnly: true }], `${app.name} sees the shared volume, read-only, at the service-account path, and nothing else there`);
    t.notOk((app.volumeMounts ?? []).some((m) => m.name.startsWith("kube-api-access-")), `${app.name} no longer mounts the real token`);
  }
  const status = stored.metadata?.annotations?.["shardcar.io/status"];
  t.match(JSON.parse(status ?? "null"), { sidecar: SIDECAR, volume: SHARED_VOLUME }, "shardcar.io/status records the injection");
}

/** The stored pod is exactly the webhook's patch applied to what the webhook was sent. */
async function assertPatchAppliedExactly(t: Test, rig: AdmissionRig, sent: JsonObject, stored: PodShape, image: string): Promise<void> {
  const seen = (await serverForm(rig, sent)) as unknown as JsonObject;
  const decision = decideInjection(seen, defaultInjectorConfig(image), { namespace: str(obj(seen["metadata"])?.["namespace"]) ?? "" });
  if (!("inject" in decision) || !decision.inject) {
    t.fail(`the webhook's own decision does not inject: ${JSON.stringify(decision)}`);
    return;
  }
  const want = jsonpatch.applyPatch(structuredClone(seen), buildInjectionPatch(seen, decision.plan) as jsonpatch.Operation[], true, false).newDocument;
  t.equal(canonical(stored), canonical(want), "the apiserver stored exactly the webhook's patch applied to the pod it was sent");
}

export interface CaseOptions {
  /** Self-managed mode only: the manager's certificate rotation. */
  readonly rotation: boolean;
}

/** Registers the §1 cases as subtests of `t`, in order (the last ones stop and restart the manager). */
export async function injectionCases(t: Test, rig: AdmissionRig, opts: CaseOptions): Promise<void> {
  const api = rig.api.admin;
  const ns = await rig.testNamespace();
  await ensureNamespace(rig.api, CONTROL_NAMESPACE, { "shardcar.io/injection": "disabled" });
  const image = String(rig.managerPod?.spec?.containers[0]?.image);
  let firstInjected: PodShape | undefined;

  await t.test("a pod labelled shardcar.io/inject gets the sidecar", async (t) => {
    const before = await rig.reviews();
    const sent = rig.pod(ns, "labelled", { label: true });
    const r = await createPod(api, sent);
    t.equal(r.status, 201, `created: ${body(r).slice(0, 300)}`);
    const stored = parsed(r);
    assertInjected(t, stored, image);
    await assertPatchAppliedExactly(t, rig, sent, stored, image);
    const after = await rig.reviews();
    t.equal(delta(before, after, "injected/"), 1, "the manager counted one injection");
    firstInjected = stored;
  });

  await t.test("a pod only annotated shardcar.io/inject gets the sidecar through the matchConditions webhook", async (t) => {
    const before = await rig.reviews();
    const sent = rig.pod(ns, "annotated", { annotation: true });
    t.notOk(((sent["metadata"] as KubeObject["metadata"])?.labels ?? {})["shardcar.io/inject"], "no label: only the annotation webhook's objectSelector and matchConditions admit it");
    const r = await createPod(api, sent);
    t.equal(r.status, 201, `created: ${body(r).slice(0, 300)}`);
    assertInjected(t, parsed(r), image);
    await assertPatchAppliedExactly(t, rig, sent, parsed(r), image);
    t.equal(delta(before, await rig.reviews(), "injected/"), 1, "the manager counted one injection");
  });

  await t.test("a pod that did not opt in is stored byte for byte as sent, and never reaches the webhook", async (t) => {
    const before = await rig.reviews();
    const pods = [
      rig.pod(ns, "plain"),
      rig.pod(ns, "other-annotations", { annotations: { "example.com/owner": "team-a" } }),
      // shardcar settings without the toggle do not opt in (and are not sent).
      rig.pod(ns, "settings-only", { annotations: { "shardcar.io/resources": "pods", "shardcar.io/shards": "0/2" } }),
      rig.pod(ns, "other-labels", { spec: { containers: [{ name: "a", image: "example.test/a:1" }, { name: "b", image: "example.test/b:1" }] } }),
    ];
    for (const sent of pods) {
      const r = await createPod(api, sent);
      t.equal(r.status, 201, `created: ${body(r).slice(0, 200)}`);
      t.equal(canonical(parsed(r)), canonical(await serverForm(rig, sent)), `${nameOf(sent)}: stored exactly as a pod no webhook saw`);
    }
    t.equal(delta(before, await rig.reviews()), 0, `the manager saw none of the ${pods.length} pods`);
  });

  await t.test("a second pass over an injected pod changes nothing", async (t) => {
    if (firstInjected === undefined) {
      t.fail("no injected pod from the first case");
      return;
    }
    const again = structuredClone(firstInjected) as KubeObject;
    const md = (again.metadata ?? {}) as Record<string, unknown>;
    for (const f of SERVER_FIELDS) delete md[f];
    md["name"] = `${String(md["name"])}-again`;
    const before = await rig.reviews();
    const r = await createPod(api, again as JsonObject);
    t.equal(r.status, 201, `created: ${body(r).slice(0, 300)}`);
    t.equal(canonical(parsed(r), { name: true }), canonical(firstInjected, { name: true }), "stored exactly as the injected pod it copies");
    const after = await rig.reviews();
    t.equal(delta(before, after), 1, "the label webhook sent it");
    t.equal(delta(before, after, "skipped/already-injected"), 1, "and the manager skipped it as already injected");
  });

  await t.test("a pod the webhook must refuse is refused with the webhook's message", async (t) => {
    const cases = [
      { what: "hostNetwork", pod: rig.pod(ns, "host-network", { label: true, spec: { hostNetwork: true } }), webhook: LABEL_WEBHOOK, message: "shardcar cannot inject into a pod with hostNetwork: true" },
      { what: "a bad annotation (label)", pod: rig.pod(ns, "bad-fallback", { label: true, annotations: { "shardcar.io/fallback": "maybe" } }), webhook: LABEL_WEBHOOK, message: 'invalid shardcar.io/fallback \\"maybe\\"' },
      // failurePolicy Ignore covers failing calls, not answers: a refusal refuses.
      { what: "a bad annotation (annotation)", pod: rig.pod(ns, "bad-shards", { annotation: true, annotations: { "shardcar.io/shards": "4/3" } }), webhook: ANNOTATION_WEBHOOK, message: "shardcar.io/shards" },
    ];
    for (const c of cases) {
      const before = await rig.reviews();
      const r = await createPod(api, c.pod);
      t.equal(r.status, 403, `${c.what}: refused (${r.status})`);
      t.match(body(r), `admission webhook \\"${c.webhook}\\" denied the request`, `${c.what}: the error names the webhook`);
      t.match(body(r), c.message, `${c.what}: and carries its message`);
      t.equal(delta(before, await rig.reviews(), "denied/"), 1, `${c.what}: counted as denied`);
      const name = nameOf(c.pod);
      t.equal((await call(api, `/api/v1/namespaces/${ns}/pods/${name}`)).status, 404, `${c.what}: nothing stored`);
    }
  });

  await t.test("the manager's own pods are never sent to the webhook nor changed", async (t) => {
    const own = rig.managerPod;
    if (own === undefined) {
      t.fail("no manager pod");
      return;
    }
    const before = await rig.reviews();
    // Another replica, as a rollout makes it while this one serves.
    const replica = structuredClone(own) as KubeObject;
    const md = (replica.metadata ?? {}) as Record<string, unknown>;
    for (const f of SERVER_FIELDS) delete md[f];
    md["name"] = `${String(md["name"])}-replica`;
    const r = await createPod(api, replica as JsonObject);
    t.equal(r.status, 201, `created: ${body(r).slice(0, 200)}`);
    t.equal(canonical(parsed(r)), canonical(await serverForm(rig, replica as JsonObject)), "a new manager pod is stored exactly as sent");
    // Even opted in, nothing in the manager's namespace reaches the webhook.
    const labelled = rig.pod(MANAGER_NAMESPACE, "opted-in-here", { label: true });
    const r2 = await createPod(api, labelled);
    t.equal(r2.status, 201, `a labelled pod in ${MANAGER_NAMESPACE} is created: ${body(r2).slice(0, 200)}`);
    t.equal(canonical(parsed(r2)), canonical(await serverForm(rig, labelled)), "and stored exactly as sent");
    t.equal(delta(before, await rig.reviews()), 0, "the manager saw neither");
    t.equal(canonical(await callJson(api, "GET", `/api/v1/namespaces/${MANAGER_NAMESPACE}/pods/${own.metadata?.name ?? ""}`)), canonical(own), "the running manager's pod is as it was created");
  });

  if (opts.rotation) {
    await t.test("a certificate rotation by the manager keeps admission working without restarting the apiserver", async (t) => {
      await rotationCase(t, rig);
    });
  }

  await t.test("with the manager stopped, a labelled pod is refused naming the webhook and an annotated one is created without the sidecar", async (t) => {
    await rig.stopManager();
    const labelled = await createPod(api, rig.pod(ns, "outage-labelled", { label: true }));
    t.equal(labelled.status, 500, `refused (${labelled.status})`);
    t.match(body(labelled), `failed calling webhook \\"${LABEL_WEBHOOK}\\"`, "the error names the label webhook");
    const sent = rig.pod(ns, "outage-annotated", { annotation: true });
    const annotated = await createPod(api, sent);
    t.equal(annotated.status, 201, `created (${annotated.status}): ${body(annotated).slice(0, 200)}`);
    t.equal(canonical(parsed(annotated)), canonical(await serverForm(rig, sent)), "stored exactly as sent: no sidecar, no status");
    await rig.startManager();
    const back = await createPod(api, rig.pod(ns, "after-outage", { label: true }));
    t.equal(back.status, 201, "a new manager pod serves again");
    assertInjected(t, parsed(back), image);
  });
}

/** The serving certificate the webhook Service presents (as the apiserver connects: SNI the service name). */
async function servedCertificate(rig: AdmissionRig): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: "127.0.0.1", port: rig.webhook.port, servername: `shardcar-webhook.${MANAGER_NAMESPACE}.svc`, rejectUnauthorized: false }, () => {
      const raw = s.getPeerCertificate().raw;
      s.destroy();
      resolve(new X509Certificate(raw));
    });
    s.once("error", reject);
  });
}

/** A process's start time (field 22 of /proc/PID/stat), or "gone". */
function processStart(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ")[19] ?? "?";
  } catch {
    return "gone";
  }
}

async function caBundles(rig: AdmissionRig): Promise<string[]> {
  const mwc = await callJson<{ webhooks: Array<{ clientConfig: { caBundle?: string } }> }>(rig.api.admin, "GET", `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${WEBHOOK_CONFIG}`);
  return mwc.webhooks.map((w) => Buffer.from(w.clientConfig.caBundle ?? "", "base64").toString("utf8"));
}

async function rotationCase(t: Test, rig: AdmissionRig): Promise<void> {
  const api = rig.api.admin;
  const ns = await rig.testNamespace();
  const started = processStart(rig.api.pid);
  // A manager whose certificates live 24 s (renewed with 8 s left), from a
  // fresh Secret, so the first renewal comes while the test watches.
  await rig.stopManager();
  const del = await call(api, `/api/v1/namespaces/${MANAGER_NAMESPACE}/secrets/shardcar-webhook-tls`, { method: "DELETE" });
  t.equal(del.status, 200, "the old Secret is gone");
  await rig.startManager(["--cert-validity=24s", "--cert-resync=1s"]);
  const first = await servedCertificate(rig);
  const lifetime = new Date(first.validTo).getTime() - Date.now();
  t.ok(lifetime < 30_000, `the served certificate is the short-lived one (${Math.round(lifetime / 1000)} s left)`);

  // Pods keep coming, four at a time, until well after the rollover.
  let created = 0;
  const failures: string[] = [];
  let rotatedAt: number | undefined;
  let current = first;
  const deadline = Date.now() + 40_000;
  const writer = async (w: number): Promise<void> => {
    for (let i = 0; Date.now() < deadline && (rotatedAt === undefined || Date.now() < rotatedAt + 4000); i++) {
      const r = await createPod(api, rig.pod(ns, `rotation-${w}`, { label: true }));
      if (r.status === 201 && body(r).includes(SIDECAR)) created++;
      else failures.push(`${r.status} ${body(r).slice(0, 300)}`);
    }
  };
  const watcher = async (): Promise<void> => {
    while (Date.now() < deadline && rotatedAt === undefined) {
      current = await servedCertificate(rig);
      if (current.fingerprint256 !== first.fingerprint256) rotatedAt = Date.now();
      else await new Promise((r) => setTimeout(r, 200));
    }
  };
  await Promise.all([watcher(), writer(0), writer(1), writer(2), writer(3)]);
  t.ok(rotatedAt !== undefined, "the manager rotated its serving certificate");
  t.same(failures, [], `every pod created across the rotation was injected (${created})`);
  const bundles = await caBundles(rig);
  for (const [i, pem] of bundles.entries()) {
    const cas = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
    t.ok(cas.some((ca) => current.checkIssued(new X509Certificate(ca)) && current.verify(new X509Certificate(ca).publicKey)), `webhook ${i}: caBundle verifies the new certificate`);
    t.ok(cas.some((ca) => first.checkIssued(new X509Certificate(ca))), `webhook ${i}: and still the previous one`);
  }
  t.equal(processStart(rig.api.pid), started, "the same apiserver process throughout (its start time is unchanged)");
  t.equal((await call(api, "/readyz")).status, 200, "and it is healthy");
  await waitUntil("a pod after the rotation is injected", async () => {
    const r = await createPod(api, rig.pod(ns, "after-rotation", { label: true }));
    return r.status === 201 && body(r).includes(SIDECAR);
  }, 10_000);
}
