/**
 * An unmodified-style client-node controller: a pod informer on in-cluster
 * configuration (`KubeConfig.loadFromCluster()`: KUBERNETES_SERVICE_HOST and
 * _PORT, and the service-account files), restarted after an error the way
 * client-node's README shows. The counterpart of test/support/client-go/ for
 * the JavaScript client; it runs as a container of a pod on the one-pod
 * kubelet (test/support/kubelet/).
 *
 * `node main.ts [--listen 127.0.0.1:PORT]` prints one JSON line,
 * `{"ready":"http://127.0.0.1:PORT"}`, and serves the same endpoints as the
 * client-go controller:
 *
 *   GET /status   {"synced":bool,"objects":n,"errors":n}
 *   GET /objects  {"synced":bool,"items":[{"key":"ns/name","uid":"…","rv":"…"},…]}
 */
import { createServer } from "node:http";
import { CoreV1Api, KubeConfig, makeInformer, type V1Pod } from "@kubernetes/client-node";

const at = process.argv.indexOf("--listen");
const listen = at >= 0 ? (process.argv[at + 1] ?? "") : "127.0.0.1:0";
const [host = "", port = "0"] = listen.split(":");
if (host !== "127.0.0.1") {
  process.stderr.write(`client-node-controller: --listen ${listen}: the status endpoint listens on 127.0.0.1 only\n`);
  process.exit(2);
}

const kc = new KubeConfig();
kc.loadFromCluster();
const core = kc.makeApiClient(CoreV1Api);
const informer = makeInformer<V1Pod>(kc, "/api/v1/pods", () => core.listPodForAllNamespaces());
let synced = false;
let errors = 0;
informer.on("error", (err: unknown) => {
  errors++;
  synced = false;
  process.stderr.write(`client-node-controller: informer error, restarting in 1s: ${err instanceof Error ? err.message : String(err)}\n`);
  setTimeout(() => {
    informer.start().then(
      () => (synced = true),
      () => {},
    );
  }, 1000);
});

const server = createServer((req, res) => {
  const items = informer.list().map((p) => ({ key: `${p.metadata?.namespace ?? ""}/${p.metadata?.name ?? ""}`, uid: p.metadata?.uid ?? "", rv: p.metadata?.resourceVersion ?? "" }));
  const body = req.url === "/objects" ? { synced, items } : req.url === "/status" ? { synced, objects: items.length, errors } : undefined;
  if (body === undefined) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
});
server.listen(Number(port), host, () => {
  const a = server.address();
  process.stdout.write(`${JSON.stringify({ ready: `http://127.0.0.1:${typeof a === "object" && a !== null ? a.port : 0}` })}\n`);
});
informer.start().then(
  () => (synced = true),
  (err: unknown) => process.stderr.write(`client-node-controller: first start failed: ${String(err)}\n`),
);
process.on("SIGTERM", () => {
  void informer.stop();
  server.close(() => process.exit(0));
});
