/**
 * `shardcar manager` through the real CLI entry (`main`), as the container
 * runs it: flags, exit codes, and a full start → admit → stop in
 * cert-manager mode (self-managed mode needs an apiserver with Secrets and
 * MutatingWebhookConfigurations; its logic is covered in certs.test.ts).
 */
import t from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "node:https";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { main } from "../../src/cli/main.ts";
import { startDevApi } from "../../src/devapi/index.ts";
import { issueWebhookCertificates, webhookDnsNames } from "../../src/webhook/certs.ts";
import { captureIo, type CapturedIo } from "../support/cli.ts";
import { reviewFor } from "./support.ts";
import { eventually } from "../support/wait.ts";

const io = (signal?: AbortSignal): CapturedIo => captureIo(signal);

t.test("--help exits 0 and shows both certificate modes and examples", async (t) => {
  const c = io();
  t.equal(await main(["manager", "--help"], c.io), 0);
  t.match(c.out(), /Usage: shardcar manager \[flags\]/);
  t.match(c.out(), /cert-manager/);
  t.match(c.out(), /Examples:\n {2}shardcar manager\n/);
});

t.test("manager is listed in shardcar --help", async (t) => {
  const c = io();
  t.equal(await main(["--help"], c.io), 0);
  t.match(c.out(), /\n {2}manager\s+serve the injection webhook/);
});

const bad: Array<[string, string[], RegExp]> = [
  ["no --image outside a pod", [], /--image is required outside a pod/],
  ["unknown flag", ["--image", "x", "--imgae", "y"], /--imgae/],
  ["bad --cert-mode", ["--image", "x", "--cert-mode", "vault"], /invalid --cert-mode "vault": expected self or cert-manager/],
  ["bad --webhook-listen", ["--image", "x", "--webhook-listen", "9443"], /invalid --webhook-listen "9443"/],
  ["bad --proxy-port", ["--image", "x", "--proxy-port", "70000"], /invalid --proxy-port "70000"/],
  ["equal ports", ["--image", "x", "--proxy-port", "9464"], /--admin-port 9464 must differ from --proxy-port/],
  ["bad --image-pull-policy", ["--image", "x", "--image-pull-policy", "always"], /invalid --image-pull-policy "always"/],
  ["bad --namespace", ["--image", "x", "--namespace", "Shardcar"], /invalid --namespace "Shardcar"/],
  ["too short --cert-resync", ["--image", "x", "--cert-resync", "10ms"], /invalid --cert-resync "10ms": at least 1s/],
  ["bad --cert-validity", ["--image", "x", "--cert-validity", "a year"], /invalid --cert-validity "a year": expected a duration/],
  // Renewal starts with a third left: a check every minute must fall in it.
  ["--cert-validity too short for --cert-resync", ["--image", "x", "--cert-validity", "3m"], /invalid --cert-validity "3m": a third of it must be longer than --cert-resync/],
];
for (const [name, argv, message] of bad) {
  t.test(`${name}: exits 2 with a message naming the flag`, async (t) => {
    const c = io();
    t.equal(await main(["manager", ...argv], c.io), 2);
    t.match(c.err(), message);
  });
}

