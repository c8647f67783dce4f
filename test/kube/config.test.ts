/**
 * The one kubeconfig loader (src/kube/config.ts): which configuration the
 * rule picks (--kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config, as
 * controller-runtime's GetConfig), and reading it without client-node: the
 * same server, CA and credentials client-node would use, relative paths from
 * the file's directory, files merged as client-go merges them, refusals for
 * skip-verify, and a clear hand-off to client-node for credentials only it
 * can produce.
 */
import t, { type Test } from "tap";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { chooseKubeSource, connectionFor, inClusterConnection, inClusterServer, loadKubeAccess, readKubeconfig } from "../../src/kube/config.ts";

const CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const b64 = (s: string): string => Buffer.from(s).toString("base64");

function dir(t: Test): string {
  const d = mkdtempSync(join(tmpdir(), "shardcar-kubeconfig-"));
  t.teardown(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

function yaml(cluster: string, user: string, current = "ctx"): string {
  return `apiVersion: v1
kind: Config
current-context: ${current}
contexts:
- name: other
  context: {cluster: nope, user: nope}
- name: ctx
  context:
    cluster: c1
    user: u1
    namespace: team-a
clusters:
- name: c1
  cluster:
${cluster}
users:
- name: u1
  user:
${user}
`;
}

t.test("YAML: server, CA file relative to the kubeconfig, token file relative too — as client-node reads them", async (t) => {
  const d = dir(t);
  mkdirSync(join(d, "sub"));
  writeFileSync(join(d, "sub", "ca.pem"), CA);
  writeFileSync(join(d, "sub", "token"), "tok\n");
  const path = join(d, "config");
  writeFileSync(path, yaml("    server: https://api.example.com:6443/\n    certificate-authority: sub/ca.pem\n    tls-server-name: kubernetes", "    tokenFile: sub/token"));
  const f = await readKubeconfig(path);
  t.equal(f.cluster.server, "https://api.example.com:6443", "trailing slash dropped, as client-node does");
  t.equal(f.cluster.ca, CA);
  t.equal(f.needsClientNode, undefined);
  t.same(f.connection, { server: "https://api.example.com:6443", ca: CA, tlsServerName: "kubernetes", clientCert: undefined, token: undefined, tokenFile: join(d, "sub", "token"), flag: "--kubeconfig" });

  const kc = new KubeConfig();
  kc.loadFromFile(path);
  t.equal(kc.getCurrentCluster()?.server, f.cluster.server, "client-node agrees on the server");
  t.equal(kc.getCurrentCluster()?.caFile, join(d, "sub", "ca.pem"), "and on the CA file");
});

t.test("inline data and a static token; client certificates from data or files", async (t) => {
  const d = dir(t);
  const path = join(d, "config");
  writeFileSync(path, yaml(`    server: https://10.0.0.1\n    certificate-authority-data: ${b64(CA)}`, `    token: abc\n    client-certificate-data: ${b64("CERT")}\n    client-key-data: ${b64("KEY")}`));
  const f = await readKubeconfig(path);
  t.equal(f.cluster.ca, CA);
  t.equal(f.connection?.token, "abc");
  t.same(f.connection?.clientCert, { cert: "CERT", key: "KEY" });

  writeFileSync(join(d, "c.crt"), "CERT2");
  writeFileSync(join(d, "c.key"), "KEY2");
  writeFileSync(path, yaml("    server: https://10.0.0.1", "    client-certificate: c.crt\n    client-key: c.key"));
  t.same((await readKubeconfig(path)).connection?.clientCert, { cert: "CERT2", key: "KEY2" });
  writeFileSync(path, yaml("    server: https://10.0.0.1", "    client-certificate: c.crt"));
  await t.rejects(readKubeconfig(path), /certificate without its key/);
});

t.test("JSON works too (it is YAML)", async (t) => {
  const d = dir(t);
  const path = join(d, "config.json");
  writeFileSync(
    path,
    JSON.stringify({
      "current-context": "x",
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      clusters: [{ name: "c", cluster: { server: "http://127.0.0.1:8080" } }],
      users: [{ name: "u", user: { token: "t" } }],
    }),
  );
  const f = await readKubeconfig(path);
  t.equal(f.cluster.server, "http://127.0.0.1:8080");
  t.equal(f.cluster.ca, undefined, "no CA: the system roots");
  t.equal(f.connection?.token, "t");
});

t.test("credentials only client-node can produce are handed to it, named", async (t) => {
  const d = dir(t);
  const path = join(d, "config");
  writeFileSync(path, yaml("    server: https://10.0.0.1", "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws"));
  const exec = await readKubeconfig(path);
  t.equal(exec.connection, undefined);
  t.equal(exec.needsClientNode, "exec");
  t.equal(exec.cluster.server, "https://10.0.0.1", "the cluster half is still read here");
  writeFileSync(path, yaml("    server: https://10.0.0.1\n    proxy-url: http://proxy:3128", "    token: t"));
  t.equal((await readKubeconfig(path)).needsClientNode, "proxy-url");
  writeFileSync(path, yaml("    server: https://10.0.0.1", "    username: admin\n    password: hunter2"));
  t.equal((await readKubeconfig(path)).needsClientNode, "username, password");
});

t.test("refusals and broken files name the kubeconfig and the problem", async (t) => {
  const d = dir(t);
  const path = join(d, "config");
  writeFileSync(path, yaml("    server: https://10.0.0.1\n    insecure-skip-tls-verify: true", "    token: t"));
  await t.rejects(readKubeconfig(path), /insecure-skip-tls-verify; shardcar always verifies/);
  writeFileSync(path, yaml("    server: https://10.0.0.1", "    token: t", "missing"));
  await t.rejects(readKubeconfig(path), /no context named "missing"/);
  writeFileSync(path, yaml("    server: https://10.0.0.1", "    token: t", "other"));
  await t.rejects(readKubeconfig(path), /names no cluster/);
  writeFileSync(path, yaml("    certificate-authority-data: eA==", "    token: t"));
  await t.rejects(readKubeconfig(path), /has no server/);
  writeFileSync(path, yaml("    server: https://10.0.0.1\n    certificate-authority: nope.pem", "    token: t"));
  await t.rejects(readKubeconfig(path), /cannot read certificate-authority ".*\/nope.pem"/);
  writeFileSync(path, "current-context: [unclosed");
  await t.rejects(readKubeconfig(path), /kubeconfig ".*config": /, "a YAML error names the file");
  await t.rejects(readKubeconfig(join(d, "absent")), /ENOENT/);
  writeFileSync(path, "- a list\n");
  await t.rejects(readKubeconfig(path), /not a kubeconfig/);
});

t.test("in-cluster: the kubelet's address and the service-account CA and token file", async (t) => {
  const d = dir(t);
  writeFileSync(join(d, "ca.crt"), CA);
  const env = { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" };
  t.equal(inClusterServer(env), "https://[fd00::1]:443", "IPv6 in brackets");
  t.same(inClusterConnection(env, d), { server: "https://[fd00::1]:443", ca: CA, tokenFile: join(d, "token"), flag: "--injected" });
  t.throws(() => inClusterServer({}), /KUBERNETES_SERVICE_HOST/);
  const err = ((): unknown => {
    try {
      return inClusterConnection(env, join(d, "nope"), "--real-sa-dir");
    } catch (e) {
      return e;
    }
  })();
  t.match(err, { flag: "--real-sa-dir", message: /cannot read the service-account CA/ }, "a missing CA names the flag");
});

/** A service-account directory as the kubelet mounts it, in a temp dir (the in-cluster paths are injectable). */
function serviceAccount(t: Test, token = "sa-token"): string {
  const d = dir(t);
  writeFileSync(join(d, "token"), token);
  writeFileSync(join(d, "ca.crt"), CA);
  writeFileSync(join(d, "namespace"), "pod-ns\n");
  return d;
}

const IN_CLUSTER_ENV = { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" };

t.test("the rule: --kubeconfig, else $KUBECONFIG, else in-cluster (its token file present), else ~/.kube/config", async (t) => {
  const sa = serviceAccount(t);
  const home = dir(t);
  const rows: Array<[string, Parameters<typeof chooseKubeSource>[0], ReturnType<typeof chooseKubeSource>]> = [
    ["the flag beats everything", { kubeconfig: "/flag", env: { ...IN_CLUSTER_ENV, KUBECONFIG: "/env", HOME: home }, saDir: sa }, { kind: "kubeconfig", paths: ["/flag"], from: "--kubeconfig" }],
    ["$KUBECONFIG beats in-cluster", { env: { ...IN_CLUSTER_ENV, KUBECONFIG: `/a${delimiter}/b${delimiter}`, HOME: home }, saDir: sa }, { kind: "kubeconfig", paths: ["/a", "/b"], from: "$KUBECONFIG" }],
    ["in-cluster beats ~/.kube/config", { env: { ...IN_CLUSTER_ENV, KUBECONFIG: "", HOME: home }, saDir: sa }, { kind: "in-cluster", saDir: sa }],
    ["in-cluster needs its token file", { env: { ...IN_CLUSTER_ENV, HOME: home }, saDir: join(sa, "absent") }, { kind: "kubeconfig", paths: [join(home, ".kube", "config")], from: "~/.kube/config" }],
    ["in-cluster needs both variables", { env: { KUBERNETES_SERVICE_HOST: "10.96.0.1", HOME: home }, saDir: sa }, { kind: "kubeconfig", paths: [join(home, ".kube", "config")], from: "~/.kube/config" }],
  ];
  for (const [name, given, want] of rows) t.same(chooseKubeSource(given), want, name);
});

t.test("in a pod that sets KUBECONFIG, the kubeconfig gives both the cluster and the credentials, not the in-cluster service account", async (t) => {
  const sa = serviceAccount(t, "in-cluster-token");
  const d = dir(t);
  const path = join(d, "config");
  writeFileSync(path, yaml(`    server: https://elsewhere.example:6443\n    certificate-authority-data: ${b64(CA)}`, "    token: kubeconfig-token"));
  const access = await loadKubeAccess({ env: { ...IN_CLUSTER_ENV, KUBECONFIG: path }, saDir: sa });
  t.same(access.source, { kind: "kubeconfig", paths: [path], from: "$KUBECONFIG" });
  t.equal(access.cluster.server, "https://elsewhere.example:6443", "the upstream is the kubeconfig's server");
  t.match(access.connection, { server: "https://elsewhere.example:6443", token: "kubeconfig-token", tokenFile: undefined }, "and the credentials are the kubeconfig's user");
  t.equal(access.namespace, "team-a");
  const inCluster = await loadKubeAccess({ env: IN_CLUSTER_ENV, saDir: sa });
  t.match(inCluster, { source: { kind: "in-cluster" }, cluster: { server: "https://10.96.0.1:443", ca: CA }, connection: { tokenFile: join(sa, "token") }, namespace: "pod-ns" }, "without KUBECONFIG the same pod is in-cluster");
});

t.test("$KUBECONFIG files merge as client-go merges them: first definition and first current-context win, paths from each file's directory", async (t) => {
  const a = dir(t);
  const b = dir(t);
  writeFileSync(join(b, "ca.pem"), CA);
  writeFileSync(join(a, "first"), "current-context: ctx\ncontexts:\n- name: ctx\n  context: {cluster: c1, user: u1, namespace: from-a}\nusers:\n- name: u1\n  user: {tokenFile: tok}\n");
  writeFileSync(join(b, "second"), "current-context: other\ncontexts:\n- name: ctx\n  context: {cluster: ignored, user: ignored}\nclusters:\n- name: c1\n  cluster: {server: 'https://merged.example', certificate-authority: ca.pem}\nusers:\n- name: u1\n  user: {token: ignored}\n");
  const access = await loadKubeAccess({ env: { KUBECONFIG: [join(a, "first"), join(a, "missing"), join(b, "second")].join(delimiter) } });
  t.equal(access.cluster.server, "https://merged.example", "the cluster only the second file defines");
  t.equal(access.cluster.ca, CA, "its CA read relative to the second file");
  t.match(access.connection, { token: undefined, tokenFile: join(a, "tok") }, "the user of the first file, its token file relative to the first file");
  t.equal(access.namespace, "from-a");
  await t.rejects(loadKubeAccess({ env: { KUBECONFIG: join(a, "first") }, context: "nope" }), { flag: "--context", message: /invalid --context "nope"/ });
});

t.test("credentials only client-node can produce are read by client-node from the same merged configuration", async (t) => {
  const d = dir(t);
  const path = join(d, "config");
  writeFileSync(join(d, "ca.pem"), CA);
  writeFileSync(path, yaml("    server: https://10.0.0.1\n    certificate-authority: ca.pem", "    username: admin\n    password: hunter2"));
  const access = await loadKubeAccess({ kubeconfig: path, env: {} });
  t.equal(access.needsClientNode, "username, password");
  const conn = await connectionFor(access);
  t.equal(conn.server.href, "https://10.0.0.1/");
  t.equal((await conn.prepare()).headers["authorization"], `Basic ${b64("admin:hunter2")}`, "the same user, through client-node");
});
