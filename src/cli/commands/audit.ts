import { switchFlags, valueFlags } from "../../flag-table.ts";
import { randomBytes } from "node:crypto";
import { formatAudit } from "../../ops/audit.ts";
import { loadRing, readLabelRing, runAudit, runLabelAudit } from "../../ops/audit-run.ts";
import { formatLabelAudit, type LabelAuditReport } from "../../ops/label-audit.ts";
import { ShardcarError } from "../../errors.ts";
import { formatCanary } from "../../ops/canary.ts";
import { httpProbe, podProxyProbe, runCanary, type DeliveredProbe } from "../../ops/canary-run.ts";
import { resolveResource, resourceName } from "../../ops/kube.ts";
import { staticOwners, type OwnerSet } from "../../ops/owners.ts";
import { parseResources } from "../../shard/spec.ts";
import type { Command } from "../command.ts";
import { durationFlag, intFlag, parseFlags, UsageError } from "../flags.ts";
import { KUBE_FLAGS, KUBE_FLAGS_HELP, kubeFromFlags, withApiErrors } from "../kube-flags.ts";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export const auditCommand: Command = {
  name: "audit",
  usage: `Usage: shardcar audit --resource RES (--shards N | --ring NAME) [flags]
       shardcar audit --ring NAME [flags]      (a labels-mode ring: its slot labels)

Answers "is every object owned right now?". Lists the resource once in full
(paged, resourceVersion=0) and once per owner with its selector, at the same
resourceVersion, and shows that the owners' counts add up to the total. Names
the objects no serving replica has (missing: a silent gap) or several have
(duplicated), the objects per owner and the skew (max/mean), and for namespace
keying the largest namespaces.

For a ring, each member's ranges are the slots its Lease says its proxy
enforces right now; a member whose Lease expired or was fenced serves nothing.

For a ring in labels mode (spec.filter: labels) it also checks the slot
label shard.shardcar.io/<ring> of every object: how many carry their right
slot, and which are unlabelled or mislabelled (each of those is in no cache).
Without --resource it does that for every resource of the ring's
spec.resources.

With --canary it also creates one short-lived object per owner's ranges (uids
cannot be chosen: it creates objects until each range has one, up to a bound,
deleting the extra ones at once), then asks each proxy's admin endpoint
(/debug/shardcar?key=) whether its controller's watch delivered it, and
deletes the canaries. Canary pods carry a scheduling gate and never run.

Flags:
  --resource RES          one sharded resource and key: pods, configmaps=namespace,
                          things.example.com (required, except for a labels-mode --ring)
  --shards N              audit N equal static ranges (i/N)
  --ring NAME             audit ring NAME (its ShardRing and member Leases in --namespace)
  --namespace NS          the ring's namespace, and where canaries are created
                          (default: the context's, else default)
  --page-size N           LIST page size (default 500)
  --top N                 largest namespaces to name under namespace keying (default 5)
  --canary                also check, with one canary per range, that its owner delivered it
  --canary-max N          objects created at most for the canaries (default 20 per range)
  --canary-timeout D      how long a proxy has to deliver its canary (default 15s)
  --admin-url OWNER=URL   a proxy's admin URL (repeatable); OWNER is the member name, or i
                          for --shards. Default for rings: the API server's pod proxy
  --admin-port N          the sidecar's admin port, for the pod proxy (default 9464)
  --json                  print the report as JSON
${KUBE_FLAGS_HELP}

Exit status: 0 nothing missing or duplicated (and canaries delivered, and every slot
label right), 1 otherwise, 2 bad flags.

Examples:
  shardcar audit --resource pods --ring web --namespace shop
  shardcar audit --resource configmaps=namespace --shards 3 --top 10
  shardcar audit --resource pods --ring web --namespace shop --canary
  shardcar audit --ring web --namespace shop          # labels mode: every resource's slot labels
  shardcar audit --resource pods --shards 2 --canary --admin-url 0=http://127.0.0.1:9464 --admin-url 1=http://127.0.0.1:9465
`,
  async run(argv, io) {
    const { values } = parseFlags(argv, {
      ...KUBE_FLAGS,
      "admin-url": { type: "string", multiple: true },
      ...valueFlags("resource", "shards", "ring", "page-size", "top", "canary-max", "canary-timeout", "admin-port"),
      ...switchFlags("canary", "json"),
    });
    if (values.resource === undefined && values.ring === undefined) throw new UsageError("--resource", "--resource is required, e.g. --resource pods (or --ring NAME alone for a labels-mode ring)");
    const [resource, ...more] = values.resource === undefined ? [] : parseResources(values.resource, "--resource");
    if (values.resource !== undefined && (resource === undefined || more.length > 0)) throw new UsageError("--resource", `invalid --resource ${JSON.stringify(values.resource)}: audit one resource at a time`);
    if ((values.shards === undefined) === (values.ring === undefined)) throw new UsageError("--shards", "give exactly one of --shards N or --ring NAME");
    const n = values.shards === undefined ? undefined : intFlag("--shards", values.shards, 1, 1, 4096);
    if (values.ring !== undefined && !DNS_LABEL.test(values.ring)) throw new UsageError("--ring", `invalid --ring ${JSON.stringify(values.ring)}: expected a ring name (a DNS label)`);
    const pageSize = intFlag("--page-size", values["page-size"], 500, 1, 100_000);
    const top = intFlag("--top", values.top, 5, 0, 1000);
    const adminPort = intFlag("--admin-port", values["admin-port"], 9464, 1, 65535);
    const canaryTimeout = durationFlag("--canary-timeout", values["canary-timeout"], 15_000);
    const canaryMaxFlag = values["canary-max"] === undefined ? undefined : intFlag("--canary-max", values["canary-max"], 0, 1, 100_000);
    const adminUrls = new Map<string, string>();
    for (const entry of values["admin-url"] ?? []) {
      const m = /^([^=]+)=(https?:\/\/.+)$/.exec(entry);
      if (!m) throw new UsageError("--admin-url", `invalid --admin-url ${JSON.stringify(entry)}: expected OWNER=http://host:port`);
      const owner = m[1] ?? "";
      // For static ranges, "1" names owner "1/N".
      adminUrls.set(n !== undefined && /^\d+$/.test(owner) ? `${owner}/${n}` : owner, m[2] ?? "");
    }

    const { client, namespace } = await kubeFromFlags(values, io.env);
    return withApiErrors("audit", io, async () => {
      // Labels mode: every object of the ring's resources must carry its slot.
      const labelRing = values.ring === undefined ? undefined : await readLabelRing(client, namespace, values.ring);
      const labelled = labelRing?.ring?.resources.filter((r) => resource === undefined || (r.group === resource.group && r.resource === resource.resource)) ?? [];
      const labels: LabelAuditReport[] = [];
      if (labelRing?.ring !== undefined) for (const r of labelled) labels.push(await runLabelAudit(client, labelRing.ring, r, { pageSize }));
      if (resource === undefined) {
        if (labelRing?.ring === undefined) throw new ShardcarError("SHARDCAR_ERR_CONFIG", `--resource is required: ${labelRing?.problem ?? `ShardRing ${namespace}/${values.ring ?? ""} is not in labels mode`}`);
        if (values.json === true) io.stdout.write(JSON.stringify({ labels }, null, 2) + "\n");
        else io.stdout.write(labels.map(formatLabelAudit).join("\n"));
        return labels.every((l) => l.ok) ? 0 : 1;
      }
      const resolved = await resolveResource(client, resource);
      const owners: OwnerSet = n !== undefined ? staticOwners(n) : await loadRing(client, namespace, values.ring ?? "", Date.now());
      const canaryMax = canaryMaxFlag ?? 20 * Math.max(1, owners.owners.length);
      const report = await runAudit(client, { resource: resolved, owners, pageSize, topNamespaces: top });
      let canary;
      if (values.canary === true) {
        const rid = resourceName(resolved);
        const direct = httpProbe(adminUrls, rid);
        const viaPods = values.ring === undefined ? undefined : podProxyProbe(client, namespace, adminPort, rid);
        const probe: DeliveredProbe = (owner, key) => (adminUrls.has(owner.name) || viaPods === undefined ? direct(owner, key) : viaPods(owner, key));
        canary = await runCanary(client, { resource: resolved, owners, namespace, maxObjects: canaryMax, timeoutMs: canaryTimeout, delivered: probe, runId: randomBytes(4).toString("hex") });
      }
      if (values.json === true) io.stdout.write(JSON.stringify({ ...report, ...(canary === undefined ? {} : { canary }), ...(labels.length === 0 ? {} : { labels }) }, null, 2) + "\n");
      else {
        io.stdout.write(formatAudit(report));
        if (canary !== undefined) io.stdout.write("\n" + formatCanary(canary));
        for (const l of labels) io.stdout.write("\n" + formatLabelAudit(l));
      }
      return report.ok && (canary?.ok ?? true) && labels.every((l) => l.ok) ? 0 : 1;
    });
  },
};
