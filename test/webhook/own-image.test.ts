import t from "tap";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { ApiClient, directConnection } from "../../src/kube/client.ts";
import { readOwnImage } from "../../src/webhook/own-image.ts";

async function apiserverWithPod(t: { teardown(fn: () => unknown): void }, containers: Array<{ name: string; image?: string }>): Promise<ApiClient> {
  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/api/v1/namespaces/shardcar-system/pods/shardcar-manager-7d9c-abcde") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name: "shardcar-manager-7d9c-abcde" }, spec: { containers } }));
      return;
    }
    res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Failure", reason: "NotFound", code: 404 }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return new ApiClient(directConnection({ server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: "t" }));
}

t.test("the sidecar image is the image of the manager's own 'manager' container", async (t) => {
  const kc = await apiserverWithPod(t, [{ name: "kube-rbac-proxy", image: "quay.io/brancz/kube-rbac-proxy:v0.18.1" }, { name: "manager", image: "registry.example/shardcar:1.2.3" }]);
  t.equal(await readOwnImage(kc, "shardcar-system", "shardcar-manager-7d9c-abcde", "manager"), "registry.example/shardcar:1.2.3");
});

t.test("a pod with a single container of another name still yields its image", async (t) => {
  const kc = await apiserverWithPod(t, [{ name: "shardcar", image: "registry.example/shardcar:1.2.3" }]);
  t.equal(await readOwnImage(kc, "shardcar-system", "shardcar-manager-7d9c-abcde", "manager"), "registry.example/shardcar:1.2.3");
});

t.test("no matching container, or no such pod, is an error that says to pass --image", async (t) => {
  const kc = await apiserverWithPod(t, [{ name: "a", image: "x" }, { name: "b", image: "y" }]);
  await t.rejects(readOwnImage(kc, "shardcar-system", "shardcar-manager-7d9c-abcde", "manager"), /no container "manager" with an image; pass --image/);
  await t.rejects(readOwnImage(kc, "shardcar-system", "gone", "manager"), /404|NotFound/);
});
