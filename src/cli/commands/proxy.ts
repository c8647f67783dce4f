import { switchFlags, valueFlags } from "../../flag-table.ts";
import { Registry } from "../../prom.ts";
import { SERVICE_ACCOUNT_DIR } from "../../kube/config.ts";
import type { RingMember } from "../../ring/member.ts";
import type { ReadinessCheck } from "../../proxy/reporting/admin.ts";
import type { InjectedMode } from "../../proxy/injected/mode.ts";
import { createLogger } from "../../log.ts";
import type { ProxyFiltering } from "../../proxy/request/filtering.ts";
import { StaticOwnership, type OwnershipSource } from "../../shard/ownership.ts";
import { parseListen, startProxy } from "../../proxy/run.ts";
import { UpstreamProbe } from "../../proxy/serving/upstream-probe.ts";
import { monotonicClock } from "../../clock.ts";
import { slotAlignedRanges, slotLabelKey } from "../../shard/slots.ts";
import { parseLabelKey, shardIdentity, staticRanges } from "../../shard/spec.ts";
import { SETTING_FLAGS, settingsFromFlags } from "../../settings/pod-settings.ts";
import { DEFAULT_SLOT_COUNT, MAX_SLOT_COUNT } from "../../shard/table.ts";
import type { Command } from "../command.ts";
import { UsageError, durationFlag, intFlag, parseFlags } from "../flags.ts";
import { loopbackTls } from "../serving-tls.ts";
import { adminAccessFor, ringClient, sidecarAccess } from "../sidecar-access.ts";

/** Every flag of `shardcar proxy`: the pod settings (src/settings/) and the sidecar's own. */
export const PROXY_FLAGS = {
  ...SETTING_FLAGS,
  ...valueFlags("listen", "admin-listen", "kubeconfig", "server", "certificate-authority", "tls-cert", "tls-key", "write-ca", "pod-name", "bookmark-interval", "relist-jitter", "wait-for-ranges", "leave-timeout", "max-item-bytes", "log-level", "sa-dir", "real-sa-dir", "pod-namespace", "slot-label", "slot-count"),
  ...switchFlags("debug-remote", "metrics-auth", "tls", "injected"),
} as const;

