/** The sidecar's half of in-pod transparency (src/proxy/injected/): the shared service-account files, the pod-local CA and the serving certificate. */
import t from "tap";
import { X509Certificate } from "node:crypto";
import { mkdir, mkdtemp, readFile, readdir, rename, rm, stat, symlink, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, createServer, type TLSSocket } from "node:tls";
import type { AddressInfo } from "node:net";
import { createServer as createHttpsServer } from "node:https";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { silentLogger } from "../../../src/log.ts";
import { startInjectedMode, type InjectedMode, type InjectedModeOptions } from "../../../src/proxy/injected/mode.ts";
import { POD_TLS_DIR } from "../../../src/proxy/injected/pod-tls.ts";
import { createLocalCa } from "../../../src/pki/ca.ts";
import { isSignedBy, splitPemBundle } from "../../../src/pki/inspect.ts";
import { until } from "../../support/wait.ts";

const CLUSTER_CA = (await createLocalCa("kubernetes", new Date(), 3600_000)).certPem;

/**
 * Lays out a service-account directory the way the kubelet's atomic writer
 * does: files are symlinks into `..data`, itself a symlink to a timestamped
 * directory that is swapped on every update.
 */
class FakeKubeletVolume {
  readonly dir: string;
  #generation = 0;
  constructor(dir: string) {
    this.dir = dir;
  }
  async write(files: Record<string, string>): Promise<void> {
    const gen = `..2026_11_30_00_00_00.${++this.#generation}`;
    await mkdir(join(this.dir, gen), { recursive: true });
    for (const [name, content] of Object.entries(files)) await writeFile(join(this.dir, gen, name), content);
    await symlink(gen, join(this.dir, "..data_tmp"));
    await rename(join(this.dir, "..data_tmp"), join(this.dir, "..data"));
    for (const name of Object.keys(files)) {
      await symlink(join("..data", name), join(this.dir, name)).catch((e: unknown) => {
        if (!(e instanceof Error && "code" in e && e.code === "EEXIST")) throw e;
      });
    }
  }
}

interface Fixture {
  real: FakeKubeletVolume;
  shared: string;
  start(over?: Partial<InjectedModeOptions>): Promise<InjectedMode>;
}

async function fixture(t: { teardown(fn: () => unknown): void }, opts: { writeReal?: boolean } = {}): Promise<Fixture & { root: string }> {
  const root = await mkdtemp(join(tmpdir(), "shardcar-injected-"));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const real = new FakeKubeletVolume(join(root, "real"));
  await mkdir(real.dir);
  // Laid out where an app container sees it, so loadFromCluster(root) reads it.
  const shared = join(root, "var/run/secrets/kubernetes.io/serviceaccount");
  await mkdir(shared, { recursive: true });
  if (opts.writeReal ?? true) await real.write({ token: "token-1", namespace: "controllers", "ca.crt": CLUSTER_CA });
  return {
    root,
    real,
    shared,
    async start(over = {}) {
      const ac = new AbortController();
      const mode = await startInjectedMode({
        realServiceAccountDir: real.dir,
        sharedDir: shared,
        listenHost: "127.0.0.1",
        listenPort: 7443,
        writeKubeconfig: false,
        pollIntervalMs: 20,
        logger: silentLogger(),
        signal: ac.signal,
        ...over,
      });
      t.teardown(async () => {
        ac.abort();
        await mode.close();
      });
      return mode;
    },
  };
}


const read = (dir: string, f: string): Promise<string> => readFile(join(dir, f), "utf8");

t.test("writes token, namespace and ca.crt into the shared dir and is ready once they exist", async (t) => {
  const f = await fixture(t);
  const mode = await f.start();
  t.equal(mode.ready, true);
  t.equal(await read(f.shared, "token"), "token-1");
  t.equal(await read(f.shared, "namespace"), "controllers");
  t.ok((await read(f.shared, "ca.crt")).includes(CLUSTER_CA.trim()));
  t.same((await readdir(f.shared)).sort(), [POD_TLS_DIR, "ca.crt", "namespace", "token"], "no kubeconfig unless asked, no temporary files left");
  t.equal((await stat(join(f.shared, "token"))).mode & 0o777, 0o644, "readable by an app running as another user");
});

t.test("is not ready while the real service-account files are missing, and becomes ready when they appear", async (t) => {
  const f = await fixture(t, { writeReal: false });
  const mode = await f.start();
  t.equal(mode.ready, false);
  t.same((await readdir(f.shared)).filter((n) => n !== POD_TLS_DIR), [], "nothing for the apps written without a real token");
  await f.real.write({ token: "late-token", namespace: "controllers" });
  await new Promise((r) => setTimeout(r, 100));
  t.equal(mode.ready, false, "still not ready without the cluster ca.crt");
  await f.real.write({ token: "late-token", namespace: "controllers", "ca.crt": CLUSTER_CA });
  await until("ready", () => mode.ready);
  t.equal(await read(f.shared, "token"), "late-token");
});

