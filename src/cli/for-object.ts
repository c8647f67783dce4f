/**
 * `--for-object NS/NAME --resource RES`, shared by `shardcar hash` and
 * `shardcar ranges N`: which range, and which ring member, owns a live object.
 */
import { resolveResource } from "../ops/kube.ts";
import { formatLocation, locateObject } from "../ops/locate.ts";
import { parseResources } from "../shard/spec.ts";
import type { CommandIO } from "./command.ts";
import { UsageError } from "./flags.ts";
import { KUBE_FLAGS, KUBE_FLAGS_HELP, kubeFromFlags, withApiErrors, type KubeFlagValues } from "./kube-flags.ts";

export const FOR_OBJECT_FLAGS = {
  ...KUBE_FLAGS,
  "for-object": { type: "string" },
  resource: { type: "string" },
  ring: { type: "string" },
} as const;

export const FOR_OBJECT_HELP = `Live objects (reads the cluster of a kubeconfig):
  --for-object NS/NAME    the object to locate (NAME alone for a cluster-scoped resource)
  --resource RES          its resource and key, e.g. pods or configmaps=namespace (required
                          with --for-object)
  --ring NAME             also name the ring member that owns it and the ones delivering it
  --namespace NS          the ring's namespace (default: the context's, else default)
${KUBE_FLAGS_HELP}`;

export interface ForObjectValues extends KubeFlagValues {
  readonly "for-object"?: string | undefined;
  readonly resource?: string | undefined;
  readonly ring?: string | undefined;
  readonly json?: boolean | undefined;
}

export async function runForObject(values: ForObjectValues, io: CommandIO, shards: number | undefined): Promise<number> {
  const ref = values["for-object"] ?? "";
  if (values.resource === undefined) throw new UsageError("--resource", "--for-object needs --resource, e.g. --resource pods");
  const [resource, ...more] = parseResources(values.resource, "--resource");
  if (resource === undefined || more.length > 0) throw new UsageError("--resource", `invalid --resource ${JSON.stringify(values.resource)}: one resource only`);
  if (values.ring !== undefined && !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(values.ring)) throw new UsageError("--ring", `invalid --ring ${JSON.stringify(values.ring)}: expected a ring name`);
  const { client, namespace } = await kubeFromFlags(values, io.env);
  return withApiErrors("--for-object", io, async () => {
    const resolved = await resolveResource(client, resource);
    const loc = await locateObject(client, resolved, ref, { shards, ring: values.ring === undefined ? undefined : { namespace, name: values.ring }, now: Date.now() });
    io.stdout.write(values.json === true ? JSON.stringify(loc, null, 2) + "\n" : formatLocation(loc));
    return 0;
  });
}
