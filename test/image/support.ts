/**
 * The built image and the podman options this host needs, as
 * test/image/run.sh hands them over (image/podman-args.sh chose the options),
 * and small wrappers to run podman with them.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The image under test, or undefined outside the image lane. */
export const IMAGE: string | undefined = process.env["SHARDCAR_IMAGE"];
/** Options every `podman run` here needs (runtime, ulimits); empty where plain podman works. */
export const PODMAN_ARGS: string[] = (process.env["SHARDCAR_PODMAN_ARGS"] ?? "").split(" ").filter((a) => a !== "");

/**
 * The pod securityContext the manifests and the webhook set, in podman's
 * terms: read-only root with no tmpfs added (podman's --read-only would
 * otherwise mount writable /tmp, /var/tmp and /run, which Kubernetes does
 * not), no capabilities, no privilege escalation.
 */
export const RESTRICTED = ["--read-only", "--read-only-tmpfs=false", "--cap-drop=all", "--security-opt=no-new-privileges"];

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs podman with `args`; resolves with the exit code instead of throwing. */
export async function podman(args: string[], timeoutMs = 120_000): Promise<Ran> {
  try {
    const { stdout, stderr } = await run("podman", args, { maxBuffer: 64 * 1024 * 1024, timeout: timeoutMs });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number | string; stdout?: string; stderr?: string; message: string };
    return { code: typeof e.code === "number" ? e.code : -1, stdout: e.stdout ?? "", stderr: e.stderr ?? e.message };
  }
}

/** `podman run --rm` of the image with this host's options and `extra` before the image name. */
export function runImage(image: string, extra: string[], command: string[]): Promise<Ran> {
  return podman(["run", "--rm", ...PODMAN_ARGS, ...extra, image, ...command]);
}
