/**
 * The pod sandbox (the "pause" container) of the one-pod kubelet: run by
 * `unshare --mount --net`, so this process holds the pod's network namespace
 * and a mount namespace its containers start from.
 *
 * `node sandbox.ts CONFIG.json`, where the config is a {@link SandboxConfig}.
 * It brings `lo` up with the pod IP on it, mounts the tmpfs of every
 * `medium: Memory` emptyDir (in this namespace only, so nothing outlives the
 * pod), and connects the pod's network to the node's through Unix sockets in
 * the pod directory, which cross network namespaces:
 *
 * - `dial.sock`: one connection per stream; the client writes
 *   `HOST:PORT\n`, reads `OK\n` (or `ERR <reason>\n` and the end) and then
 *   talks to that address inside the pod (the pod IP for the kubelet's
 *   probes and Service traffic, 127.0.0.1 for a port-forward);
 * - egress: for each `port` of `egress`, a listener on 127.0.0.1:PORT in the
 *   pod that pipes to `egress-PORT.sock`, which the kubelet serves by
 *   connecting to 127.0.0.1:PORT on the node (how the pod reaches the
 *   apiserver, whose certificate is for 127.0.0.1).
 *
 * Prints `{"ready":true}` once everything listens; exits on SIGTERM.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { splice } from "./network.ts";
import { join } from "node:path";

export interface SandboxConfig {
  /** The pod directory; the sockets go into `<dir>/net/`. */
  readonly dir: string;
  readonly podIP: string;
  /** Node-side 127.0.0.1 ports the pod reaches at the same 127.0.0.1:PORT. */
  readonly egress: readonly number[];
  /** tmpfs mounts: directory and size option (e.g. `1Mi` → `1m`). */
  readonly tmpfs: ReadonlyArray<{ readonly path: string; readonly size: string | undefined }>;
}

const HEADER_LIMIT = 256;


/** Reads `HOST:PORT\n` from `client`, then pipes it to that address in this namespace. */
function serveDial(client: Socket): void {
  let header = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    header = Buffer.concat([header, chunk]);
    const nl = header.indexOf(10);
    if (nl < 0) {
      if (header.length > HEADER_LIMIT) client.destroy();
      return;
    }
    client.off("data", onData);
    client.pause();
    const target = header.subarray(0, nl).toString("utf8");
    const rest = header.subarray(nl + 1);
    const at = target.lastIndexOf(":");
    const upstream = connect({ host: target.slice(0, at), port: Number(target.slice(at + 1)) });
    upstream.once("connect", () => {
      client.write("OK\n");
      if (rest.length > 0) upstream.write(rest);
      splice(client, upstream);
      client.resume();
    });
    upstream.once("error", (e) => {
      client.end(`ERR ${e.message}\n`);
      client.resume();
    });
  };
  client.on("data", onData);
  client.on("error", () => client.destroy());
}

async function listen(server: ReturnType<typeof createServer>, where: string | { host: string; port: number }): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    if (typeof where === "string") server.listen(where, () => resolve());
    else server.listen(where.port, where.host, () => resolve());
  });
}

async function main(): Promise<void> {
  const configFile = process.argv[2];
  if (configFile === undefined) throw new Error("usage: sandbox.ts CONFIG.json");
  const config = JSON.parse(readFileSync(configFile, "utf8")) as SandboxConfig;
  execFileSync("/usr/sbin/ip", ["link", "set", "lo", "up"]);
  execFileSync("/usr/sbin/ip", ["addr", "add", `${config.podIP}/32`, "dev", "lo"]);
  for (const m of config.tmpfs) {
    const options = ["mode=0777", ...(m.size === undefined ? [] : [`size=${m.size}`])].join(",");
    execFileSync("/usr/bin/mount", ["-t", "tmpfs", "-o", options, "tmpfs", m.path]);
  }
  const net = join(config.dir, "net");
  const dialPath = join(net, "dial.sock");
  rmSync(dialPath, { force: true });
  await listen(createServer(serveDial), dialPath);
  for (const port of config.egress) {
    const socketPath = join(net, `egress-${port}.sock`);
    await listen(
      createServer((c) => {
        const up = connect({ path: socketPath });
        up.once("connect", () => splice(c, up));
        up.once("error", () => c.destroy());
        c.on("error", () => up.destroy());
      }),
      { host: "127.0.0.1", port },
    );
  }
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
}

process.on("SIGTERM", () => process.exit(0));
main().catch((e: unknown) => {
  process.stderr.write(`sandbox: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
