/**
 * Issue 15 §2: the mutated pod run as a pod. A controller pod is created
 * through the apiserver (the manager's webhook injects it), and the Pod the
 * apiserver stored is run as is on the one-pod kubelet
 * (test/support/kubelet/): the native sidecar first, gated by its
 * startupProbe, then two unmodified controllers on in-cluster configuration,
 * a client-node informer and a client-go one, each reading the service-account
 * files the sidecar writes into the emptyDir mounted over their
 * service-account directory. Their caches must be exactly their shard, over
 * TLS verified against the pod-local CA, through a token rotation and a
 * sidecar crash.
 */
import t from "tap";
import { connect as tlsConnect } from "node:tls";
import type { V1Pod } from "@kubernetes/client-node";
import { shardRange } from "../../src/shard/range.ts";
import { buildClientGoController } from "../support/client-go-controller.ts";
import { runPod, type ImageSpec, type RunningPod } from "../support/kubelet/pod.ts";
import { SERVICE_ACCOUNT_PATH } from "../support/service-account-admission.ts";
import { AdmissionRig, ROOT, apiReader, rigUnavailable, createPod, ensureNamespace } from "./support/admission.ts";
import { laneGate, serviceAccountToken } from "./support/private-realapi.ts";
import { call, eventually, expectedShard, inParallel, setDiff, setsEqual } from "./support/realapi.ts";

const NS = "team-ctrl";
const MINE = [shardRange(1, 3)];
const APP_UID = 65534;

const built = await buildClientGoController();
const skip = rigUnavailable() ?? (built.ok ? false : `client-go controller not built: ${built.reason}`);

const controllerImage = (entrypoint: string[], files: Record<string, string>): ImageSpec => ({
  entrypoint,
  cmd: [],
  env: { PATH: "/usr/local/bin:/usr/bin:/bin" },
  workingDir: "/",
  user: { uid: APP_UID, gid: APP_UID },
  files,
});

