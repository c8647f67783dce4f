/**
 * Golden tests for injection, after istio's `pkg/kube/inject/testdata`.
 *
 * Every `<case>.pod.json` in testdata/inject is a case, found automatically.
 * Its outcome is one of:
 * - `<case>.pod.json.denied`: the refusal message;
 * - `<case>.pod.json.patch` (the JSON Patch, pretty-printed) and
 *   `<case>.pod.json.injected` (the input with the patch applied by
 *   fast-json-patch, for reviewers). An unchanged pod has an empty patch.
 *
 * Each case runs through the pure functions and through an AdmissionReview
 * POST to the real HTTPS server; both must agree with the goldens. Injected
 * pods are then checked field by field against the tables below, and fed back
 * in (idempotency). Golden files that no case produces fail the run.
 * `REFRESH_GOLDEN=1` rewrites the goldens (atomically) and deletes stale ones.
 */
import t from "tap";
import { SIDECAR_ENV } from "../../src/sidecar-runtime.ts";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import jsonpatch from "fast-json-patch";
import { decideInjection } from "../../src/webhook/decide.ts";
import type { InjectorConfig } from "../../src/webhook/config.ts";
import type { JsonObject } from "../../src/webhook/json.ts";
import { buildInjectionPatch } from "../../src/webhook/patch.ts";
import { reviewPodAdmission } from "../../src/webhook/review.ts";
import { Goldens } from "./goldens.ts";
import { reviewFor, startTestWebhook, testConfig, type TestWebhook } from "./support.ts";

const DIR = fileURLToPath(new URL("./testdata/inject/", import.meta.url));
const SA = "/var/run/secrets/kubernetes.io/serviceaccount";

/** The only cases that need something other than the defaults. */
const OVERRIDES: Record<string, { namespace?: string; config?: Partial<InjectorConfig> }> = {
  // metadata.namespace is empty at admission for most pods; the request's wins.
  "manager-namespace-from-request.pod.json": { namespace: "shardcar-system" },
  "custom-ports.pod.json": { config: { proxyPort: 16443, adminPort: 19464, imagePullPolicy: "Always" } },
};

/** What each injected case must look like, stated independently of the code. */
const INJECTED: Record<string, { apps: string[]; ring?: string; tokenVolume?: string }> = {
  "controller-runtime-manager.pod.json": { apps: ["manager"], ring: "guestbook-controller-manager", tokenVolume: "kube-api-access-7xk2p" },
  "kube-state-metrics.pod.json": { apps: ["kube-state-metrics"], tokenVolume: "kube-api-access-q9m4d" },
  // No kube-api-access yet: the ServiceAccount plugin would add it after us.
  "native-sidecar.pod.json": { apps: ["prometheus-operator"], ring: "prometheus-operator" },
  // istio-proxy is another mesh's proxy: never rewired.
  "istio-proxy.pod.json": { apps: ["argo-rollouts"], ring: "argo-rollouts", tokenVolume: "kube-api-access-h8d2x" },
  // automountServiceAccountToken: false: only the container that mounts a token is an API client.
  "automount-off-with-projected-token.pod.json": { apps: ["manager"], ring: "guestbook-controller-manager", tokenVolume: "guestbook-token" },
  "explicit-service-env.pod.json": { apps: ["manager"], ring: "guestbook-controller-manager", tokenVolume: "kube-api-access-7xk2p" },
  // shardcar.io/synthetic-deletes: "false": every range change relists.
  "synthetic-deletes-off.pod.json": { apps: ["manager"], ring: "guestbook-controller-manager", tokenVolume: "kube-api-access-7xk2p" },
  // The controller's own preStop (a sleep) is kept; the member hands on at the sidecar's SIGTERM.
  "own-prestop.pod.json": { apps: ["manager"], ring: "guestbook-controller-manager", tokenVolume: "kube-api-access-7xk2p" },
  // Static shards (1/4): no ring flag.
  "custom-ports.pod.json": { apps: ["manager"], tokenVolume: "kube-api-access-7xk2p" },
  // shardcar.io/filter: labels: --filter labels, the ring defaulted from the owner as in ring mode.
  "labels-ring.pod.json": { apps: ["manager"], ring: "guestbook-controller-manager", tokenVolume: "kube-api-access-7xk2p" },
  // Static shards in labels mode name their ring: it says what is labelled, and the label key.
  "labels-static-with-ring.pod.json": { apps: ["manager"], ring: "guestbook", tokenVolume: "kube-api-access-7xk2p" },
};