t.test("cert-manager mode: starts from the mounted certificate, admits a pod over HTTPS, and stops on the signal", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "shardcar-manager-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const certs = await issueWebhookCertificates(undefined, [...webhookDnsNames("shardcar-webhook", "shardcar-system"), "localhost"], new Date());
  await writeFile(join(dir, "tls.crt"), certs["tls.crt"]);
  await writeFile(join(dir, "tls.key"), certs["tls.key"]);

  const ac = new AbortController();
  const c = io(ac.signal);
  const exit = main(["manager", "--image", "ghcr.io/shardcar/shardcar:0.1.0", "--cert-mode", "cert-manager", "--cert-dir", dir, "--webhook-listen", "127.0.0.1:0", "--no-rings", "--metrics-listen", "127.0.0.1:0", "--log-level", "warn"], c.io);
  const served = (re: RegExp): number | undefined => {
    const m = re.exec(c.out());
    return m ? Number(m[1]) : undefined;
  };
  const webhookLine = /serving the webhook on https:\/\/127\.0\.0\.1:(\d+)/;
  const metricsLine = /metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/;
  await eventually(() => served(webhookLine) !== undefined && served(metricsLine) !== undefined);
  const port = served(webhookLine);
  const metricsPort = served(metricsLine);
  if (port === undefined || metricsPort === undefined) {
    t.fail(`manager did not start: ${c.out()} ${c.err()}`);
    ac.abort();
    return;
  }
  const pod = JSON.parse(readFileSync(fileURLToPath(new URL("./testdata/inject/kube-state-metrics.pod.json", import.meta.url)), "utf8")) as unknown;
  const body = JSON.stringify(reviewFor(pod, { uid: "manager-e2e" }));
  const answer = await new Promise<string>((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, servername: "shardcar-webhook.shardcar-system.svc", method: "POST", path: "/mutate-pods", headers: { "content-type": "application/json" }, ca: certs["ca.crt"], agent: false },
      (res) => {
        let s = "";
        res.on("data", (d: Buffer) => (s += d.toString()));
        res.on("end", () => resolve(s));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
  const review = JSON.parse(answer) as { response: { uid: string; allowed: boolean; patchType?: string } };
  t.equal(review.response.uid, "manager-e2e");
  t.equal(review.response.allowed, true);
  t.equal(review.response.patchType, "JSONPatch", "the pod was injected");
  const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  t.match(metrics, /^shardcar_inject_webhook_reviews_total\{result="injected",reason=""\} 1$/m, "and /metrics counted one injection");
  ac.abort();
  t.equal(await exit, 0, "exits 0 on SIGTERM");
});

t.test("--metrics-auth: the manager's /metrics over TLS, only for a token the apiserver authenticates and authorizes", async (t) => {
  const api = await startDevApi({ gate: "off", auth: { users: { scraper: { username: "prometheus" }, other: { username: "other" } }, grants: [{ subject: "prometheus", verb: "get", path: "/metrics" }] } });
  t.teardown(() => api.close());
  const dir = await mkdtemp(join(tmpdir(), "shardcar-manager-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const certs = await issueWebhookCertificates(undefined, [...webhookDnsNames("shardcar-webhook", "shardcar-system"), "localhost"], new Date());
  await writeFile(join(dir, "tls.crt"), certs["tls.crt"]);
  await writeFile(join(dir, "tls.key"), certs["tls.key"]);
  await writeFile(join(dir, "kubeconfig"), JSON.stringify({ "current-context": "c", contexts: [{ name: "c", context: { cluster: "d", user: "m" } }], clusters: [{ name: "d", cluster: { server: api.url } }], users: [{ name: "m", user: { token: "manager-own" } }] }));
  const ac = new AbortController();
  const c = captureIo(ac.signal, { KUBECONFIG: join(dir, "kubeconfig") });
  const exit = main(["manager", "--image", "x", "--cert-mode", "cert-manager", "--cert-dir", dir, "--webhook-listen", "127.0.0.1:0", "--no-rings", "--metrics-listen", "127.0.0.1:0", "--metrics-auth", "--log-level", "warn"], c.io);
  t.teardown(async () => {
    ac.abort();
    await exit;
  });
  const url = (): string | undefined => /serving metrics on (https:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(c.out())?.[1];
  const end = Date.now() + 10_000;
  while (url() === undefined && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  if (url() === undefined) {
    t.fail(`no https metrics listener: ${c.out()} ${c.err()}`);
    return;
  }
  const scrape = (token?: string): Promise<number> =>
    new Promise((resolve, reject) => {
      request(`${url() ?? ""}/metrics`, { rejectUnauthorized: false, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on("error", reject)
        .end();
    });
  t.same([await scrape(), await scrape("other"), await scrape("scraper")], [401, 403, 200], "none, a user without the grant, the scraper");
  t.ok(api.stats.requests.filter((q) => q.url.includes("reviews")).every((q) => q.authorization === "Bearer manager-own"), "asked with the manager's own credentials");
});