t.test(`gate ${laneGate()}: the injected pod, run as stored, gives unmodified in-cluster controllers exactly their shard`, { skip }, async (t) => {
  const tokens = [serviceAccountToken(NS, "controller"), serviceAccountToken(NS, "controller")] as const;
  const rig = await AdmissionRig.start({ mode: "self", tokens });
  t.teardown(() => rig.close());
  await rig.startManager();
  const api = rig.api.admin;
  await ensureNamespace(rig.api, NS);

  // The data set: pods nobody opted in (the webhook must not see them).
  const before = await rig.reviews();
  const seeds = Array.from({ length: 150 }, (_, i) => rig.pod(["alpha", "beta", NS][i % 3] ?? NS, `seed-${i}`));
  for (const n of ["alpha", "beta"]) await ensureNamespace(rig.api, n);
  await inParallel(seeds, 8, async (p) => {
    const r = await createPod(api, p);
    if (r.status !== 201) throw new Error(`seeding: ${r.status} ${r.body.toString("utf8")}`);
  });
  t.equal((await rig.reviews()).get("total"), before.get("total"), "seeding 150 pods sent none of them to the webhook");

  const securityContext = { runAsNonRoot: true, runAsUser: APP_UID, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } };
  const sent = rig.pod(NS, "controller", {
    label: true,
    spec: {
      containers: [
        { name: "client-node", image: "example.test/client-node-controller:1", args: ["--listen", "127.0.0.1:8081"], securityContext },
        { name: "client-go", image: "example.test/client-go-controller:1", args: ["--listen", "127.0.0.1:8082"], securityContext },
      ],
    },
  });
  const reply = await createPod(api, sent);
  t.equal(reply.status, 201, "the controller pod is admitted");
  const stored = JSON.parse(reply.body.toString("utf8")) as V1Pod;
  t.ok(stored.spec?.initContainers?.some((c) => c.name === "shardcar-proxy"), "and injected");

  const images = rig.images({
    "example.test/client-node-controller:1": controllerImage([process.execPath, "/app/test/support/client-node/main.ts"], { "/app": ROOT }),
    "example.test/client-go-controller:1": controllerImage(["/controller/client-go-controller"], { "/controller/client-go-controller": built.ok ? built.binary : "" }),
  });
  const pod: RunningPod = await runPod(stored, { images, apiserverPort: rig.api.port, read: apiReader(api), token: tokens[0].token, restartBackoffMs: 500, initTimeoutMs: 40_000 });
  t.teardown(() => pod.stop());
  const logs = (): string => ["shardcar-proxy", "client-node", "client-go"].map((c) => `--- ${c}:\n${pod.logs(c).slice(-3000)}`).join("\n");

  await t.test("the native sidecar starts first, and the apps only after its startupProbe passed", async (t) => {
    await pod.waitFor("both apps run", () => pod.state("client-node").running && pod.state("client-go").running, 60_000);
    const at = (c: string, e: string): number => pod.timeline.find((x) => x.container === c && x.event === e)?.at ?? Number.NaN;
    t.ok(pod.timeline.some((e) => e.container === "shardcar-proxy" && e.event === "probe-failed" && (e.detail ?? "").startsWith("startup")), "the startupProbe was really probed (and failed before the proxy listened)");
    t.ok(at("shardcar-proxy", "started") <= at("client-node", "start") && at("shardcar-proxy", "started") <= at("client-go", "start"), `the apps started after the sidecar's startupProbe passed (${at("shardcar-proxy", "started")} ms ≤ ${at("client-node", "start")}, ${at("client-go", "start")} ms)`);
  });

  await t.test("env, args and mounts are what the spec says, and readOnly holds", async (t) => {
    const env = async (c: string): Promise<Record<string, string>> =>
      Object.fromEntries((await pod.exec(c, ["/usr/bin/env"])).stdout.split("\n").filter((l) => l.includes("=")).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
    const sidecarEnv = await env("shardcar-proxy");
    t.match(sidecarEnv, { POD_NAME: stored.metadata?.name, POD_NAMESPACE: NS, KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: String(rig.api.port) }, "the sidecar gets the downward API and the real apiserver");
    for (const app of ["client-node", "client-go"]) {
      t.match(await env(app), { KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: "7443" }, `${app} is pointed at the loopback proxy`);
      const id = await pod.exec(app, ["/usr/bin/id", "-u"]);
      t.equal(id.stdout.trim(), String(APP_UID), `${app} runs as its own user`);
      const token = await pod.exec(app, ["/bin/cat", `${SERVICE_ACCOUNT_PATH}/token`]);
      t.equal(token.stdout, tokens[0].token, `${app} reads the pod's token at the service-account path (as uid ${APP_UID}) ${token.stderr}`);
      const ns = await pod.exec(app, ["/bin/cat", `${SERVICE_ACCOUNT_PATH}/namespace`]);
      t.equal(ns.stdout.trim(), NS, `${app} reads the namespace ${ns.stderr}`);
      const write = await pod.exec(app, ["/bin/sh", "-c", `echo x > ${SERVICE_ACCOUNT_PATH}/token`]);
      t.not(write.code, 0, `${app} cannot write its service-account files`);
      t.match(write.stderr, "Read-only file system", `${app}: the mount is read-only`);
      const root = await pod.exec(app, ["/bin/sh", "-c", "echo x > /tmp/x"]);
      t.match(root.stderr, "Read-only file system", `${app}: readOnlyRootFilesystem holds`);
    }
    const real = await pod.exec("shardcar-proxy", ["/bin/sh", "-c", `echo x > ${SERVICE_ACCOUNT_PATH}/token`]);
    t.match(real.stderr, "Read-only file system", "the sidecar's real token mount is read-only");
    t.equal(pod.readFile("shardcar-proxy", `${SERVICE_ACCOUNT_PATH}/ca.crt`), rig.api.caPem, "the sidecar's real ca.crt is the cluster's (kube-root-ca.crt)");
  });

  const cacheOf = async (port: number): Promise<Set<string>> => {
    const r = await call({ url: `http://127.0.0.1:${port}` }, "/objects");
    const body = JSON.parse(r.body.toString("utf8")) as { items: Array<{ key: string; uid: string }> };
    return new Set(body.items.map((o) => `${o.key}@${o.uid}`));
  };
  const want = (): Promise<Set<string>> => expectedShard(api, "/api/v1/pods", MINE, "uid");
  const ports = { "client-node": await pod.forward(8081), "client-go": await pod.forward(8082) };
  const exact = async (t: Test, what: string, timeoutMs = 30_000): Promise<void> => {
    for (const [app, port] of Object.entries(ports)) {
      let w = await want();
      await eventually(async () => {
        w = await want();
        return setsEqual(await cacheOf(port).catch(() => new Set<string>()), w);
      }, timeoutMs, 250);
      const got = await cacheOf(port).catch(() => new Set<string>());
      t.same(setDiff(got, w), { missing: [], extra: [] }, `${app}: ${what} (${w.size} pods of the shard)`);
      if (!setsEqual(got, w)) t.comment(logs());
    }
  };
  type Test = typeof t;

  const churn = async (tag: string): Promise<void> => {
    const pods = Array.from({ length: 12 }, (_, i) => rig.pod(i % 2 === 0 ? "alpha" : "beta", `${tag}-${i}`));
    await inParallel(pods, 4, (p) => createPod(api, p));
    for (const p of pods.slice(0, 4)) {
      const md = p["metadata"] as { name: string; namespace: string };
      await call(api, `/api/v1/namespaces/${md.namespace}/pods/${md.name}`, { method: "DELETE" });
    }
  };

  await t.test("both controllers cache exactly their shard, over TLS verified against the pod-local CA", async (t) => {
    await exact(t, "the cache is exactly shard 1/3");
    await churn("after-sync");
    await exact(t, "still exact after pods came and went");
    const appCa = pod.readFile("client-go", `${SERVICE_ACCOUNT_PATH}/ca.crt`);
    const proxyPort = await pod.forward(7443);
    const handshake = (ca: string): Promise<string> =>
      new Promise((resolve) => {
        const s = tlsConnect({ host: "127.0.0.1", port: proxyPort, ca, servername: "localhost" }, () => {
          s.destroy();
          resolve("verified");
        });
        s.once("error", (e) => resolve(e.message));
      });
    t.equal(await handshake(appCa), "verified", "the proxy's certificate verifies against the app's ca.crt (what both controllers verify with)");
    t.not(await handshake(rig.api.caPem), "verified", "and not against the cluster CA alone: the pod-local CA in the emptyDir is what makes it verify");
  });

  await t.test("a rotated token reaches the apps, and the caches stay exact", async (t) => {
    await pod.rotateToken(tokens[1].token);
    const rotated = await eventually(() => pod.readFile("client-node", `${SERVICE_ACCOUNT_PATH}/token`) === tokens[1].token, 10_000);
    t.ok(rotated, "the app's token file holds the new token");
    const viaExec = await pod.exec("client-go", ["/bin/cat", `${SERVICE_ACCOUNT_PATH}/token`]);
    t.equal(viaExec.stdout, tokens[1].token, "read as the app's user too");
    await churn("after-rotation");
    await exact(t, "exact after the rotation");
  });

  await t.test("after the sidecar crashes and the kubelet restarts it, the caches are exact again", async (t) => {
    const crashed = pod.crash("shardcar-proxy");
    await pod.waitFor("the sidecar is restarted and started", () => pod.state("shardcar-proxy").restarts === 1 && pod.state("shardcar-proxy").started && pod.state("shardcar-proxy").pid !== crashed, 60_000);
    t.equal(pod.state("client-node").restarts + pod.state("client-go").restarts, 0, "the apps were not restarted");
    await churn("after-crash");
    await exact(t, "exact again after the sidecar restart", 60_000);
  });
});