/** Cases admitted unchanged, and why. */
const UNCHANGED: Record<string, string> = {
  "not-opted-in.pod.json": "not-opted-in",
  "opted-out-label-beats-annotation.pod.json": "opted-out",
  "already-injected.pod.json": "already-injected",
};

/** Strings every refusal must contain: the annotation, the value, and what is allowed. */
const DENIED_MENTIONS: Record<string, string[]> = {
  "host-network.pod.json": ["hostNetwork: true", "7443", "9464"],
  "invalid-inject-value.pod.json": ["shardcar.io/inject", '"yes"', '"true" and "false"'],
  "invalid-resources-missing.pod.json": ["shardcar.io/resources is required", "e.g."],
  "invalid-resources-key.pod.json": ["shardcar.io/resources", '"guestbooks.webapp.my.domain=name"', "uid, namespace or owner"],
  "invalid-resources-empty-entry.pod.json": ["shardcar.io/resources", '"guestbooks.webapp.my.domain,,pods"', "empty entry", "allowed:"],
  "invalid-resources-name.pod.json": ["shardcar.io/resources", '"Guestbook"', "allowed:"],
  "invalid-shards.pod.json": ["shardcar.io/shards", '"3"', "ring, i/N", "ordinal/N", "shardRange"],
  "invalid-shards-index.pod.json": ["shardcar.io/shards", '"3/3"', "less than N"],
  "invalid-shards-selector.pod.json": ["shardcar.io/shards", "object.metadata.name"],
  "invalid-ring.pod.json": ["shardcar.io/ring", '"Guestbook_Ring"', "DNS-1123 label"],
  "invalid-ring-with-static-shards.pod.json": ["shardcar.io/ring", '"guestbook"', '"0/2"', "only with shardcar.io/shards: ring or shardcar.io/filter: labels"],
  "invalid-filter.pod.json": ["shardcar.io/filter", '"label"', '"shardselector" and "labels"'],
  "invalid-filter-labels-static-without-ring.pod.json": ["shardcar.io/filter", '"labels"', '"0/2"', "needs shardcar.io/ring"],
  "invalid-fallback.pod.json": ["shardcar.io/fallback", '"ignore"', '"filter" and "fail"'],
  "invalid-fallback-fail-owner-key.pod.json": ["shardcar.io/fallback", '"fail"', "owner keys", "(configmaps)"],
  "invalid-handoff.pod.json": ["shardcar.io/handoff", '"graceful"', '"overlap" and "exclusive"'],
  "invalid-synthetic-deletes.pod.json": ["shardcar.io/synthetic-deletes", '"no"', '"true" and "false"'],
  "invalid-leader-election.pod.json": ["shardcar.io/leader-election", '"secrets/guestbook-lock"', "leases/<name>, configmaps/<name> or endpoints/<name>"],
  "invalid-kubeconfig.pod.json": ["shardcar.io/kubeconfig", '"yes"', '"true" and "false"'],
  "invalid-unknown-annotation.pod.json": ["unknown annotation shardcar.io/shard", "shardcar.io/shards"],
  "invalid-several-at-once.pod.json": ['shardcar.io/fallback "Filter"', 'shardcar.io/handoff ""', 'shardcar.io/kubeconfig "1"'],
  "ordinal-on-deployment.pod.json": ['"ordinal/3"', "StatefulSet", 'generateName "guestbook-controller-manager-6d4f8b7c9d-"'],
  "ordinal-out-of-range.pod.json": ['"ordinal/2"', '"kube-state-metrics-2"', "ordinal 2"],
  "ring-without-owner.pod.json": ["shardcar.io/ring", "no controlling owner"],
  "no-token.pod.json": ["automountServiceAccountToken: false", SA],
  "manager-namespace.pod.json": ['"shardcar-system"'],
  "manager-namespace-from-request.pod.json": ['"shardcar-system"'],
  "status-without-sidecar.pod.json": ["shardcar.io/status", "shardcar-proxy"],
  "port-conflict.pod.json": ['"manager"', "9464", "--admin-port"],
};