export const proxyCommand: Command = {
  name: "proxy",
  usage: `Usage: shardcar proxy --resources LIST [flags]

Listens on loopback, forwards to the apiserver, adds the pod's shard selector
to every LIST and WATCH of the sharded resources, and filters list items and
watch events itself whenever the apiserver did not.

Flags:
  --resources LIST        sharded resources and keys (required), key uid (default),
                          namespace or owner (the controller ownerReference's uid),
                          e.g. "widgets.example.com, configmaps=owner, pods=namespace"
  --shards SPEC           i/N, ordinal/N, a shardRange(...) selector, or ring (default ring)
  --ring NAME             ring mode: the ShardRing this pod joins; labels mode: names
                          the slot label shard.shardcar.io/NAME
  --filter MODE           how the apiserver is asked to filter: shardselector (default;
                          KEP-5866, needs the ShardedListAndWatch gate; owner keys are
                          filtered by the proxy) or labels (the slot label, any version)
  --slot-label KEY        labels mode: the slot label key instead of shard.shardcar.io/<ring>
  --slot-count N          labels mode with static shards: slots the keyspace is cut into
                          (default 256; a ring's count comes from its ShardRing)
  --handoff MODE          ring mode: overlap (duplicates, never gaps) or exclusive (never two
                          owners); default exclusive when a resource is keyed by owner, else overlap
  --pod-namespace NS      default $POD_NAMESPACE (ring mode: where the Lease and ShardRing live)
  --fallback MODE         filter (default) or fail: answer 503 when the server did not filter
  --listen HOST:PORT      proxy listener, loopback only (default 127.0.0.1:7443)
  --admin-listen H:P      /metrics, /healthz, /readyz, /debug/shardcar (default 127.0.0.1:9464;
                          the webhook sets 0.0.0.0 for the kubelet's probes; "off" disables)
  --debug-remote          answer /debug/shardcar beyond loopback (for shardcar audit --canary
                          through the apiserver's pod proxy); default: loopback peers only
  --metrics-auth          /metrics only for requests the apiserver authenticates (TokenReview)
                          and authorizes (SubjectAccessReview: get on the path), over TLS;
                          needs the sidecar's own credentials, and RBAC (docs/operations.md)
  --kubeconfig PATH       the apiserver and the ring member's credentials (default: $KUBECONFIG,
                          else in-cluster, else ~/.kube/config; both always from the same one)
  --server URL            upstream URL instead of the kubeconfig's (with --certificate-authority);
                          the ring member's credentials then come from --kubeconfig only
  --certificate-authority PATH
  --tls                   serve TLS on the loopback listener with a certificate made at start
                          for 127.0.0.1 and localhost: kubectl and client-go send their token
                          only over https (to an http:// proxy they send none)
  --write-ca PATH         with --tls: write the certificate clients must trust to PATH
  --tls-cert PATH --tls-key PATH   serve TLS with this certificate instead
  --pod-name NAME         default $POD_NAME (needed for ordinal/N and ring)
  --bookmark-interval D   minimum gap between synthetic bookmarks per watch (default 1s)
  --relist-jitter D       spread forced relists after a range change (default 0s)
  --synthetic-deletes B   ring mode: when the owned ranges only shrink, send DELETED events
                          for objects leaving them instead of forcing a relist (default true)
  --wait-for-ranges D     ring mode: hold the controller's sharded requests until the ring
                          gives this member its first ranges, at most D (default 30s; 0 serves
                          at once, for an empty shard, and relists when the ranges come)
  --leave-timeout D       ring mode: on SIGTERM, how long to keep serving while the ring hands
                          this member's slots on before giving up and exiting (default 25s:
                          below the pod's default 30 s grace period; the webhook sets it
                          from terminationGracePeriodSeconds). A member that cannot reach
                          the apiserver gives up at once: nothing can be handed on
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
  shardcar proxy --resources pods --shards 0/3 --listen 127.0.0.1:7002 --tls --write-ca /tmp/shardcar-proxy-ca.crt
  shardcar proxy --kubeconfig ~/.kube/config --resources "pods,configmaps=namespace" --shards 1/2
  shardcar proxy --injected --sa-dir /var/run/shardcar/serviceaccount --resources pods --shards ordinal/3
`,
  async run(argv, io) {
    const { values } = parseFlags(argv, PROXY_FLAGS);
    const settings = settingsFromFlags(values, { slotLabel: values["slot-label"] !== undefined });
    const { resources, shards: spec, fallback, filter: filterMode } = settings;
    const listen = parseListen("--listen", values.listen ?? "127.0.0.1:7443");
    const adminFlag = values["admin-listen"] ?? "127.0.0.1:9464";
    const admin = adminFlag === "off" ? undefined : parseListen("--admin-listen", adminFlag);
    const bookmarkIntervalMs = durationFlag("--bookmark-interval", values["bookmark-interval"], 1000);
    const relistJitterMs = durationFlag("--relist-jitter", values["relist-jitter"], 0);
    const waitForRangesMs = durationFlag("--wait-for-ranges", values["wait-for-ranges"], 30_000);
    // Below the pod's default 30 s grace period, with time left to close.
    const leaveTimeoutMs = durationFlag("--leave-timeout", values["leave-timeout"], 25_000);
    const maxItemBytes = intFlag("--max-item-bytes", values["max-item-bytes"], 16 * 1024 * 1024, 1024);
    const podName = values["pod-name"] ?? io.env.POD_NAME;

    const logger = createLogger({ level: values["log-level"] ?? "info", name: "shardcar-proxy" });
    const registry = new Registry();
    const injected = values.injected === true;
    if (injected && values["sa-dir"] === undefined) throw new UsageError("--sa-dir", "--injected needs --sa-dir, the emptyDir the app containers mount");
    if (injected && (values.tls === true || values["tls-cert"] !== undefined || values["write-ca"] !== undefined || values.server !== undefined || values.kubeconfig !== undefined)) {
      throw new UsageError("--injected", "--injected generates its own TLS and uses the in-cluster apiserver; drop --tls/--tls-cert/--tls-key/--write-ca/--server/--kubeconfig");
    }
    const realSaDir = values["real-sa-dir"] ?? SERVICE_ACCOUNT_DIR;
    const access = await sidecarAccess({ injected, server: values.server, caFile: values["certificate-authority"], kubeconfig: values.kubeconfig, saDir: realSaDir, env: io.env });
    const { upstream } = access;
    if (filterMode === "shardselector" && (values["slot-label"] !== undefined || values["slot-count"] !== undefined)) {
      throw new UsageError("--filter", "--slot-label and --slot-count need --filter labels");
    }
    if (spec.mode === "ring" && values["slot-count"] !== undefined) {
      throw new UsageError("--slot-count", "--slot-count is for static shards; a ring's slot count comes from its ShardRing");
    }
    const staticSlotCount = intFlag("--slot-count", values["slot-count"], DEFAULT_SLOT_COUNT, 1, MAX_SLOT_COUNT);
    let labelKey: string | undefined;
    if (filterMode === "labels") {
      if (values["slot-label"] !== undefined) labelKey = parseLabelKey(values["slot-label"], "--slot-label");
      else if (settings.ring === undefined) throw new UsageError("--ring", "--filter labels needs --ring NAME (the slot label is shard.shardcar.io/NAME) or --slot-label KEY");
      else labelKey = slotLabelKey(settings.ring);
    }
    const given = staticRanges(spec, podName);
    // Labels mode enforces whole slots: a static i/N whose bounds cut slots becomes its slot-aligned neighbour.
    const ranges = given === undefined || labelKey === undefined ? given : slotAlignedRanges(given, staticSlotCount);
    let member: RingMember | undefined;
    let ownership: OwnershipSource;
    if (ranges === undefined) {
      // Ring mode: the sidecar's own identity (never the controller's) holds
      // the member Lease and reads the ShardRing.
      const ring = settings.ring;
      const namespace = values["pod-namespace"] ?? io.env.POD_NAMESPACE;
      if (ring === undefined) throw new UsageError("--ring", "--shards ring needs --ring NAME (the webhook sets it from shardcar.io/ring or the owning workload)");
      if (podName === undefined || namespace === undefined) throw new UsageError("--pod-name", "--shards ring needs --pod-name and --pod-namespace (or POD_NAME and POD_NAMESPACE)");
      // Ring code loads only in ring mode, and client-node not even then
      // unless the credentials need it (idle RSS, P6).
      const { RingMember } = await import("../../ring/member.ts");
      member = new RingMember({
        client: await ringClient(access, logger),
        namespace,
        ring,
        member: podName,
        mode: settings.handoff,
        leaveTimeoutMs,
        log: logger.child({ component: "ring-member" }),
        registry,
      });
      ownership = member;
    } else {
      ownership = new StaticOwnership(ranges);
    }
    const ringMember = member;
    const filtering: ProxyFiltering =
      labelKey === undefined ? { mode: "shardselector" } : { mode: "labels", labelKey, slotCount: ringMember === undefined ? () => staticSlotCount : () => ringMember.slotCount };
    const lockSpec = settings.leaderElection;
    const identity = shardIdentity(spec, podName) ?? podName;
    if (lockSpec !== undefined && identity === undefined) {
      throw new UsageError("--leader-election", "--leader-election needs a shard identity: use i/N or ordinal/N, or give --pod-name");
    }
    const lock = lockSpec === undefined || identity === undefined ? undefined : { spec: lockSpec, identity };
    // Not ready until the upstream answers; a wrong --server is named in the log at once.
    const probe = new UpstreamProbe({ upstream, logger, clock: monotonicClock });
    const readiness: ReadinessCheck[] = [probe.readiness];
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
      const { startInjectedMode } = await import("../../proxy/injected/mode.ts");
      injectedMode = await startInjectedMode({
        sharedDir: values["sa-dir"] ?? "",
        realServiceAccountDir: realSaDir,
        listenHost: "127.0.0.1",
        listenPort: listen.port,
        writeKubeconfig: settings.kubeconfig,
        logger,
        signal: io.signal,
      });
      tls = injectedMode.tls;
      const mode = injectedMode;
      readiness.push({ name: "service-account-files", check: () => (mode.ready ? undefined : "token, namespace and ca.crt are not in place yet") });
    } else {
      tls = await loopbackTls({ tls: values.tls === true, certFile: values["tls-cert"], keyFile: values["tls-key"], writeCa: values["write-ca"] });
    }
    const adminAccess = admin === undefined ? undefined : await adminAccessFor({ debugRemote: values["debug-remote"] === true, metricsAuth: values["metrics-auth"] === true, access });
    const preStop = member === undefined ? undefined : stepAsideOnPreStop(member, leaveTimeoutMs, io.signal);
    const started = startProxy({
      ...(preStop === undefined ? {} : { preStop }),
      listen,
      ...(admin === undefined ? {} : { admin }),
      ...(adminAccess === undefined ? {} : { adminAccess }),
      ...(tls === undefined ? {} : { tls }),
      upstream,
      upstreamFailed: () => probe.suspect(),
      resources,
      ownership,
      fallback,
      filtering,
      logger,
      readiness,
      registry,
      ...(lock === undefined ? {} : { lock }),
      bookmarkIntervalMs,
      relistJitterMs,
      // Static ranges never shrink: no index to keep.
      syntheticDeletes: member !== undefined && settings.syntheticDeletes,
      waitForRangesMs: member === undefined ? 0 : waitForRangesMs,
      maxItemBytes,
    });
    // A listener that cannot open (a port in use) ends the command: what
    // started already must not keep the process alive.
    const running = await started.catch(async (e: unknown) => {
      member?.halt();
      await injectedMode?.close();
      throw e;
    });
    logger.info({ url: running.url, admin: running.adminUrl, upstream: upstream.url.origin, resources: resources.map((r) => `${r.resource}=${r.key}`), filter: filterMode, ...(labelKey === undefined ? {} : { slotLabel: labelKey }) }, "proxy ready");
    io.stdout.write(`shardcar proxy listening on ${running.url}${running.adminUrl === undefined ? "" : ` (admin ${running.adminUrl})`}\n`);
    probe.start();
    await new Promise<void>((resolve) => io.signal.addEventListener("abort", () => resolve(), { once: true }));
    probe.stop();
    // Leave the ring first: ranges are handed over while the proxy still serves.
    await member?.leave();
    await running.close();
    await injectedMode?.close();
    return 0;
  },
};

/**
 * The controller container's preStop hook (the injector adds it): hand the
 * slots on while the controller still runs, then let the kubelet stop it.
 * The pod's end follows within its grace period (the leave timeout + 5 s); a
 * hook that is not followed by it (the controller restarted by its liveness
 * probe, or a request from elsewhere on the pod network) is taken back then.
 */
function stepAsideOnPreStop(member: RingMember, leaveTimeoutMs: number, stopping: AbortSignal): () => Promise<string> {
  let rejoin: NodeJS.Timeout | undefined;
  stopping.addEventListener("abort", () => clearTimeout(rejoin), { once: true });
  return async () => {
    clearTimeout(rejoin);
    rejoin = setTimeout(() => member.rejoin(), leaveTimeoutMs + 5_000).unref();
    await member.stepAside();
    return member.current().ranges.length === 0 ? "slots handed on" : "leave timeout passed; slots still held";
  };
}
