/**
 * A proxy run by hand in front of a server that wants a token: kubectl
 * sends its bearer token only over https, so `--tls` (with `--write-ca` for
 * kubectl's `--certificate-authority`) is what makes the by-hand proxy work
 * against a real cluster, and over plain HTTP kubectl is refused for want of
 * the token it did not send. The README's version of this runs against the
 * real apiserver in test/real/readme-by-hand.test.ts.
 */
import t, { type Test } from "tap";
import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { main } from "../../src/cli/main.ts";
import { seedPods, startDevApi, type DevApi } from "../../src/devapi/index.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, shardRange } from "../../src/shard/range.ts";
import { captureIo } from "../support/cli.ts";
import { eventually } from "../support/wait.ts";

const KUBECTL = spawnSync("sh", ["-c", "command -v kubectl"]).stdout.toString().trim();
const skip = KUBECTL === "" ? "kubectl not installed" : false;
const TOKEN = "by-hand-token";

async function proxy(t: Test, api: DevApi, extra: string[]): Promise<string> {
  const stop = new AbortController();
  const io = captureIo(stop.signal, {});
  const done = main(["proxy", "--server", api.url, "--resources", "pods", "--shards", "1/3", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--log-level", "warn", ...extra], io.io);
  t.teardown(async () => {
    stop.abort();
    await done;
  });
  const url = (): string | undefined => /shardcar proxy listening on (https?:\/\/127\.0\.0\.1:\d+)/.exec(io.out())?.[1];
  if (!(await eventually(() => url() !== undefined, 20_000))) throw new Error(`the proxy did not listen: ${io.err()}`);
  return url() ?? "";
}

t.test("with --tls and --write-ca, kubectl sends its token through the proxy and sees exactly the shard; over plain HTTP it sends none", { skip }, async (t) => {
  const api = await startDevApi({ gate: "off", requireToken: TOKEN });
  t.teardown(() => api.close());
  seedPods(api, { count: 300, namespaces: 3 });
  const dir = mkdtempSync(join(tmpdir(), "shardcar-proxy-tls-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const expected = api.store.list("pods").filter((o) => contains([shardRange(1, 3)], fnv1a64(o.metadata?.uid ?? ""))).map((o) => `${o.metadata?.namespace}/${o.metadata?.name}`).sort();
  const kubectl = (url: string, ...more: string[]) =>
    promisify(execFile)(KUBECTL, ["--kubeconfig", "/dev/null", "--server", url, "--token", TOKEN, ...more, "get", "pods", "-A", "--no-headers"], { encoding: "utf8" }).then(
      (r) => ({ ok: true, out: r.stdout }),
      (e: { stderr?: string }) => ({ ok: false, out: e.stderr ?? "" }),
    );

  const https = await proxy(t, api, ["--tls", "--write-ca", join(dir, "ca.crt")]);
  t.match(https, /^https:/, "the loopback listener serves TLS");
  const r = await kubectl(https, "--certificate-authority", join(dir, "ca.crt"));
  t.ok(r.ok, r.out);
  t.same(r.out.trim().split("\n").map((l) => l.trim().split(/\s+/).slice(0, 2).join("/")).sort(), expected, `${expected.length} of 300 pods: the shard`);

  const http = await proxy(t, api, []);
  const before = api.stats.requests.length;
  const plain = await kubectl(http);
  t.notOk(plain.ok, "over plain HTTP kubectl is refused");
  t.match(plain.out, /Unauthorized|must be logged in/i, plain.out);
  const sent = api.stats.requests.slice(before).filter((q) => q.url.startsWith("/api"));
  t.ok(sent.length > 0 && sent.every((q) => q.authorization === undefined || q.authorization === ""), "because kubectl sent no Authorization header to the http:// proxy");
});

t.test("--write-ca without --tls, or beside --tls-cert, names the flag", async (t) => {
  const api = await startDevApi({ gate: "off" });
  t.teardown(() => api.close());
  for (const extra of [["--write-ca", "/tmp/x"], ["--tls-cert", "/tmp/c", "--tls-key", "/tmp/k", "--write-ca", "/tmp/x"]]) {
    const io = captureIo();
    t.equal(await main(["proxy", "--server", api.url, "--resources", "pods", "--shards", "0/2", "--listen", "127.0.0.1:0", "--admin-listen", "off", ...extra], io.io), 2);
    t.match(io.err(), /--write-ca/);
  }
});