/** As much of a pod as these checks read; everything else rides along as unknown. */
interface EnvVar {
  name: string;
  value?: string;
  [k: string]: unknown;
}
interface Mount {
  name: string;
  mountPath: string;
  [k: string]: unknown;
}
interface Container {
  name: string;
  env?: EnvVar[];
  volumeMounts?: Mount[];
  [k: string]: unknown;
}
interface Pod {
  metadata?: { namespace?: string; annotations?: Record<string, string>; [k: string]: unknown };
  spec: { containers: Container[]; initContainers?: Container[]; volumes?: unknown[]; [k: string]: unknown };
  [k: string]: unknown;
}
interface ReviewAnswer {
  response: { uid: string; allowed: boolean; status?: { code: number; message: string }; patchType?: string; patch?: string };
}

const inputs = readdirSync(DIR)
  .filter((f) => f.endsWith(".pod.json"))
  .sort();
const goldens = new Goldens(DIR, "test/webhook/inject.test.ts", inputs);
let webhook: TestWebhook;

t.before(async () => {
  webhook = await startTestWebhook(t);
});

interface Tap {
  equal(a: unknown, b: unknown, ...msg: [] | [string]): void;
  same(a: unknown, b: unknown, ...msg: [] | [string]): void;
  ok(a: unknown, ...msg: [] | [string]): void;
  notOk(a: unknown, ...msg: [] | [string]): void;
  pass(...msg: [] | [string]): void;
  fail(...msg: [] | [string]): void;
  match(a: unknown, b: unknown, ...msg: [] | [string]): void;
}

inputs.forEach((file, i) => {
  t.test(`[${String(i).padStart(2, "0")}] ${file}`, async (t) => {
    const raw = JSON.parse(readFileSync(join(DIR, file), "utf8")) as Pod;
    const override = OVERRIDES[file] ?? {};
    const config = testConfig(override.config);
    const namespace: string | undefined = override.namespace ?? raw.metadata?.namespace;
    const uid = `uid-${file}`;

    // Path 1: the pure functions.
    const decision = decideInjection(raw as unknown as JsonObject, config, namespace === undefined ? {} : { namespace });
    // Path 2: an AdmissionReview POSTed to the real HTTPS server.
    const server = override.config === undefined ? webhook : await startTestWebhook(t, config);
    const answer = await server.send({ body: JSON.stringify(reviewFor(raw, { uid, namespace })) });
    t.equal(answer.status, 200);
    const { response } = JSON.parse(answer.body) as ReviewAnswer;
    t.equal(response.uid, uid, "the response echoes the request's uid");

    if ("refuse" in decision) {
      goldens.check(t, `${file}.denied`, `${decision.refuse}\n`);
      t.equal(response.allowed, false, "denied over HTTPS too");
      t.same(response.status, { code: 403, reason: "Forbidden", message: decision.refuse }, "with the same message");
      const mentions = DENIED_MENTIONS[file];
      if (mentions === undefined) t.fail(`add ${file} to DENIED_MENTIONS`);
      for (const m of mentions ?? []) t.ok(decision.refuse.includes(m), `message mentions ${m}`);
      return;
    }

    const ops = decision.inject ? buildInjectionPatch(raw as unknown as JsonObject, decision.plan) : [];
    const injected = jsonpatch.applyPatch(structuredClone(raw), structuredClone(ops) as jsonpatch.Operation[], true, false).newDocument;
    goldens.check(t, `${file}.patch`, `${JSON.stringify(ops, null, 2)}\n`);
    goldens.check(t, `${file}.injected`, `${JSON.stringify(injected, null, 2)}\n`);

    t.equal(response.allowed, true);
    if (ops.length === 0) {
      t.equal(response.patch, undefined, "no patch is sent for an unchanged pod");
    } else {
      t.equal(response.patchType, "JSONPatch");
      t.same(JSON.parse(Buffer.from(response.patch ?? "", "base64").toString("utf8")), ops, "the HTTPS answer carries the same patch");
    }

    if (!decision.inject) {
      t.equal(decision.reason, UNCHANGED[file], `unchanged because ${String(UNCHANGED[file])}`);
      t.same(ops, [], "no operations");
      t.same(injected, raw);
      return;
    }
    const expect = INJECTED[file];
    if (expect === undefined) {
      t.fail(`add ${file} to INJECTED`);
      return;
    }
    t.test("field by field", async (t) => checkInjected(t, raw, injected, ops, config, expect));
    t.test("idempotency: the injected pod gives no operations", async (t) => {
      const again = decideInjection(injected as unknown as JsonObject, config, namespace === undefined ? {} : { namespace });
      t.same(again, { inject: false, reason: "already-injected" });
      const review = reviewPodAdmission(reviewFor(injected, { namespace }), config);
      t.equal(review.review.response.allowed, true);
      t.equal(review.review.response.patch, undefined);
    });
  });
});

