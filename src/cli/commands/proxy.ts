import { readFileSync } from "node:fs";
import type { KubeConfig } from "@kubernetes/client-node";
import { Registry } from "prom-client";
import type { RingMember } from "../../ring/member.ts";
import { join } from "node:path";
import { ConfigError } from "../../errors.ts";
import type { ReadinessCheck } from "../../proxy/admin.ts";
import { parseLockSpec } from "../../proxy/lock-rename.ts";
import type { InjectedMode } from "../../proxy/injected/index.ts";
import { createLogger } from "../../log.ts";
import { StaticOwnership, type OwnershipSource } from "../../proxy/ownership.ts";
import { parseListen, startProxy } from "../../proxy/run.ts";
import { loadUpstream } from "../../proxy/upstream.ts";
import { parseResources, parseShardSpec, shardIdentity, staticRanges } from "../../shard/spec.ts";
import type { Command } from "../command.ts";
import { UsageError, durationFlag, intFlag, parseFlags } from "../flags.ts";

/**
 * The sidecar's own credentials, for its ring membership: the real
 * service-account files in injected mode, else the kubeconfig or server given.
 */
async function sidecarKubeConfig(o: { injected: boolean; realSaDir: string; env: NodeJS.ProcessEnv; kubeconfig: string | undefined; server: string | undefined; caFile: string | undefined }): Promise<KubeConfig> {
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  if (o.injected) {
    kc.loadFromOptions({
      clusters: [{ name: "in-cluster", server: inClusterServer(o.env), caFile: join(o.realSaDir, "ca.crt"), skipTLSVerify: false }],
      users: [{ name: "sidecar", authProvider: { name: "tokenFile", config: { tokenFile: join(o.realSaDir, "token") } } }],
      contexts: [{ name: "in-cluster", cluster: "in-cluster", user: "sidecar" }],
      currentContext: "in-cluster",
    });
  } else if (o.kubeconfig !== undefined) {
    kc.loadFromFile(o.kubeconfig);
  } else if (o.server !== undefined) {
    throw new UsageError("--shards", "--shards ring needs credentials for the member Lease: use --kubeconfig (or --injected), not --server");
  } else {
    kc.loadFromDefault();
  }
  return kc;
}

/** The real apiserver, as the kubelet describes it to every container. */
function inClusterServer(env: NodeJS.ProcessEnv): string {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (host === undefined || port === undefined || host === "" || port === "") {
    throw new ConfigError("--injected", "--injected needs KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (the real apiserver), which the kubelet sets in every container");
  }
  return `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

export const proxyCommand: Command = {
  name: "proxy",
  usage: `Usage: shardcar proxy --resources LIST [flags]

Listens on loopback, forwards to the apiserver, adds the pod's shard selector
to every LIST and WATCH of the sharded resources, and filters list items and
watch events itself whenever the apiserver did not.

Flags:
  --resources LIST        sharded resources and keys (required),
                          e.g. "pods, configmaps=namespace, releases.convoy.kumodo.io"
  --shards SPEC           i/N, ordinal/N, a shardRange(...) selector, or ring (default ring)
  --ring NAME             ring mode: the ShardRing this pod joins
  --handoff MODE          ring mode: overlap (default; duplicates, never gaps) or exclusive
  --pod-namespace NS      default $POD_NAMESPACE (ring mode: where the Lease and ShardRing live)
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
  --synthetic-deletes B   ring mode: when the owned ranges only shrink, send DELETED events
                          for objects leaving them instead of forcing a relist (default true)
  --wait-for-ranges D     ring mode: hold the controller's sharded requests until the ring
                          gives this member its first ranges, at most D (default 30s; 0 serves
                          at once, for an empty shard, and relists when the ranges come)
  --max-item-bytes N      largest list item or watch event accepted (default 16777216)
  --leader-election LOCK  the controller's lock (leases/<name>, configmaps/<name> or
                          endpoints/<name>), renamed to <name>-<shard identity> so each
                          replica leads its own shard
  --log-level LEVEL       pino level (default info)