t.test("ca.crt holds the pod CA first and the cluster CA second", async (t) => {
  const f = await fixture(t);
  const mode = await f.start();
  const certs = splitPemBundle(await read(f.shared, "ca.crt"));
  t.equal(certs.length, 2);
  const [podCa = "", clusterCa = ""] = certs;
  t.equal(new X509Certificate(podCa).fingerprint256, new X509Certificate(mode.caCert).fingerprint256, "first is the pod CA");
  t.equal(new X509Certificate(clusterCa).fingerprint256, new X509Certificate(CLUSTER_CA).fingerprint256, "second is the cluster CA");
  t.ok(new X509Certificate(podCa).ca, "the pod CA is a CA");
  t.ok(isSignedBy(mode.tls.cert, podCa), "the serving certificate is signed by the pod CA");
  t.notOk(isSignedBy(mode.tls.cert, clusterCa), "and not by the cluster CA");
});

t.test("the serving certificate passes TLS verification for 127.0.0.1 and localhost against ca.crt alone", async (t) => {
  const f = await fixture(t);
  const mode = await f.start();
  const bundle = await read(f.shared, "ca.crt");
  const server = createServer({ key: mode.tls.key, cert: mode.tls.cert }, (s) => s.end("hello"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.address() as AddressInfo).port;
  const handshake = (servername?: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const s: TLSSocket = connect({ host: "127.0.0.1", port, ca: bundle, ...(servername === undefined ? {} : { servername }) }, () => {
        s.setEncoding("utf8");
        let data = "";
        s.on("data", (d: string) => (data += d)).on("end", () => resolve(data));
      });
      s.on("error", reject);
    });
  t.equal(await handshake(), "hello", "verified as 127.0.0.1 (IP SAN)");
  t.equal(await handshake("localhost"), "hello", "verified as localhost (DNS SAN)");
  await t.rejects(handshake("kubernetes.default.svc"), /does not match|altnames/i, "any other name is refused");
});

t.test("picks up a rotated token by polling, and replaces the file rather than rewriting it", async (t) => {
  const f = await fixture(t);
  await f.start();
  const before = await stat(join(f.shared, "token"));
  await f.real.write({ token: "token-2", namespace: "controllers", "ca.crt": CLUSTER_CA });
  await until("rotated token", async () => (await read(f.shared, "token")) === "token-2");
  const after = await stat(join(f.shared, "token"));
  // A new inode means the new content arrived by rename(2), which readers
  // observe atomically; an in-place write would keep the inode and expose a
  // truncated file for a moment.
  t.not(after.ino, before.ino, "a new file was renamed into place");
  t.same((await readdir(f.shared)).filter((n) => n.endsWith(".tmp")), [], "no temporary files left");
});

t.test("a reader never sees a partial or empty token while tokens rotate", async (t) => {
  const f = await fixture(t);
  await f.start({ pollIntervalMs: 1 });
  const tokens = Array.from({ length: 30 }, (_, i) => `token-${i}-${"x".repeat(200_000)}`);
  const valid = new Set(["token-1", ...tokens]);
  let stop = false;
  let reads = 0;
  const bad: string[] = [];
  const reader = (async () => {
    while (!stop) {
      const v = await read(f.shared, "token");
      reads++;
      if (!valid.has(v)) bad.push(`${v.length} bytes`);
    }
  })();
  for (const token of tokens) {
    await f.real.write({ token, namespace: "controllers", "ca.crt": CLUSTER_CA });
    await until("token written", async () => (await read(f.shared, "token")) === token);
  }
  stop = true;
  await reader;
  t.ok(reads > tokens.length, `reader ran (${reads} reads)`);
  t.same(bad, [], "every read returned a whole token");
});

t.test("a refreshed cluster CA is picked up into ca.crt", async (t) => {
  const f = await fixture(t);
  const mode = await f.start();
  const newCa = (await createLocalCa("kubernetes-2", new Date(), 3600_000)).certPem;
  await f.real.write({ token: "token-1", namespace: "controllers", "ca.crt": newCa });
  await until("new cluster CA", async () => (await read(f.shared, "ca.crt")).includes(newCa.trim()));
  const certs = splitPemBundle(await read(f.shared, "ca.crt"));
  t.equal(certs.length, 2);
  t.equal(new X509Certificate(certs[0] ?? "").fingerprint256, new X509Certificate(mode.caCert).fingerprint256, "the pod CA stays first");
});

t.test("a shared file deleted under the sidecar is written again", async (t) => {
  const f = await fixture(t);
  await f.start();
  await unlink(join(f.shared, "namespace"));
  await until("namespace restored", async () => (await read(f.shared, "namespace").catch(() => "")) === "controllers");
  t.equal(await read(f.shared, "namespace"), "controllers", "written again, with its content");
});