t.test("every case has an expectation, and every expectation a case", async (t) => {
  for (const table of [INJECTED, UNCHANGED, DENIED_MENTIONS, OVERRIDES]) {
    for (const name of Object.keys(table)) t.ok(inputs.includes(name), `${name} exists in testdata/inject`);
  }
});

// Runs last: subtests run in order.
t.test("no stale golden files", async (t) => goldens.checkStale(t));

function checkInjected(t: Tap, input: Pod, output: Pod, ops: readonly { op: string; path: string }[], config: InjectorConfig, expect: { apps: string[]; ring?: string; tokenVolume?: string }): void {
  const ann: Record<string, string> = input.metadata?.annotations ?? {};
  const spec = output.spec;

  // The native sidecar, last among the init containers.
  const inits = spec.initContainers ?? [];
  t.same(inits.slice(0, -1), input.spec.initContainers ?? [], "existing init containers unchanged and still first");
  const sc = inits[inits.length - 1] ?? { name: "(none)" };
  t.match(
    sc,
    {
      name: "shardcar-proxy",
      restartPolicy: "Always",
      image: config.image,
      imagePullPolicy: config.imagePullPolicy,
      startupProbe: { httpGet: { path: "/readyz", port: config.adminPort, scheme: "HTTP" } },
      resources: { requests: { cpu: String, memory: String }, limits: { memory: String } },
      securityContext: { runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
    },
    "a native sidecar with a startupProbe, resources and a locked-down securityContext",
  );
  t.same(sc["ports"], [{ name: "shardcar-admin", containerPort: config.adminPort, protocol: "TCP" }]);
  t.same(sc.env, [
    { name: "POD_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } } },
    { name: "POD_NAMESPACE", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } } },
    ...SIDECAR_ENV,
  ]);
  const kubeconfig = ann["shardcar.io/kubeconfig"] === "true";
  const shards = ann["shardcar.io/shards"] ?? "ring";
  const grace = (input.spec as { terminationGracePeriodSeconds?: number }).terminationGracePeriodSeconds;
  t.same(
    sc["args"],
    [
      "proxy", "--injected",
      "--listen", `127.0.0.1:${config.proxyPort}`,
      "--admin-listen", `0.0.0.0:${config.adminPort}`,
      "--resources", (ann["shardcar.io/resources"] ?? "").split(",").map((s) => s.trim()).join(","),
      "--shards", shards,
      ...(expect.ring === undefined ? [] : ["--ring", expect.ring]),
      // Past resources and shards, only what differs from the proxy's defaults.
      ...(ann["shardcar.io/filter"] === "labels" ? ["--filter", "labels"] : []),
      ...(ann["shardcar.io/fallback"] === "fail" ? ["--fallback", "fail"] : []),
      ...(ann["shardcar.io/handoff"] === "exclusive" ? ["--handoff", "exclusive"] : []),
      ...(ann["shardcar.io/synthetic-deletes"] === "false" ? ["--synthetic-deletes", "false"] : []),
      ...(ann["shardcar.io/leader-election"] === undefined ? [] : ["--leader-election", ann["shardcar.io/leader-election"]]),
      ...(kubeconfig ? ["--write-kubeconfig"] : []),
      // A ring member's drain ends 5 s before a grace period other than the default 30 s.
      ...(shards === "ring" && grace !== undefined && grace !== 30 ? ["--leave-timeout", `${Math.max(1, grace - 5)}s`] : []),
      "--sa-dir", "/var/run/shardcar/serviceaccount",
    ],
    "sidecar args in the documented form",
  );
  t.same(
    sc.volumeMounts,
    [
      { name: "shardcar-serviceaccount", mountPath: "/var/run/shardcar/serviceaccount" },
      ...(expect.tokenVolume === undefined ? [] : [{ name: expect.tokenVolume, mountPath: SA, readOnly: true }]),
    ],
    expect.tokenVolume === undefined ? "the sidecar's token is left to automount" : `the sidecar mounts the app's own token volume ${expect.tokenVolume}`,
  );

  // The emptyDir, after every existing volume.
  const volumes = spec.volumes ?? [];
  t.same(volumes.slice(0, -1), input.spec.volumes ?? [], "existing volumes unchanged");
  t.same(volumes[volumes.length - 1], { name: "shardcar-serviceaccount", emptyDir: { medium: "Memory", sizeLimit: "1Mi" } });

  // App containers rewired; everything else in them, and every other container, untouched.
  const wired = new Set(["KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECONFIG"]);
  t.equal(spec.containers.length, input.spec.containers.length);
  spec.containers.forEach((c, i) => {
    const orig = input.spec.containers[i] ?? { name: "(missing)" };
    t.equal(c.name, orig.name, "container order kept");
    if (!expect.apps.includes(c.name)) {
      t.same(c, orig, `${c.name} is not an app container and is untouched`);
      return;
    }
    const env = c.env ?? [];
    t.same(env.filter((e) => e.name === "KUBERNETES_SERVICE_HOST"), [{ name: "KUBERNETES_SERVICE_HOST", value: "127.0.0.1" }], `${c.name}: host is loopback, once`);
    t.same(env.filter((e) => e.name === "KUBERNETES_SERVICE_PORT"), [{ name: "KUBERNETES_SERVICE_PORT", value: String(config.proxyPort) }], `${c.name}: port is the proxy's, once`);
    t.same(
      env.filter((e) => e.name === "KUBECONFIG"),
      kubeconfig ? [{ name: "KUBECONFIG", value: `${SA}/kubeconfig` }] : [],
      `${c.name}: KUBECONFIG ${kubeconfig ? "set" : "absent"}`,
    );
    t.same(env.filter((e) => !wired.has(e.name)), (orig.env ?? []).filter((e) => !wired.has(e.name)), `${c.name}: other env kept in order`);
    const mounts = c.volumeMounts ?? [];
    t.same(mounts.filter((m) => m.mountPath === SA), [{ name: "shardcar-serviceaccount", mountPath: SA, readOnly: true }], `${c.name}: the SA path is the emptyDir, once`);
    t.same(mounts.filter((m) => m.mountPath !== SA), (orig.volumeMounts ?? []).filter((m) => m.mountPath !== SA), `${c.name}: other mounts kept in order`);
    // A ring member's controller asks the sidecar to hand its slots on before
    // the kubelet stops it; a preStop of the container's own is kept as it is.
    const own = (orig as { lifecycle?: { preStop?: unknown } }).lifecycle?.preStop;
    const got = (c as { lifecycle?: { preStop?: unknown } }).lifecycle?.preStop;
    if (own !== undefined) t.same(got, own, `${c.name}: its own preStop is kept`);
    else if (shards === "ring") t.same(got, { httpGet: { path: "/shardcar/prestop", port: config.adminPort, scheme: config.sidecarMetricsAuth ? "HTTPS" : "HTTP" } }, `${c.name}: a ring member's controller steps the sidecar aside before it stops`);
    else t.equal(got, undefined, `${c.name}: no preStop outside a ring`);
    const rest = (x: Container): Container => {
      const { lifecycle, ...others } = x as Container & { lifecycle?: { preStop?: unknown } };
      const keep = lifecycle === undefined ? undefined : { ...lifecycle, preStop: undefined };
      return { ...others, env: undefined, volumeMounts: undefined, ...(keep === undefined || Object.values(keep).every((v) => v === undefined) ? {} : { lifecycle: keep }) };
    };
    t.same(rest(c), rest(orig), `${c.name}: no other field changed`);
  });

  const status = JSON.parse(output.metadata?.annotations?.["shardcar.io/status"] ?? "{}") as { containers?: string[]; image?: string };
  t.same(status.containers, expect.apps, "status records the rewired containers");
  t.equal(status.image, config.image);

  // Nothing else anywhere changed.
  const strip = (p: Pod): Pod => {
    const c = structuredClone(p);
    if (c.metadata?.annotations) delete c.metadata.annotations["shardcar.io/status"];
    delete c.spec.volumes;
    delete c.spec.initContainers;
    c.spec.containers = [];
    return c;
  };
  t.same(strip(output), strip(input), "no field outside the injected ones changed");
  t.notOk(ops.some((o) => o.path.startsWith("/metadata/managedFields")), "managedFields are never patched");
  t.same(
    ops.filter((o) => o.op === "remove").map((o) => o.path.replace(/\d+/g, "N")),
    ops.filter((o) => o.op === "remove" && /\/env\/\d+\/valueFrom$/.test(o.path)).map((o) => o.path.replace(/\d+/g, "N")),
    "the only removals replace an env valueFrom with a value",
  );
}
