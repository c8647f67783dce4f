import { switchFlags, valueFlags } from "../../flag-table.ts";
import { formatPreflight } from "../../ops/checks.ts";
import { runPreflight } from "../../ops/preflight.ts";
import { settingsFromFlags } from "../../settings/pod-settings.ts";
import type { Command } from "../command.ts";
import { intFlag, parseFlags, UsageError } from "../flags.ts";
import { KUBE_FLAGS, KUBE_FLAGS_HELP, kubeFromFlags } from "../kube-flags.ts";

export const preflightCommand: Command = {
  name: "preflight",
  usage: `Usage: shardcar preflight --resources LIST [flags]

Answers "can I turn this on safely?" for one controller, against the cluster
of a kubeconfig, with one verdict per check (PASS, WARN, FAIL):

  - whether the apiserver honours shardSelector for each resource: a few small
    sharded LISTs (limit=1) that exclude a known object; typed lists must carry
    metadata.shardInfo, custom resources are judged by the items returned.
    Several probes, because an HA control plane can answer each differently;
  - whether the controller's ServiceAccount has the RBAC the sidecar needs;
  - whether the leader-election lock exists, and of which kind;
  - whether the webhook is installed with a valid CA bundle;
  - for label-based setups, whether every object carries the shard label;
  - with --filter labels (before switching the pods to shardcar.io/filter:
    labels): whether the ShardRing --ring is in labels mode and labels every
    resource with the same key, whether every object already carries its
    right slot label (FAIL names how many and which, while any does not), and
    whether the webhook configuration sends CREATE and UPDATE of each
    resource to /label-slots.

Flags:
  --resources LIST        sharded resources and keys, as in shardcar.io/resources,
                          e.g. "pods, configmaps=namespace" (required)
  --namespace NS          the controller's namespace (default: the context's, else default)
  --service-account NAME  check RBAC as system:serviceaccount:NS:NAME (SubjectAccessReview);
                          default: as the kubeconfig's own user (SelfSubjectAccessReview)
  --shards SPEC           ring (default), i/N, ordinal/N or a selector: decides the RBAC needed
  --leader-election LOCK  the controller's lock: leases/NAME, configmaps/NAME or endpoints/NAME
  --webhook NAME          MutatingWebhookConfiguration to check (default shardcar; "none" skips)
  --webhook-secret NS/NAME  serving-certificate Secret (default <service namespace>/shardcar-webhook-tls)
  --shard-label KEY       label-based setups: every object must carry label KEY
  --filter MODE           shardselector (default) or labels: what the pods' shardcar.io/filter will say
  --ring NAME             the pods' ring (shardcar.io/ring); required with --filter labels
  --probes N              sharded probe LISTs per resource (default 4)
  --require-server-filtering  FAIL (not WARN) when the server ignores shardSelector
  --json                  print the report as JSON
${KUBE_FLAGS_HELP}

Exit status: 0 ready (warnings allowed), 1 a check failed, 2 bad flags.

Examples:
  shardcar preflight --resources pods --namespace shop --service-account web
  shardcar preflight --resources "pods, configmaps=namespace" --shards ordinal/3 \\
      --leader-election leases/web-controller --namespace shop --json
  shardcar preflight --resources releases.convoy.kumodo.io --shard-label convoy.kumodo.io/shard --webhook none
  shardcar preflight --resources "widgets.example.com, configmaps=namespace" --filter labels --ring web --namespace shop
`,
  async run(argv, io) {
    const { values } = parseFlags(argv, {
      ...KUBE_FLAGS,
      ...valueFlags("resources", "service-account", "shards", "leader-election", "webhook", "webhook-secret", "shard-label", "filter", "ring", "probes"),
      ...switchFlags("require-server-filtering", "json"),
    });
    // The pod's own settings, read as the proxy reads them.
    const { resources, shards, leaderElection: lock, filter, ring } = settingsFromFlags({
      resources: values.resources,
      shards: values.shards,
      "leader-election": values["leader-election"],
      filter: values.filter,
      ring: values.ring,
    });
    const probes = intFlag("--probes", values.probes, 4, 1, 100);
    const secret = values["webhook-secret"];
    if (secret !== undefined && !/^[a-z0-9][-a-z0-9.]*\/[a-z0-9][-a-z0-9.]*$/.test(secret)) {
      throw new UsageError("--webhook-secret", `invalid --webhook-secret ${JSON.stringify(secret)}: expected namespace/name`);
    }
    const label = values["shard-label"];
    if (label !== undefined && !/^([a-z0-9.-]+\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(label)) {
      throw new UsageError("--shard-label", `invalid --shard-label ${JSON.stringify(label)}: expected a label key, e.g. convoy.kumodo.io/shard`);
    }
    if (filter === "labels" && ring === undefined) throw new UsageError("--ring", "--filter labels needs --ring NAME: the ShardRing whose slot label the pods will select by");
    const { client, namespace } = await kubeFromFlags(values, io.env);
    const webhook = values.webhook === "none" || values.webhook === "" ? undefined : (values.webhook ?? "shardcar");
    const report = await runPreflight(client, {
      resources,
      shards,
      namespace,
      serviceAccount: values["service-account"],
      lock: lock === undefined ? undefined : { kind: lock.resource, name: lock.name },
      webhook,
      webhookSecret: secret,
      shardLabel: label,
      labelRing: filter === "labels" ? ring : undefined,
      probes,
      requireServerFiltering: values["require-server-filtering"] === true,
      now: Date.now,
    });
    io.stdout.write(values.json === true ? JSON.stringify(report, null, 2) + "\n" : formatPreflight(report));
    return report.ok ? 0 : 1;
  },
};