Injected mode (what the webhook configures):
  --injected              serve TLS on the loopback listener with a pod-local CA and fill
                          --sa-dir with token, namespace and ca.crt for the app containers;
                          the upstream is the real in-cluster apiserver
  --sa-dir DIR            the emptyDir app containers mount as their service-account dir
  --real-sa-dir DIR       the sidecar's own service-account dir
                          (default /var/run/secrets/kubernetes.io/serviceaccount)
  --write-kubeconfig      also write a kubeconfig into --sa-dir

Examples:
  shardcar proxy --server http://127.0.0.1:8080 --resources pods --shards 0/3 --listen 127.0.0.1:7001
  shardcar proxy --kubeconfig ~/.kube/config --resources "pods,configmaps=namespace" --shards 1/2
  shardcar proxy --injected --sa-dir /var/run/shardcar/serviceaccount --resources pods --shards ordinal/3
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
      "synthetic-deletes": { type: "string" },
      "wait-for-ranges": { type: "string" },
      "max-item-bytes": { type: "string" },
      "log-level": { type: "string" },
      injected: { type: "boolean" },
      "sa-dir": { type: "string" },
      "real-sa-dir": { type: "string" },
      "write-kubeconfig": { type: "boolean" },
      ring: { type: "string" },
      handoff: { type: "string" },
      "leader-election": { type: "string" },
      "pod-namespace": { type: "string" },
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
    const waitForRangesMs = durationFlag("--wait-for-ranges", values["wait-for-ranges"], 30_000);
    const syntheticFlag = values["synthetic-deletes"] ?? "true";
    if (syntheticFlag !== "true" && syntheticFlag !== "false") throw new UsageError("--synthetic-deletes", `invalid --synthetic-deletes ${JSON.stringify(syntheticFlag)}: expected true or false`);
    const maxItemBytes = intFlag("--max-item-bytes", values["max-item-bytes"], 16 * 1024 * 1024, 1024);
    const podName = values["pod-name"] ?? io.env.POD_NAME;

    const logger = createLogger({ level: values["log-level"] ?? "info", name: "shardcar-proxy" });
    const registry = new Registry();
    const injected = values.injected === true;
    if (injected && values["sa-dir"] === undefined) throw new UsageError("--sa-dir", "--injected needs --sa-dir, the emptyDir the app containers mount");
    if (injected && (values["tls-cert"] !== undefined || values.server !== undefined || values.kubeconfig !== undefined)) {
      throw new UsageError("--injected", "--injected generates its own TLS and uses the in-cluster apiserver; drop --tls-cert/--tls-key/--server/--kubeconfig");
    }
    // The kubelet's mount point for every container's service-account files.
    const realSaDir = values["real-sa-dir"] ?? "/var/run/secrets/kubernetes.io/serviceaccount";
    const upstream = injected
      ? await loadUpstream({ env: io.env, server: inClusterServer(io.env), caFile: join(realSaDir, "ca.crt") })
      : await loadUpstream({
          env: io.env,
          ...(values.kubeconfig === undefined ? {} : { kubeconfigPath: values.kubeconfig }),
          ...(values.server === undefined ? {} : { server: values.server }),
          ...(values["certificate-authority"] === undefined ? {} : { caFile: values["certificate-authority"] }),
        });
    const ranges = staticRanges(spec, podName);
    let member: RingMember | undefined;
    let ownership: OwnershipSource;
    if (ranges === undefined) {
      // Ring mode: the sidecar's own identity (never the controller's) holds
      // the member Lease and reads the ShardRing.
      const ring = values.ring;
      const namespace = values["pod-namespace"] ?? io.env.POD_NAMESPACE;
      if (ring === undefined || ring === "") throw new UsageError("--ring", "--shards ring needs --ring NAME (the webhook sets it from shardcar.io/ring or the owning workload)");
      if (podName === undefined || namespace === undefined) throw new UsageError("--pod-name", "--shards ring needs --pod-name and --pod-namespace (or POD_NAME and POD_NAMESPACE)");
      const handoff = values.handoff ?? "overlap";
      if (handoff !== "overlap" && handoff !== "exclusive") throw new UsageError("--handoff", `invalid --handoff ${JSON.stringify(handoff)}: expected overlap or exclusive`);
      // Ring code and client-node load only in ring mode (idle RSS, P6).
      const [{ RingMember }, { HandoffMode }] = await Promise.all([import("../../ring/member.ts"), import("../../ring/table.ts")]);
      member = new RingMember({
        kubeConfig: await sidecarKubeConfig({ injected, realSaDir, env: io.env, kubeconfig: values.kubeconfig, server: values.server, caFile: values["certificate-authority"] }),
        namespace,
        ring,
        member: podName,
        mode: handoff === "overlap" ? HandoffMode.Overlap : HandoffMode.Exclusive,
        log: logger.child({ component: "ring-member" }),
        registry,
      });
      ownership = member;
    } else {
      ownership = new StaticOwnership(ranges);
    }
    const lockSpec = values["leader-election"] === undefined ? undefined : parseLockSpec(values["leader-election"], "--leader-election");
    const identity = shardIdentity(spec, podName) ?? podName;
    if (lockSpec !== undefined && identity === undefined) {
      throw new UsageError("--leader-election", "--leader-election needs a shard identity: use i/N or ordinal/N, or give --pod-name");
    }
    const lock = lockSpec === undefined || identity === undefined ? undefined : { spec: lockSpec, identity };
    const readiness: ReadinessCheck[] = [];
    if (member !== undefined) {
      let started = false;
      const m = member;
      readiness.push({ name: "ring-member", check: () => (started ? undefined : "the member Lease is not held yet") });
      // Joins in the background: the proxy serves (owning nothing) meanwhile.
      m.start(io.signal).then(
        () => {
          started = true;
        },
        (e: unknown) => logger.error({ err: e instanceof Error ? e.message : String(e) }, "ring member failed to start"),
      );
    }
    let tls: { cert: string; key: string } | undefined;
    let injectedMode: InjectedMode | undefined;
    if (injected) {
      const { startInjectedMode } = await import("../../proxy/injected/index.ts");
      injectedMode = await startInjectedMode({
        sharedDir: values["sa-dir"] ?? "",
        realServiceAccountDir: realSaDir,
        listenHost: "127.0.0.1",
        listenPort: listen.port,
        writeKubeconfig: values["write-kubeconfig"] === true,
        logger,
        signal: io.signal,
      });
      tls = injectedMode.tls;
      const mode = injectedMode;
      readiness.push({ name: "service-account-files", check: () => (mode.ready ? undefined : "token, namespace and ca.crt are not in place yet") });
    } else if (values["tls-cert"] !== undefined && values["tls-key"] !== undefined) {
      tls = { cert: readFileSync(values["tls-cert"], "utf8"), key: readFileSync(values["tls-key"], "utf8") };
    }
    const running = await startProxy({
      listen,
      ...(admin === undefined ? {} : { admin }),
      ...(tls === undefined ? {} : { tls }),
      upstream,
      resources,
      ownership,
      fallback,
      logger,
      readiness,
      registry,
      ...(lock === undefined ? {} : { lock }),
      bookmarkIntervalMs,
      relistJitterMs,
      // Static ranges never shrink: no index to keep.
      syntheticDeletes: member !== undefined && syntheticFlag === "true",
      waitForRangesMs: member === undefined ? 0 : waitForRangesMs,
      maxItemBytes,
    });
    logger.info({ url: running.url, admin: running.adminUrl, upstream: upstream.url.origin, resources: resources.map((r) => r.resource) }, "proxy ready");
    io.stdout.write(`shardcar proxy listening on ${running.url}\n`);
    await new Promise<void>((resolve) => io.signal.addEventListener("abort", () => resolve(), { once: true }));
    // Leave the ring first: ranges are handed over while the proxy still serves.
    await member?.leave();
    await running.close();
    await injectedMode?.close();
    return 0;
  },
};
