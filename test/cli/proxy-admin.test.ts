/**
 * `shardcar proxy --metrics-auth`: the admin listener serves TLS and /metrics
 * only to a token the apiserver authenticates and authorizes, asked with the
 * sidecar's own credentials (the kubeconfig's, here); without credentials of
 * its own the flag is refused, naming it.
 */
import t from "tap";
import { request } from "node:https";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../src/cli/main.ts";
import { startDevApi } from "../../src/devapi/index.ts";
import { captureIo } from "../support/cli.ts";
import { eventually } from "../support/wait.ts";

function scrape(url: string, token?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request(`${url}/metrics`, { rejectUnauthorized: false, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    })
      .on("error", reject)
      .end();
  });
}

t.test("--metrics-auth: TLS on the admin listener, /metrics for the granted scraper only, reviews asked as the sidecar", async (t) => {
  const api = await startDevApi({ gate: "off", auth: { users: { scraper: { username: "prometheus" }, other: { username: "other" } }, grants: [{ subject: "prometheus", verb: "get", path: "/metrics" }] } });
  t.teardown(() => api.close());
  const dir = mkdtempSync(join(tmpdir(), "shardcar-proxy-admin-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(kubeconfig, JSON.stringify({ "current-context": "c", contexts: [{ name: "c", context: { cluster: "d", user: "sidecar" } }], clusters: [{ name: "d", cluster: { server: api.url } }], users: [{ name: "sidecar", user: { token: "sidecar-own" } }] }));
  const stop = new AbortController();
  const io = captureIo(stop.signal, {});
  const done = main(["proxy", "--kubeconfig", kubeconfig, "--resources", "pods", "--shards", "0/2", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--metrics-auth"], io.io);
  t.teardown(async () => {
    stop.abort();
    await done;
  });
  const admin = (): string | undefined => /\(admin (https:\/\/127\.0\.0\.1:\d+)\)/.exec(io.out())?.[1];
  t.ok(await eventually(() => admin() !== undefined, 20_000), "the admin listener serves https");
  const url = admin() ?? "";
  t.equal(await scrape(url), 401, "no token");
  t.equal(await scrape(url, "other"), 403, "a user without get /metrics");
  t.equal(await scrape(url, "scraper"), 200, "the granted scraper");
  const reviews = api.stats.requests.filter((q) => q.url.includes("reviews"));
  t.ok(reviews.length >= 2 && reviews.every((q) => q.authorization === "Bearer sidecar-own"), "asked with the sidecar's own token");
});

t.test("--metrics-auth with --server and no kubeconfig has no credentials to ask with, and says so", async (t) => {
  const api = await startDevApi({ gate: "off" });
  t.teardown(() => api.close());
  const io = captureIo();
  t.equal(await main(["proxy", "--server", api.url, "--resources", "pods", "--shards", "0/2", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--metrics-auth"], io.io), 2);
  t.match(io.err(), /--metrics-auth asks the apiserver with the sidecar's own credentials/);
});