t.test("writes a kubeconfig only when asked, pointing at the proxy with app-side paths and a token file", async (t) => {
  const f = await fixture(t);
  const mode = await f.start({ writeKubeconfig: true, listenPort: 7555 });
  t.equal(mode.ready, true);
  const text = await read(f.shared, "kubeconfig");
  const kc = new KubeConfig();
  kc.loadFromString(text);
  t.equal(kc.getCurrentCluster()?.server, "https://127.0.0.1:7555");
  t.equal(kc.getCurrentCluster()?.caFile, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
  t.equal(kc.getContextObject(kc.getCurrentContext())?.namespace, "controllers");
  t.match(text, /tokenFile: "\/var\/run\/secrets\/kubernetes.io\/serviceaccount\/token"/, "client-go re-reads a tokenFile after rotation");
  t.notMatch(text, /token-1/, "the token itself is never inlined");
});

t.test("a restarted sidecar serves the pod CA and certificate of its first start, so clients that loaded ca.crt keep verifying it", async (t) => {
  const f = await fixture(t);
  const first = await f.start();
  const appCa = await read(f.shared, "ca.crt");
  await first.close();
  const second = await f.start();
  t.equal(second.caCert, first.caCert, "the same pod CA");
  t.equal(second.tls.cert, first.tls.cert, "the same serving certificate");
  t.equal(second.tls.key, first.tls.key, "and key");
  t.equal(await read(f.shared, "ca.crt"), appCa, "ca.crt is unchanged");
  const state = join(f.shared, POD_TLS_DIR);
  t.equal((await stat(state)).mode & 0o777, 0o700, "the state directory is the sidecar's alone");
  t.equal((await stat(join(state, "tls.key"))).mode & 0o777, 0o600, "and so is the key");
  t.same((await readdir(state)).sort(), ["ca.crt", "tls.crt", "tls.key"], "no CA key is ever stored, no temporary files left");
});

t.test("stored pod TLS state that does not verify is replaced by a fresh CA, and ca.crt follows it", async (t) => {
  const f = await fixture(t);
  const first = await f.start();
  await first.close();
  const other = await (await createLocalCa("someone else", new Date(), 3600_000)).issue({ commonName: "x", names: ["127.0.0.1", "localhost"], now: new Date(), validityMs: 3600_000 });
  await writeFile(join(f.shared, POD_TLS_DIR, "tls.key"), other.key);
  const second = await f.start();
  t.not(second.caCert, first.caCert, "a new pod CA");
  t.ok(isSignedBy(second.tls.cert, second.caCert), "whose certificate it serves");
  t.equal(splitPemBundle(await read(f.shared, "ca.crt"))[0], second.caCert, "and ca.crt names it");
  const third = await f.start();
  t.equal(third.caCert, second.caCert, "which the next start keeps");
});

t.test("close is idempotent and stops polling; an aborted signal closes too", async (t) => {
  const f = await fixture(t);
  const ac = new AbortController();
  const mode = await startInjectedMode({
    realServiceAccountDir: f.real.dir,
    sharedDir: f.shared,
    listenHost: "127.0.0.1",
    listenPort: 7443,
    writeKubeconfig: false,
    pollIntervalMs: 10,
    logger: silentLogger(),
    signal: ac.signal,
  });
  ac.abort();
  await Promise.all([mode.close(), mode.close()]);
  await f.real.write({ token: "after-close", namespace: "controllers", "ca.crt": CLUSTER_CA });
  await new Promise((r) => setTimeout(r, 100));
  t.equal(await read(f.shared, "token"), "token-1", "no sync after close");
});

t.test("an unmodified client-node client using loadFromCluster verifies the sidecar's TLS and sends the token from the shared dir", async (t) => {
  const f = await fixture(t);
  const mode = await f.start();
  // Stands in for the proxy: serves the sidecar's certificate and records
  // what the client sent.
  const seen: string[] = [];
  const server = createHttpsServer({ key: mode.tls.key, cert: mode.tls.cert }, (req, res) => {
    seen.push(`${req.url ?? ""} ${req.headers.authorization ?? ""}`);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ kind: "PodList", apiVersion: "v1", metadata: { resourceVersion: "1" }, items: [] }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  // What the webhook sets in the app container; loadFromCluster reads them from process.env.
  const saved = { host: process.env["KUBERNETES_SERVICE_HOST"], port: process.env["KUBERNETES_SERVICE_PORT"] };
  process.env["KUBERNETES_SERVICE_HOST"] = "127.0.0.1";
  process.env["KUBERNETES_SERVICE_PORT"] = String((server.address() as AddressInfo).port);
  t.teardown(() => {
    for (const [k, v] of [["KUBERNETES_SERVICE_HOST", saved.host], ["KUBERNETES_SERVICE_PORT", saved.port]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
  const list = async (): Promise<void> => {
    const kc = new KubeConfig();
    kc.loadFromCluster(f.root);
    t.equal(kc.getCurrentCluster()?.skipTLSVerify, false, "TLS verification on");
    t.equal(kc.getContextObject(kc.getCurrentContext())?.namespace, "controllers");
    await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: "controllers" });
  };
  await list();
  t.same(seen, ["/api/v1/namespaces/controllers/pods Bearer token-1"]);
  await f.real.write({ token: "token-2", namespace: "controllers", "ca.crt": CLUSTER_CA });
  await until("rotated token", async () => (await read(f.shared, "token")) === "token-2");
  // client-node re-reads a token file at most once a minute (FileAuth), so a
  // new client shows the rotated token without waiting for that.
  await list();
  t.equal(seen[1], "/api/v1/namespaces/controllers/pods Bearer token-2");
});
