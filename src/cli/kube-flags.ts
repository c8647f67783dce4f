/**
 * The flags every command that talks to a cluster shares (`--kubeconfig`,
 * `--context`, `--namespace`), and the one place they become a client.
 */
import { KubeClient, loadKubeConfig } from "../ops/kube.ts";

export const KUBE_FLAGS = {
  kubeconfig: { type: "string" },
  context: { type: "string" },
  namespace: { type: "string" },
} as const;

export const KUBE_FLAGS_HELP = `  --kubeconfig PATH       kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster)
  --context NAME          kubeconfig context (default: the current one)`;

export interface KubeFlagValues {
  readonly kubeconfig?: string | undefined;
  readonly context?: string | undefined;
  readonly namespace?: string | undefined;
}

/** A client and the namespace: `--namespace`, else the context's, else `default`. */
export function kubeFromFlags(values: KubeFlagValues, env: NodeJS.ProcessEnv): { client: KubeClient; namespace: string } {
  const kc = loadKubeConfig({ kubeconfig: values.kubeconfig, context: values.context, env });
  const ctx = kc.getContextObject(kc.getCurrentContext());
  return { client: new KubeClient(kc), namespace: values.namespace ?? ctx?.namespace ?? "default" };
}
