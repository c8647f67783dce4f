/**
 * The flags every command that talks to a cluster shares (`--kubeconfig`,
 * `--context`, `--namespace`), and the one place they become a client.
 */
import { ConfigError, ShardcarError } from "../errors.ts";
import { ApiClient } from "../kube/client.ts";
import { connectionFor, loadKubeAccess } from "../kube/config.ts";
import type { CommandIO } from "./command.ts";

export const KUBE_FLAGS = {
  kubeconfig: { type: "string" },
  context: { type: "string" },
  namespace: { type: "string" },
} as const;

export const KUBE_FLAGS_HELP = `  --kubeconfig PATH       kubeconfig to use (default: $KUBECONFIG, else in-cluster, else ~/.kube/config)
  --context NAME          kubeconfig context (default: the current one)`;

export interface KubeFlagValues {
  readonly kubeconfig?: string | undefined;
  readonly context?: string | undefined;
  readonly namespace?: string | undefined;
}

/** A client and the namespace: `--namespace`, else the context's (or the service account's), else `default`. */
export async function kubeFromFlags(values: KubeFlagValues, env: NodeJS.ProcessEnv): Promise<{ client: ApiClient; namespace: string }> {
  const access = await loadKubeAccess({ kubeconfig: values.kubeconfig, context: values.context, env });
  return { client: new ApiClient(await connectionFor(access)), namespace: values.namespace ?? access.namespace ?? "default" };
}

/**
 * Runs `fn`; an API failure (unreachable server, a resource not served, a
 * refused request) becomes one line on stderr and exit 1, not a stack trace.
 * Bad flags (ConfigError) still propagate, to exit 2.
 */
export async function withApiErrors(command: string, io: CommandIO, fn: () => Promise<number>): Promise<number> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ShardcarError && !(e instanceof ConfigError)) {
      io.stderr.write(`shardcar ${command}: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}
