/**
 * The manager's --sidecar-metrics-auth and --sidecar-debug-remote reach the
 * injected sidecar: its args carry the flags, and with metrics auth (the
 * admin listener then serves TLS) its probes use HTTPS.
 */
import t from "tap";
import { decideInjection } from "../../src/webhook/decide.ts";
import type { JsonObject } from "../../src/webhook/json.ts";
import { buildInjectionPatch } from "../../src/webhook/patch.ts";
import { testConfig } from "./support.ts";

const POD: JsonObject = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "ctrl-0", namespace: "apps", labels: { "shardcar.io/inject": "true" }, annotations: { "shardcar.io/resources": "pods", "shardcar.io/shards": "0/2" } },
  spec: { containers: [{ name: "ctrl", image: "ctrl:1" }] },
};

function sidecar(over: Parameters<typeof testConfig>[0]): JsonObject {
  const config = testConfig(over);
  const d = decideInjection(POD, config);
  if ("refuse" in d || !d.inject) throw new Error(JSON.stringify(d));
  const op = buildInjectionPatch(POD, d.plan).find((o) => o.op === "add" && o.path.startsWith("/spec/initContainers"));
  const v = op !== undefined && "value" in op ? op.value : undefined;
  return (Array.isArray(v) ? v[0] : v) as JsonObject;
}

t.test("by default the sidecar's metrics and debug endpoint are as the proxy's defaults, probed over HTTP", async (t) => {
  const s = sidecar({});
  t.notOk((s["args"] as string[]).some((a) => a === "--metrics-auth" || a === "--debug-remote"));
  t.equal((s["startupProbe"] as { httpGet: { scheme: string } }).httpGet.scheme, "HTTP");
});

t.test("--sidecar-metrics-auth: --metrics-auth, and every probe over HTTPS; --sidecar-debug-remote: --debug-remote", async (t) => {
  const s = sidecar({ sidecarMetricsAuth: true, sidecarDebugRemote: true });
  const args = s["args"] as string[];
  t.ok(args.includes("--metrics-auth") && args.includes("--debug-remote"), args.join(" "));
  for (const p of ["startupProbe", "readinessProbe", "livenessProbe"]) t.equal((s[p] as { httpGet: { scheme: string } }).httpGet.scheme, "HTTPS", p);
});
