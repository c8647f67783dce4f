import { ConfigError } from "../../errors.ts";
import { createLogger } from "../../log.ts";
import { StaticOwnership, type OwnershipSource } from "../../proxy/ownership.ts";
import { parseListen, startProxy } from "../../proxy/run.ts";
import { loadUpstream } from "../../proxy/upstream.ts";
import { parseResources, parseShardSpec, staticRanges } from "../../shard/spec.ts";
import type { Command } from "../command.ts";
import { UsageError, durationFlag, intFlag, parseFlags } from "../flags.ts";

export const proxyCommand: Command = {
  name: "proxy",
  summary: "run the sharding proxy in front of one controller (the sidecar)",
  usage: `Usage: shardcar proxy --resources LIST [flags]

Listens on loopback, forwards to the apiserver, adds the pod's shard selector
to every LIST and WATCH of the sharded resources, and filters list items and
watch events itself whenever the apiserver did not.

Flags:
  --resources LIST        sharded resources and keys (required),
                          e.g. "pods, configmaps=namespace, releases.convoy.kumodo.io"
  --shards SPEC           i/N, ordinal/N, a shardRange(...) selector, or ring (default ring)
  --fallback MODE         filter (default) or fail: answer 503 when the server did not filter
  --listen HOST:PORT      proxy listener, loopback only (default 127.0.0.1:7443)
  --admin-listen H:P      /metrics, /healthz, /readyz (default 0.0.0.0:9464; "off" disables)
  --kubeconfig PATH       upstream from this kubeconfig (default: in-cluster, then $KUBECONFIG)
  --server URL            upstream URL instead of a kubeconfig (with --certificate-authority)
  --certificate-authority PATH
  --tls-cert PATH --tls-key PATH   serve TLS on the loopback listener
  --pod-name NAME         default $POD_NAME (needed for ordinal/N and ring)
  --bookmark-interval D   minimum gap between synthetic bookmarks per watch (default 1s)
  --relist-jitter D       spread forced relists after a range change (default 0s)
  --max-item-bytes N      largest list item or watch event accepted (default 16777216)
  --log-level LEVEL       pino level (default info)

Examples:
  shardcar proxy --server http://127.0.0.1:8080 --resources pods --shards 0/3 --listen 127.0.0.1:7001
  shardcar proxy --kubeconfig ~/.kube/config --resources "pods,configmaps=namespace" --shards 1/2
`,
  async run(argv, io) {
    const { values } = parseFlags(argv, {
      resources: { type: "string" },
      shards: { type: "string" },
      fallback: { type: "string" },
      listen: { type: "string" },
      "admin-listen": { type: "string" },
      kubeconfig: { type: "string" },
      server: { type: "string" },
      "certificate-authority": { type: "string" },
      "tls-cert": { type: "string" },
      "tls-key": { type: "string" },
      "pod-name": { type: "string" },
      "bookmark-interval": { type: "string" },
      "relist-jitter": { type: "string" },
      "max-item-bytes": { type: "string" },
      "log-level": { type: "string" },
    });
    if (values.help) {
      io.stdout.write(this.usage);
      return 0;
    }
    if (values.resources === undefined) throw new UsageError("--resources", "--resources is required, e.g. --resources pods,configmaps=namespace");
    const resources = parseResources(values.resources, "--resources");
    const spec = parseShardSpec(values.shards ?? "ring", "--shards");
    const fallback = values.fallback ?? "filter";
    if (fallback !== "filter" && fallback !== "fail") throw new UsageError("--fallback", `invalid --fallback ${JSON.stringify(fallback)}: expected filter or fail`);
    const listen = parseListen("--listen", values.listen ?? "127.0.0.1:7443");
    const adminFlag = values["admin-listen"] ?? "0.0.0.0:9464";
    const admin = adminFlag === "off" ? undefined : parseListen("--admin-listen", adminFlag);
    if ((values["tls-cert"] === undefined) !== (values["tls-key"] === undefined)) throw new UsageError("--tls-cert", "--tls-cert and --tls-key go together");
    const bookmarkIntervalMs = durationFlag("--bookmark-interval", values["bookmark-interval"], 1000);
    const relistJitterMs = durationFlag("--relist-jitter", values["relist-jitter"], 0);
    const maxItemBytes = intFlag("--max-item-bytes", values["max-item-bytes"], 16 * 1024 * 1024, 1024);
    const podName = values["pod-name"] ?? io.env.POD_NAME;

    const logger = createLogger({ level: values["log-level"] ?? "info", name: "shardcar-proxy" });
    const upstream = loadUpstream({
      env: io.env,
      ...(values.kubeconfig === undefined ? {} : { kubeconfigPath: values.kubeconfig }),
      ...(values.server === undefined ? {} : { server: values.server }),
      ...(values["certificate-authority"] === undefined ? {} : { caFile: values["certificate-authority"] }),
    });
    const ranges = staticRanges(spec, podName);
    if (ranges === undefined) throw new ConfigError("--shards", "ring mode needs the ring member, which this build does not include yet; use i/N, ordinal/N or a selector");
    const ownership: OwnershipSource = new StaticOwnership(ranges);
    const { readFileSync } = await import("node:fs");
    const tls =
      values["tls-cert"] !== undefined && values["tls-key"] !== undefined
        ? { cert: readFileSync(values["tls-cert"], "utf8"), key: readFileSync(values["tls-key"], "utf8") }
        : undefined;
    const running = await startProxy({
      listen,
      ...(admin === undefined ? {} : { admin }),
      ...(tls === undefined ? {} : { tls }),
      upstream,
      resources,
      ownership,
      fallback,
      logger,
      bookmarkIntervalMs,
      relistJitterMs,
      maxItemBytes,
    });
    logger.info({ url: running.url, admin: running.adminUrl, upstream: upstream.url.origin, resources: resources.map((r) => r.resource) }, "proxy ready");
    io.stdout.write(`shardcar proxy listening on ${running.url}\n`);
    await new Promise<void>((resolve) => io.signal.addEventListener("abort", () => resolve(), { once: true }));
    await running.close();
    return 0;
  },
};
