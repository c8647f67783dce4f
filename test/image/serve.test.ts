/**
 * The image does its job, not only print its help: run from the image as
 * 65532 on a read-only root without capabilities, `shardcar devapi` serves
 * pods and two `shardcar proxy` shards (0/2, 1/2, gate off, so the proxies
 * filter themselves) split them exactly: disjoint, and together all of them.
 *
 * The containers share one private network namespace (--network=none, then
 * container:<devapi>), so the fixed ports below are theirs alone.
 * Run by test/image/run.sh; skipped without SHARDCAR_IMAGE.
 */
import t from "tap";
import { randomBytes } from "node:crypto";
import { IMAGE, PODMAN_ARGS, RESTRICTED, podman, runImage } from "./support.ts";

if (IMAGE === undefined) {
  t.pass("skipped: no image under test", { skip: "SHARDCAR_IMAGE is not set (npm run test:image builds the image)" });
} else {
  const image = IMAGE;
  const id = randomBytes(4).toString("hex");
  const devapi = `shardcar-image-devapi-${id}`;
  const started: string[] = [];
  t.teardown(async () => {
    for (const name of started.reverse()) await podman(["rm", "--force", "--time", "2", name]);
  });

  const detached = async (name: string, network: string, command: string[]): Promise<void> => {
    const r = await podman(["run", "--detach", "--name", name, ...PODMAN_ARGS, ...RESTRICTED, `--network=${network}`, image, ...command]);
    if (r.code !== 0) throw new Error(`podman run ${name} failed: ${r.stderr}`);
    started.push(name);
  };

  t.test("devapi and two proxy shards from the image split the pods exactly", async (t) => {
    await detached(devapi, "none", ["devapi", "--host", "127.0.0.1", "--port", "18080", "--gate", "off", "--seed-pods", "40", "--namespaces", "4", "--log-level", "warn"]);
    for (const [i, port] of [[0, 17001], [1, 17002]] as const) {
      await detached(`shardcar-image-proxy${i}-${id}`, `container:${devapi}`, [
        "proxy", "--server", "http://127.0.0.1:18080", "--resources", "pods", "--shards", `${i}/2`,
        "--listen", `127.0.0.1:${port}`, "--admin-listen", `127.0.0.1:${port + 1000}`, "--log-level", "warn",
      ]);
    }
    // A client in the same network namespace: waits (bounded) for both
    // proxies' /readyz, then lists pods directly and through each shard.
    const client = `
      const get = async (url) => { const r = await fetch(url); if (!r.ok) throw new Error(url + ": " + r.status); return r.json(); };
      const ready = async (port) => {
        for (let i = 0; i < 300; i++) {
          try { if ((await fetch("http://127.0.0.1:" + port + "/readyz")).ok) return; } catch {}
          await new Promise((r) => setTimeout(r, 100));
        }
        throw new Error("proxy admin port " + port + " never became ready");
      };
      await ready(18001); await ready(18002);
      const names = (l) => l.items.map((p) => p.metadata.namespace + "/" + p.metadata.name).sort();
      console.log(JSON.stringify({
        all: names(await get("http://127.0.0.1:18080/api/v1/pods")),
        shard0: names(await get("http://127.0.0.1:17001/api/v1/pods")),
        shard1: names(await get("http://127.0.0.1:17002/api/v1/pods")),
      }));`;
    const r = await runImage(image, [...RESTRICTED, `--network=container:${devapi}`, "--entrypoint", "/usr/local/bin/node"], ["--input-type=module", "-e", client]);
    if (r.code !== 0) {
      for (const name of started) t.comment(`${name}: ${(await podman(["logs", name])).stdout.slice(-2000)}`);
    }
    t.equal(r.code, 0, r.stderr);
    const { all, shard0, shard1 } = JSON.parse(r.stdout) as { all: string[]; shard0: string[]; shard1: string[] };
    t.equal(all.length, 40, "devapi serves the 40 seeded pods");
    t.ok(shard0.length > 0 && shard1.length > 0, `both shards own pods (${shard0.length} + ${shard1.length})`);
    t.same(shard0.filter((n) => shard1.includes(n)), [], "no pod is in both shards");
    t.same([...shard0, ...shard1].sort(), all, "together the shards hold every pod");
  });
}
